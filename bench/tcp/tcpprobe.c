/*
 * tcpprobe: loopback TCP ceiling for the allreduce benchmark (bench/allreduce.sh).
 *
 *   tcpprobe stream   [--seconds S] [--chunk BYTES]
 *       One TCP stream on 127.0.0.1 between two processes (fork): the client
 *       write()s CHUNK-byte buffers for S seconds, the server read()s them.
 *       Prints the goodput measured by the receiver.
 *
 *   tcpprobe pingpong [--iters K] [--bytes B] [--warmup W] [--spin]
 *       B-byte ping-pong between two processes over 127.0.0.1 with TCP_NODELAY.
 *       Default: blocking read() on both sides (the process sleeps in the
 *       kernel until data arrives). --spin: non-blocking sockets polled in a
 *       busy loop (what MPI's TCP BTL effectively does while it progresses).
 *       Each round trip is timed on the client; prints median / p99 of the
 *       round trip and half of the median as the one-way latency.
 *
 *   --cpus A,B (both modes): pin the client to CPU A and the server to CPU B.
 *       Blocking ping-pong depends a lot on placement: on the same CPU the
 *       wake-up is a context switch; across CPUs it is a cross-CPU wake-up of a
 *       possibly idle CPU (expensive in a VM).
 *
 * Each prints ONE JSON line on stdout. All traffic stays on 127.0.0.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "tcpprobe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int listen_any_port(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(fd, 1) < 0) die("listen");
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0) die("getsockname");
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    return fd;
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("TCP_NODELAY");
}

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die("fcntl");
}

/* Read exactly n bytes; with spin, the socket is non-blocking and polled. */
static int read_full(int fd, char *buf, size_t n, int spin) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r > 0) { got += (size_t)r; continue; }
        if (r == 0) return -1;
        if (errno == EINTR) continue;
        if (spin && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        return -1;
    }
    return 0;
}

static int write_full(int fd, const char *buf, size_t n, int spin) {
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, buf + put, n - put);
        if (w > 0) { put += (size_t)w; continue; }
        if (w < 0 && (errno == EINTR || (spin && (errno == EAGAIN || errno == EWOULDBLOCK)))) continue;
        return -1;
    }
    return 0;
}

static int cpu_client = -1, cpu_server = -1;

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) < 0) die("sched_setaffinity");
}

static void print_cpus(void) {
    if (cpu_client >= 0) printf(",\"cpus\":[%d,%d]", cpu_client, cpu_server);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const double *sorted, int n, double p) {
    int k = (int)((p / 100.0) * n + 0.999999999) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return sorted[k];
}

static double median(const double *sorted, int n) {
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static int run_stream(double seconds, size_t chunk) {
    int port;
    int lfd = listen_any_port(&port);
    /* Receiver is the child; it reports bytes and time through a pipe. */
    int p[2];
    if (pipe(p) < 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        pin(cpu_server);
        close(p[0]);
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) die("accept");
        char *buf = malloc(chunk);
        if (!buf) die("malloc");
        uint64_t total = 0;
        double t0 = 0, t1 = 0;
        for (;;) {
            ssize_t r = read(fd, buf, chunk);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            if (total == 0) t0 = now_s();
            total += (uint64_t)r;
            t1 = now_s();
        }
        double res[2] = {(double)total, t1 - t0};
        if (write(p[1], res, sizeof res) != (ssize_t)sizeof res) _exit(1);
        _exit(0);
    }
    close(p[1]);
    close(lfd);
    pin(cpu_client);
    int fd = connect_port(port);
    char *buf = malloc(chunk);
    if (!buf) die("malloc");
    memset(buf, 0x5a, chunk);
    double end = now_s() + seconds;
    while (now_s() < end)
        if (write_full(fd, buf, chunk, 0) < 0) die("write");
    close(fd);
    double res[2] = {0, 0};
    if (read(p[0], res, sizeof res) != (ssize_t)sizeof res) die("read result");
    int st;
    waitpid(pid, &st, 0);
    double gbps = res[1] > 0 ? res[0] / res[1] / 1e9 : 0;
    printf("{\"impl\":\"tcp-loopback\",\"test\":\"stream\",\"streams\":1,\"chunk_bytes\":%zu,"
           "\"bytes_total\":%.0f,\"seconds\":%.3f,\"gbps\":%.3f",
           chunk, res[0], res[1], gbps);
    print_cpus();
    printf("}\n");
    return 0;
}

static int run_pingpong(int iters, int warmup, size_t bytes, int spin) {
    int port;
    int lfd = listen_any_port(&port);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) { /* echo server */
        pin(cpu_server);
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) die("accept");
        nodelay(fd);
        if (spin) set_nonblock(fd);
        char *buf = malloc(bytes);
        if (!buf) die("malloc");
        for (int i = 0; i < iters + warmup; i++) {
            if (read_full(fd, buf, bytes, spin) < 0) _exit(1);
            if (write_full(fd, buf, bytes, spin) < 0) _exit(1);
        }
        _exit(0);
    }
    close(lfd);
    pin(cpu_client);
    int fd = connect_port(port);
    nodelay(fd);
    if (spin) set_nonblock(fd);
    char *buf = calloc(1, bytes);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!buf || !t) die("malloc");
    for (int i = 0; i < iters + warmup; i++) {
        double t0 = now_s();
        if (write_full(fd, buf, bytes, spin) < 0) die("write");
        if (read_full(fd, buf, bytes, spin) < 0) die("read");
        if (i >= warmup) t[i - warmup] = now_s() - t0;
    }
    close(fd);
    int st;
    waitpid(pid, &st, 0);
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    double med = median(t, iters);
    printf("{\"impl\":\"tcp-loopback\",\"test\":\"pingpong\",\"mode\":\"%s\",\"bytes\":%zu,"
           "\"iters\":%d,\"rtt_median_s\":%.9f,\"rtt_p99_s\":%.9f,\"rtt_min_s\":%.9f,"
           "\"one_way_median_s\":%.9f",
           spin ? "spin" : "blocking", bytes, iters, med, percentile(t, iters, 99.0), t[0],
           med / 2);
    print_cpus();
    printf("}\n");
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: tcpprobe stream [--seconds S] [--chunk BYTES] [--cpus A,B]\n"
            "       tcpprobe pingpong [--iters K] [--warmup W] [--bytes B] [--spin] [--cpus A,B]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    signal(SIGPIPE, SIG_IGN);
    double seconds = 3.0;
    size_t chunk = 1 << 20, bytes = 4;
    int iters = 10000, warmup = 100, spin = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--spin")) { spin = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--seconds")) seconds = atof(v);
        else if (!strcmp(a, "--chunk")) chunk = (size_t)atoll(v);
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--bytes")) bytes = (size_t)atoll(v);
        else if (!strcmp(a, "--cpus")) {
            if (sscanf(v, "%d,%d", &cpu_client, &cpu_server) != 2 || cpu_client < 0 || cpu_server < 0)
                usage();
        }
        else usage();
        i++;
    }
    if (seconds <= 0 || chunk == 0 || bytes == 0 || iters <= 0 || warmup < 0) usage();
    if (!strcmp(argv[1], "stream")) return run_stream(seconds, chunk);
    if (!strcmp(argv[1], "pingpong")) return run_pingpong(iters, warmup, bytes, spin);
    usage();
    return 2;
}

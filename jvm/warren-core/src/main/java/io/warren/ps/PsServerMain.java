package io.warren.ps;

import io.warren.TlsSettings;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * One {@link PsServer} as a process of its own: the child JVM a supervisor (Spark's driver with
 * {@code spark.warren.ps.servers=process}) starts per server, so that a server can die (SIGKILL)
 * without the driver, and be started again with the same index, port and checkpoint directory.
 *
 * <pre>
 * WARREN_JOB_SECRET=... [WARREN_TLS=1 ...] java -cp warren-core.jar:slf4j-api.jar io.warren.ps.PsServerMain \
 *     --index I --servers N [--host H] [--port P] [--pull-timeout-ms T] \
 *     [--checkpoint-dir D --checkpoint-every-steps K] [--threads T]
 * </pre>
 *
 * <p>The secret comes from the environment (never the command line, which other users can
 * read), and so do the TLS settings ({@code WARREN_TLS}, {@code WARREN_TLS_CA}, {@code
 * WARREN_TLS_CERT}, {@code WARREN_TLS_KEY}: see {@link io.warren.TlsSettings}), as for a worker:
 * the supervisor sets them in the child's environment alike for every server. Once listening it prints {@code WARREN_PS_URI_<index>=<host:port>} on stdout; it then
 * serves until its stdin ends (the supervisor closed it, or died: no orphan server outlives
 * its driver), closes the server and exits 0. Bad arguments exit 2 with a line naming them; a
 * server that cannot start exits 1.
 */
public final class PsServerMain {
  /** The environment variable holding the job secret. */
  public static final String SECRET_ENV = "WARREN_JOB_SECRET";

  /** The prefix of the line giving the server's address ({@code WARREN_PS_URI_<index>=}). */
  public static final String URI_LINE = "WARREN_PS_URI_";

  private PsServerMain() {}

  /**
   * Runs the server (see the class documentation).
   *
   * @param args the arguments
   */
  public static void main(String[] args) {
    PsServer.Builder b;
    try {
      b = builder(args, System.getenv(SECRET_ENV)).tls(TlsSettings.fromSettings(System.getenv()));
    } catch (IllegalArgumentException e) {
      System.err.println("PsServerMain: " + e.getMessage());
      System.exit(2);
      return;
    }
    int code = 0;
    try (PsServer s = b.start()) {
      System.out.println(URI_LINE + s.index() + "=" + s.uri());
      System.out.flush();
      drain(System.in);
    } catch (RuntimeException | IOException e) {
      System.err.println("PsServerMain: " + e);
      code = 1;
    }
    System.exit(code);
  }

  /**
   * The server {@code args} describe.
   *
   * @param args the command line
   * @param secret the job secret
   * @return its builder
   * @throws IllegalArgumentException naming a missing, unknown or malformed argument
   */
  static PsServer.Builder builder(String[] args, String secret) {
    if (secret == null || secret.isEmpty()) {
      throw new IllegalArgumentException("the job secret must be in the environment as " + SECRET_ENV);
    }
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i < args.length; i += 2) {
      String k = args[i];
      if (!k.startsWith("--") || i + 1 >= args.length) {
        throw new IllegalArgumentException("expected --name value pairs, got " + k);
      }
      a.put(k.substring(2), args[i + 1]);
    }
    for (String k : a.keySet()) {
      if (!java.util.Set.of(
              "index",
              "servers",
              "host",
              "port",
              "pull-timeout-ms",
              "checkpoint-dir",
              "checkpoint-every-steps",
              "threads")
          .contains(k)) {
        throw new IllegalArgumentException("unknown argument --" + k);
      }
    }
    PsServer.Builder b =
        PsServer.builder(secret, number(a, "index", null), number(a, "servers", null))
            .bind(a.getOrDefault("host", "127.0.0.1"), number(a, "port", 0))
            .pullTimeout(Duration.ofMillis(number(a, "pull-timeout-ms", 300_000)))
            .threads(number(a, "threads", PsServer.DEFAULT_THREADS));
    if (a.containsKey("checkpoint-dir")) {
      int steps = number(a, "checkpoint-every-steps", 10);
      // 0 steps: by time (and by the size of the log, which the server watches itself)
      b.checkpoint(
          Paths.get(a.get("checkpoint-dir")), steps, steps == 0 ? Duration.ofSeconds(60) : Duration.ZERO);
    }
    return b;
  }

  private static int number(Map<String, String> a, String name, Integer dflt) {
    String v = a.get(name);
    if (v == null) {
      if (dflt == null) {
        throw new IllegalArgumentException("--" + name + " is required");
      }
      return dflt;
    }
    try {
      return Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + name + " " + v + " is not a number");
    }
  }

  private static void drain(InputStream in) throws IOException {
    byte[] buf = new byte[256];
    while (in.read(buf) >= 0) {
      // Serve until the supervisor closes our stdin (or dies).
    }
  }
}

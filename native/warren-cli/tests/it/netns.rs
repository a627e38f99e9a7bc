//! Simulated hosts: the tracker and every worker in a network namespace of its own (or two
//! workers in one), joined by veth pairs through bridges (see `support/netns.rs`; needs root).
//! A worker whose link goes down for longer than the peer timeout is fenced like a paused one
//! and replaced; a partition with the tracker on one side leaves only that side going on, the
//! other side's workers exiting with the fenced error; a host of two workers that dies (its
//! link down, both SIGKILLed) is recovered from the replicas on the other hosts. A host's link
//! limited with `tc tbf` carries no more than its rate. Seeded random schedules of SIGKILLs,
//! whole hosts lost and links cut, each replacement on a random host, end with the
//! failure-free model. (And, `#[ignore]`d, the measurement of
//! `bench/netns_allreduce.sh`: allreduce busbw against the link rate.) Every wait is bounded;
//! the namespaces are removed when a test ends, failed or not.

use std::os::unix::process::ExitStatusExt;
use std::sync::mpsc::Receiver;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::netns::{Host, Net, available};
use crate::support::procs::{Proc, assert_job_done, exit_within, one_at_a_time, wait_for, worker_env};
use crate::support::training::{WARREN, clean};

const SECRET: &str = "netns-test";
/// 150 iterations of at least 20 ms: long enough for a cut to land in the middle.
const ARGS: [&str; 4] = ["--iters", "150", "--compute-ms", "20"];

/// `warren tracker` for `n` workers on `host`, with a 2 s peer timeout.
fn tracker(net: &Net, host: &Host, n: usize) -> (Proc, String) {
    Proc::tracker(
        net.command(host, WARREN)
            .args(["tracker", "-n", &n.to_string(), "--host", &host.addr])
            .env("WARREN_JOB_SECRET", SECRET)
            .env("WARREN_PEER_TIMEOUT_S", "2"),
    )
}

/// `warren tracker` for `n` workers on `host` with the default peer timeout (benchmarks: a
/// saturated link on a loaded machine must not fence anyone).
fn bench_tracker(net: &Net, host: &Host, n: usize) -> (Proc, String) {
    Proc::tracker(
        net.command(host, WARREN)
            .args(["tracker", "-n", &n.to_string(), "--host", &host.addr])
            .env("WARREN_JOB_SECRET", SECRET),
    )
}

/// `warren bench allreduce` (float32 sum, plain mode, 2 untimed iterations) of `bytes` per
/// rank, one worker on each of `hosts`, the tracker on `t`: rank 0's JSON line.
fn bench_allreduce(net: &Net, t: &Host, hosts: &[Host], bytes: usize, iters: usize) -> serde_json::Value {
    bench_allreduce_with(net, t, hosts, bytes, iters, &[("WARREN_ROBUST", "0")])
}

/// [`bench_allreduce`] with the workers' settings `env` (plain mode unless they say
/// otherwise); a host may appear several times in `hosts` (several workers on it).
fn bench_allreduce_with(
    net: &Net,
    t: &Host,
    hosts: &[Host],
    bytes: usize,
    iters: usize,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let n = hosts.len();
    let (tracker, uri) = bench_tracker(net, t, n);
    let workers: Vec<Proc> = hosts
        .iter()
        .enumerate()
        .map(|(task, host)| {
            Proc::start(
                net.command(host, WARREN)
                    .args(["bench", "allreduce", "--worker", "--warmup", "2", "--dtype", "f32", "--op", "sum"])
                    .args(["--workers", &n.to_string(), "--bytes", &bytes.to_string(), "--iters", &iters.to_string()])
                    .envs(worker_env(&uri, n, SECRET, task, 0))
                    .env("WARREN_ROBUST", "0")
                    .envs(env.iter().copied())
                    .env("WARREN_LOG", "warn"),
            )
        })
        .collect();
    let mut line = None;
    for (task, w) in workers.into_iter().enumerate() {
        let e = w.finish(Duration::from_secs(240));
        assert!(e.status.success(), "benchmark worker {task} failed:\n{}", e.stderr);
        line = line.or_else(|| e.stdout.lines().find(|l| l.starts_with('{')).map(str::to_string));
    }
    let _ = tracker.finish(Duration::from_secs(20));
    serde_json::from_str(&line.expect("rank 0 prints a JSON line")).unwrap()
}

/// A network of `n` hosts on one switch, each limited to `bits_per_s`, and the tracker's
/// host (not limited).
fn limited_hosts(net: &mut Net, n: usize, bits_per_s: u64) -> (Host, Vec<Host>) {
    let switch = net.bridge();
    let t = net.host(&switch);
    let hosts: Vec<Host> = (0..n).map(|_| net.host(&switch)).collect();
    for h in &hosts {
        net.limit(h, bits_per_s);
    }
    (t, hosts)
}

/// Worker `task` of a job of `n` on `host`.
fn worker(net: &Net, host: &Host, uri: &str, n: usize, task: usize, attempt: u32) -> Proc {
    Proc::start(
        net.command(host, WARREN)
            .args(["example", "train", "--model-bytes", "40000"])
            .args(ARGS)
            .envs(worker_env(uri, n, SECRET, task, attempt)),
    )
}

/// A worker cut off from everyone exits by itself with the fenced error.
fn assert_cut_off_and_fenced(p: Proc, task: usize) {
    let e = p.finish(Duration::from_secs(20));
    assert!(!e.status.success(), "task {task} was cut off and must fail:\n{}", e.stderr);
    assert!(
        e.stderr.contains("warren: error: fenced: ") && e.stderr.contains("heard nothing from the tracker"),
        "task {task} says it was cut off and fenced:\n{}",
        e.stderr
    );
}

/// One worker's link down for longer than the peer timeout: the tracker fences it, the worker
/// (hearing nothing from the tracker) exits with the fenced error, and once the link is back
/// its replacement, on the same host, finishes the job with the failure-free model.
#[test]
fn a_link_down_longer_than_the_peer_timeout_is_handled_as_a_pause() {
    let _one = one_at_a_time();
    if !available() {
        eprintln!("skipped: network namespaces need root and `ip netns`");
        return;
    }
    let want = clean(3, &["--iters", "150"]);
    let mut net = Net::new(0);
    let switch = net.bridge();
    let t = net.host(&switch);
    let hosts: Vec<Host> = (0..3).map(|_| net.host(&switch)).collect();
    let (tracker, uri) = tracker(&net, &t, 3);
    let mut workers: Vec<Proc> = (0..3).map(|i| worker(&net, &hosts[i], &uri, 3, i, 0)).collect();
    wait_for(&tracker.log, "ranks assigned", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(700));
    net.set_link(&hosts[1].link, false);
    wait_for(&tracker.log, &format!("tracker: fenced rank 1 (task 1 on {}", hosts[1].addr), Duration::from_secs(20));
    let old = workers.remove(1);
    assert_cut_off_and_fenced(old, 1);
    net.set_link(&hosts[1].link, true);
    workers.insert(1, worker(&net, &hosts[1], &uri, 3, 1, 1));
    assert_job_done(tracker, workers, &want);
}

/// Two switches joined by one link, the tracker and workers 0 and 1 on one, workers 2 and 3
/// on the other; the link goes down. Only the tracker's side goes on: 2 and 3 are fenced and
/// exit with the fenced error (no model from them), and replacements started on the
/// tracker's side finish the job with the failure-free model.
#[test]
fn a_partition_leaves_only_the_trackers_side_going_on() {
    let _one = one_at_a_time();
    if !available() {
        eprintln!("skipped: network namespaces need root and `ip netns`");
        return;
    }
    let want = clean(4, &["--iters", "150"]);
    let mut net = Net::new(1);
    let (a, b) = (net.bridge(), net.bridge());
    let trunk = net.trunk(&a, &b);
    let t = net.host(&a);
    let hosts = [net.host(&a), net.host(&a), net.host(&b), net.host(&b)];
    let (tracker, uri) = tracker(&net, &t, 4);
    let mut workers: Vec<Proc> = (0..4).map(|i| worker(&net, &hosts[i], &uri, 4, i, 0)).collect();
    wait_for(&tracker.log, "ranks assigned", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(700));
    net.set_link(&trunk, false);
    let first = wait_for(&tracker.log, "tracker: fenced rank", Duration::from_secs(20));
    let second = wait_for(&tracker.log, "tracker: fenced rank", Duration::from_secs(20));
    for task in [2, 3] {
        let named = format!("(task {task} on ");
        assert!(first.contains(&named) || second.contains(&named), "task {task} is not fenced:\n{first}\n{second}");
    }
    let cut: Vec<Proc> = workers.drain(2..).collect();
    for (p, task) in cut.into_iter().zip([2, 3]) {
        assert_cut_off_and_fenced(p, task);
    }
    for task in [2, 3] {
        let h = net.host(&a);
        workers.push(worker(&net, &h, &uri, 4, task, 1));
    }
    assert_job_done(tracker, workers, &want);
}

/// The harness's bandwidth limit holds: both ends of a limited host's link have the token
/// bucket, and an allreduce between two hosts limited to 200 Mbit/s moves no more than that
/// (an unlimited veth pair carries several Gbit/s here, so the bound fails without the limit).
#[test]
fn a_limited_link_carries_no_more_than_its_rate() {
    let _one = one_at_a_time();
    if !available() {
        eprintln!("skipped: network namespaces need root and `ip netns`");
        return;
    }
    let rate = 200_000_000u64;
    let mut net = Net::new(2);
    let (t, hosts) = limited_hosts(&mut net, 2, rate);
    for h in &hosts {
        let q = net.qdiscs(h);
        assert_eq!(q.matches("qdisc tbf").count(), 2, "both ends of {}'s link are limited:\n{q}", h.addr);
        assert_eq!(q.matches("rate 200Mbit").count(), 2, "at 200 Mbit/s:\n{q}");
    }
    let r = bench_allreduce(&net, &t, &hosts, 4 << 20, 5);
    let gbit = r["busbw_gbps"].as_f64().unwrap() * 8.0;
    // The bucket (96 KiB) lets a little more through at first than the rate: 2.3% of 4 MiB.
    assert!(gbit <= 0.2 * 1.05, "4 MiB allreduce between two 200 Mbit/s hosts at {gbit:.3} Gbit/s busbw: {r}");
}

/// The measurement behind docs/benchmarks.md's simulated-network section (run it with
/// `bash bench/netns_allreduce.sh`, which builds in release mode and keeps the lines): allreduce
/// busbw between N hosts whose links are limited to `WARREN_NETNS_MBIT` (default 1000) Mbit/s,
/// for N in `WARREN_NETNS_WORKERS` (default "2 4"), `WARREN_NETNS_BYTES` (default 64 MiB) per
/// rank, `WARREN_NETNS_ITERS` (default 10) timed calls, `WARREN_NETNS_REPEAT` (default 3)
/// runs of each; prints one `NETNS_BENCH {json}` line per run. Measures, asserts nothing.
#[test]
#[ignore = "a benchmark: bash bench/netns_allreduce.sh"]
fn bench_allreduce_busbw_against_the_link_rate() {
    let _one = one_at_a_time();
    assert!(available(), "network namespaces need root and `ip netns`");
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let mbit: u64 = var("WARREN_NETNS_MBIT", "1000").parse().expect("WARREN_NETNS_MBIT");
    let bytes: usize = var("WARREN_NETNS_BYTES", &(64usize << 20).to_string()).parse().expect("WARREN_NETNS_BYTES");
    let iters: usize = var("WARREN_NETNS_ITERS", "10").parse().expect("WARREN_NETNS_ITERS");
    let repeat: usize = var("WARREN_NETNS_REPEAT", "3").parse().expect("WARREN_NETNS_REPEAT");
    let sizes: Vec<usize> = var("WARREN_NETNS_WORKERS", "2 4")
        .split_whitespace()
        .map(|n| n.parse().expect("WARREN_NETNS_WORKERS"))
        .collect();
    for (tag, &n) in sizes.iter().enumerate() {
        let mut net = Net::new(3 + tag as u32);
        let (t, hosts) = limited_hosts(&mut net, n, mbit * 1_000_000);
        for run in 0..repeat {
            let mut r = bench_allreduce(&net, &t, &hosts, bytes, iters);
            let gbit = r["busbw_gbps"].as_f64().unwrap() * 8.0;
            r["run"] = run.into();
            r["link_gbit"] = (mbit as f64 / 1000.0).into();
            r["busbw_gbit"] = gbit.into();
            r["busbw_over_link"] = (gbit * 1000.0 / mbit as f64).into();
            println!("NETNS_BENCH {r}");
        }
    }
}

/// The measurement behind docs/benchmarks.md's "Reduction order" section between simulated
/// hosts (run it with `bash bench/reduction_order.sh`): a 16 MiB float32 allreduce of four
/// workers on two hosts whose links are limited to `WARREN_NETNS_MBIT` (default 1000) Mbit/s,
/// the two reduction orders alternating, in robust mode (`WARREN_NETNS_ROBUST=0`: plain), ranks placed
/// `contiguous` (0 and 1 on one host, 2 and 3 on the other) and `alternating` (0 and 2, 1
/// and 3); `WARREN_NETNS_ITERS` (default 10) timed calls, `WARREN_NETNS_REPEAT` (default 3)
/// runs of each. Prints one `ORDER_BENCH {json}` line per run. Measures, asserts nothing.
#[test]
#[ignore = "a benchmark: bash bench/reduction_order.sh"]
fn bench_reduction_orders_between_two_hosts() {
    let _one = one_at_a_time();
    assert!(available(), "network namespaces need root and `ip netns`");
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let mbit: u64 = var("WARREN_NETNS_MBIT", "1000").parse().expect("WARREN_NETNS_MBIT");
    let bytes: usize = var("WARREN_NETNS_BYTES", &(16usize << 20).to_string()).parse().expect("WARREN_NETNS_BYTES");
    let iters: usize = var("WARREN_NETNS_ITERS", "10").parse().expect("WARREN_NETNS_ITERS");
    let repeat: usize = var("WARREN_NETNS_REPEAT", "3").parse().expect("WARREN_NETNS_REPEAT");
    let robust = var("WARREN_NETNS_ROBUST", "1");
    let mut net = Net::new(8);
    let (t, hosts) = limited_hosts(&mut net, 2, mbit * 1_000_000);
    let (a, b) = (hosts[0].clone(), hosts[1].clone());
    let placements = [("contiguous", [&a, &a, &b, &b]), ("alternating", [&a, &b, &a, &b])];
    for run in 0..repeat {
        for (placement, on) in &placements {
            let on: Vec<Host> = on.iter().map(|h| (*h).clone()).collect();
            for order in ["ranks", "hosts"] {
                let env = [("WARREN_ROBUST", robust.as_str()), ("WARREN_REDUCTION_ORDER", order)];
                let mut r = bench_allreduce_with(&net, &t, &on, bytes, iters, &env);
                r["run"] = run.into();
                let mode = if robust == "0" { "plain" } else { "robust" };
                r["setup"] = format!("2 netns hosts, {mbit} Mbit/s, {placement}, {mode}").into();
                r["order"] = order.into();
                println!("ORDER_BENCH {r}");
            }
        }
    }
}

/// Worker `task` of a job of six with one replica of each local model, on `host`, printing
/// a `STEP` line per iteration (rank 0); its stdout lines come to the receiver too.
fn replica_worker(net: &Net, host: &Host, uri: &str, task: usize, attempt: u32) -> (Proc, Receiver<String>) {
    Proc::start_streaming(
        net.command(host, WARREN)
            .args(["example", "train", "--model-bytes", "40000", "--timeline"])
            .args(ARGS)
            .envs(worker_env(uri, 6, SECRET, task, attempt))
            .env("WARREN_LOCAL_REPLICAS", "1"),
    )
}

/// The unix time of a `STEP <iteration> <world> <time>` line.
fn step_time(line: &str) -> Option<f64> {
    line.strip_prefix("STEP ")?.split_whitespace().nth(2)?.parse().ok()
}

/// Six workers on three hosts, two each in task order (tasks 0 and 1 on the first host), one
/// replica of each local model. The first host dies: its link goes down and both its workers
/// are SIGKILLed at once, past iteration 5. The tracker fences both, replacements start on
/// the two other hosts, and the job ends with the failure-free model: every local model had
/// its replica on another host (in rank order, rank 0's only replica was rank 1, on the same
/// host).
#[test]
fn a_host_that_dies_with_two_workers_is_recovered_from_the_other_hosts() {
    let _one = one_at_a_time();
    if !available() {
        eprintln!("skipped: network namespaces need root and `ip netns`");
        return;
    }
    let want = clean_on_hosts_of_two(6);
    let mut net = Net::new(9);
    let switch = net.bridge();
    let t = net.host(&switch);
    let hosts: Vec<Host> = (0..3).map(|_| net.host(&switch)).collect();
    let (tracker, uri) = tracker(&net, &t, 6);
    let (mut workers, mut steps): (Vec<Proc>, Vec<Receiver<String>>) =
        (0..6).map(|task| replica_worker(&net, &hosts[task / 2], &uri, task, 0)).unzip();
    wait_for(&steps[0], "STEP 5 ", Duration::from_secs(60));
    net.set_link(&hosts[0].link, false);
    let pids = [workers[0].child.id().to_string(), workers[1].child.id().to_string()];
    let killed = std::process::Command::new("kill").arg("-KILL").args(&pids).status().unwrap();
    let killed_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(killed.success(), "kill -KILL {pids:?}");
    let fenced: Vec<String> =
        (0..2).map(|_| wait_for(&tracker.log, "tracker: fenced rank", Duration::from_secs(20))).collect();
    let fenced_after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() - killed_at;
    for task in [0, 1] {
        let named = format!("(task {task} on {}", hosts[0].addr);
        assert!(fenced.iter().any(|l| l.contains(&named)), "task {task} is not fenced: {fenced:?}");
    }
    for task in [0, 1] {
        let (p, s) = replica_worker(&net, &hosts[1 + task], &uri, task, 1);
        let _ = std::mem::replace(&mut workers[task], p);
        steps[task] = s;
    }
    let Some(resumed) = steps[0].iter().find_map(|l| step_time(&l)) else {
        let e = workers.swap_remove(0).finish(Duration::from_secs(20));
        panic!("rank 0's replacement made no iteration:\n{}", e.stderr);
    };
    let after = resumed - killed_at;
    eprintln!(
        "host lost: both fenced {fenced_after:.3} s after the kill (2 s peer timeout), rank 0's replacement at its \
         next iteration {after:.3} s after it"
    );
    assert_job_done(tracker, workers, &want);
}

/// The failure-free model of [`ARGS`] on six workers placed two per host in task order.
fn clean_on_hosts_of_two(n: usize) -> String {
    let script = "WARREN_HOST_ID=h$(( WARREN_TASK_ID / 2 )) exec \"$0\" example train --iters 150 --model-bytes 40000";
    let out = crate::support::ps::run_limited(
        std::process::Command::new(WARREN)
            .args(["run", "-n", &n.to_string(), "--", "sh", "-c", script, WARREN])
            .env("WARREN_LOCAL_REPLICAS", "1"),
        crate::support::training::LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    crate::support::procs::model_hash(&stdout).expect("a model")
}

/// The first host of each task of the schedules' job: two hosts of two workers and one of
/// one (the hierarchy of hosts has chains and a ring of leaders).
const SCHEDULE_HOSTS: [usize; 5] = [0, 0, 1, 1, 2];
/// The schedules' job: 200 iterations of at least 20 ms; a 40 kB gradient, so with
/// [`SCHEDULE_ENV`]'s ring threshold the gradient allreduces are rings or the hierarchy.
const SCHEDULE_ARGS: [&str; 6] = ["--model-bytes", "40000", "--iters", "200", "--compute-ms", "20"];
/// Iterations of the schedules' job (the `--iters` of [`SCHEDULE_ARGS`]).
const SCHEDULE_ITERS: u64 = 200;
/// Every schedule's workers, and their failure-free run: the gradient goes through the ring
/// (or the hierarchy) rather than the tree.
const SCHEDULE_ENV: [(&str, &str); 1] = [("WARREN_RING_THRESHOLD", "4096")];

/// A fault of a schedule.
#[derive(Debug, Clone)]
enum Fault {
    /// These tasks' workers are SIGKILLed at once.
    Kill(Vec<usize>),
    /// The schedule's host is lost: its link goes down and all its workers are SIGKILLed;
    /// it stays down for the rest of the job.
    HostLost,
    /// The schedule's host's link goes down for longer than the peer timeout, then comes
    /// back.
    LinkCut,
}

/// A seeded kill schedule: the reduction order, and each fault with the delay (ms) after
/// the previous recovery (or after iteration 5) at which it strikes.
#[derive(Debug)]
struct Schedule {
    seed: u64,
    order: &'static str,
    faults: Vec<(u64, Fault)>,
    /// The host of the host fault, if any: one of the two-worker hosts for a loss, any for
    /// a cut.
    host: Option<usize>,
}

impl Schedule {
    /// The schedule of `seed`: the ranks order for even seeds, the hosts order (the
    /// hierarchical allreduce) for odd ones; 2 or 3 faults, SIGKILLs of one or two random
    /// tasks, and seeds 1 and 2 modulo 3 have a whole host lost or a host's link cut among them.
    fn new(seed: u64) -> Schedule {
        let mut rnd = crate::support::training::Rng::new(seed);
        let n = SCHEDULE_HOSTS.len() as u64;
        let mut faults: Vec<(u64, Fault)> = (0..2 + rnd.below(2))
            .map(|_| {
                let first = rnd.below(n) as usize;
                let mut tasks = vec![first];
                if rnd.below(3) == 0 {
                    tasks.push((first + 1 + rnd.below(n - 1) as usize) % n as usize);
                }
                (rnd.below(800), Fault::Kill(tasks))
            })
            .collect();
        let host_fault = match seed % 3 {
            1 => Some(Fault::HostLost),
            2 => Some(Fault::LinkCut),
            _ => None,
        };
        let host = host_fault.as_ref().map(|f| match f {
            Fault::HostLost => rnd.below(2) as usize,
            _ => rnd.below(3) as usize,
        });
        if let Some(f) = host_fault {
            let at = rnd.below(faults.len() as u64 + 1) as usize;
            faults.insert(at, (rnd.below(800), f));
        }
        Schedule { seed, order: if seed % 2 == 0 { "ranks" } else { "hosts" }, faults, host }
    }
}

/// A schedule's job as it runs: the workers by task, the host each runs on, the rank 0
/// progress seen so far.
struct Scheduled<'a> {
    net: &'a Net,
    hosts: Vec<Host>,
    /// Hosts lost for good (their links down).
    lost: Vec<bool>,
    /// The host the schedule's host fault is yet to strike.
    doomed: Option<usize>,
    uri: String,
    order: &'static str,
    rnd: crate::support::training::Rng,
    workers: Vec<Proc>,
    on: Vec<usize>,
    attempts: Vec<u32>,
    /// Rank 0's stdout (every worker of task 0 so far): its `STEP` lines.
    steps: Vec<Receiver<String>>,
    progress: Option<u64>,
    /// What happened, for the messages of failed assertions.
    story: Vec<String>,
}

impl Scheduled<'_> {
    /// Starts worker `task` (its attempt in `attempts`) on `host`.
    fn start(&mut self, task: usize, host: usize) -> Proc {
        let (p, lines) = Proc::start_streaming(
            self.net
                .command(&self.hosts[host], WARREN)
                .args(["example", "train", "--timeline"])
                .args(SCHEDULE_ARGS)
                .envs(worker_env(&self.uri, SCHEDULE_HOSTS.len(), SECRET, task, self.attempts[task]))
                .envs(SCHEDULE_ENV)
                .env("WARREN_REDUCTION_ORDER", self.order),
        );
        if task == 0 {
            self.steps.push(lines);
        }
        self.on[task] = host;
        p
    }

    /// The newest iteration rank 0 has finished its gradient allreduce of.
    fn progress(&mut self) -> Option<u64> {
        for lines in &self.steps {
            while let Ok(l) = lines.try_recv() {
                let step = l.strip_prefix("STEP ").and_then(|s| s.split_whitespace().next()?.parse().ok());
                self.progress = self.progress.max(step);
            }
        }
        self.progress
    }

    /// Waits (at most 60 s) until rank 0 is past iteration `it`.
    fn wait_progress(&mut self, it: u64) {
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while self.progress().is_none_or(|p| p < it) {
            assert!(std::time::Instant::now() < until, "no iteration {it} within 60 s: {:?}", self.story);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A random host for a replacement of `task`: not lost, and not the host the schedule
    /// has yet to lose or cut off unless `task` was placed there first. The replicas of the
    /// local models are placed by the first view (on other hosts first) for the view's
    /// lifetime, wherever replacements run: a host that gathered, through replacements, every
    /// holder of a model (seed 4 had tasks 0, 2 and 3 on one host, holding all of rank 3's)
    /// cannot be lost, and a schedule loses only hosts that can be.
    fn live_host(&mut self, task: usize) -> usize {
        let ok = |h: usize| !self.lost[h] && (self.doomed != Some(h) || SCHEDULE_HOSTS[task] == h);
        let live: Vec<usize> = (0..self.hosts.len()).filter(|&h| ok(h)).collect();
        live[self.rnd.below(live.len() as u64) as usize]
    }

    /// Tasks now running on `host`.
    fn tasks_on(&self, host: usize) -> Vec<usize> {
        (0..self.on.len()).filter(|&t| self.on[t] == host).collect()
    }

    /// Waits for the tracker to fence each of `tasks` (their workers on `host`).
    fn wait_fenced(&self, tracker: &Proc, tasks: &[usize], host: usize) {
        let fenced: Vec<String> =
            tasks.iter().map(|_| wait_for(&tracker.log, "tracker: fenced rank", Duration::from_secs(30))).collect();
        for t in tasks {
            let named = format!("(task {t} on {}", self.hosts[host].addr);
            assert!(fenced.iter().any(|l| l.contains(&named)), "task {t} is not fenced: {fenced:?} {:?}", self.story);
        }
    }

    /// Replaces the (ended) workers of `tasks`, each on a random live host, and waits (at
    /// most 60 s each) until each has resumed from the survivors' checkpoint.
    fn replace(&mut self, tasks: &[usize]) {
        let mut started = Vec::new();
        for &t in tasks {
            self.attempts[t] += 1;
            let host = self.live_host(t);
            let p = self.start(t, host);
            self.story.push(format!("task {t} attempt {} on host {host}", self.attempts[t]));
            started.push((t, p));
        }
        for (t, mut p) in started {
            if let Err(why) = resumed(&mut p) {
                let e = p.finish(Duration::from_secs(10));
                panic!("task {t}'s replacement {why} ({:?}):\n{}", self.story, e.stderr);
            }
            self.workers[t] = p;
        }
    }

    /// SIGKILLs the workers of `tasks` at once and waits for them to end.
    fn kill(&mut self, tasks: &[usize]) {
        if tasks.is_empty() {
            return;
        }
        let pids: Vec<String> = tasks.iter().map(|&t| self.workers[t].child.id().to_string()).collect();
        let killed = std::process::Command::new("kill").arg("-KILL").args(&pids).status().unwrap();
        assert!(killed.success(), "kill -KILL {pids:?}");
        for &t in tasks {
            let e = exit_within(&mut self.workers[t].child, Duration::from_secs(10));
            assert_eq!(e.signal(), Some(9), "task {t} was SIGKILLed: {:?}", self.story);
        }
    }

    /// Strikes `fault`.
    fn strike(&mut self, tracker: &Proc, fault: &Fault) {
        match fault {
            Fault::Kill(tasks) => {
                self.story.push(format!("SIGKILL tasks {tasks:?} at iteration {:?}", self.progress));
                self.kill(tasks);
                self.replace(tasks);
            }
            Fault::HostLost => {
                let host = self.doomed.take().expect("a schedule's host fault has its host");
                let tasks = self.tasks_on(host);
                self.story.push(format!("host {host} lost with tasks {tasks:?} at iteration {:?}", self.progress));
                self.net.set_link(&self.hosts[host].link, false);
                self.lost[host] = true;
                self.kill(&tasks);
                self.wait_fenced(tracker, &tasks, host);
                self.replace(&tasks);
            }
            Fault::LinkCut => {
                let host = self.doomed.take().expect("a schedule's host fault has its host");
                let tasks = self.tasks_on(host);
                self.story.push(format!("host {host}'s link cut, tasks {tasks:?}, at iteration {:?}", self.progress));
                self.net.set_link(&self.hosts[host].link, false);
                self.wait_fenced(tracker, &tasks, host);
                for &t in &tasks {
                    let e = exit_within(&mut self.workers[t].child, Duration::from_secs(20));
                    assert!(!e.success(), "task {t} was cut off and must fail: {:?}", self.story);
                }
                self.net.set_link(&self.hosts[host].link, true);
                self.replace(&tasks);
            }
        }
    }
}

/// Waits (at most 60 s) for a replacement to resume from the survivors' checkpoint; why not.
fn resumed(p: &mut Proc) -> Result<(), String> {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < until {
        match p.log.recv_timeout(Duration::from_millis(100)) {
            Ok(l) if l.contains("resuming at iteration") => return Ok(()),
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err("ended without resuming".into()),
        }
    }
    Err("did not resume within 60 s".into())
}

/// The failure-free model of the schedules' job under reduction order `order`, from `warren
/// run` on this host, the tasks given host ids as [`SCHEDULE_HOSTS`] places them (the hosts
/// order groups the ranks by them).
fn schedule_clean(order: &str) -> String {
    let script = "WARREN_HOST_ID=h$(( WARREN_TASK_ID / 2 )) exec \"$0\" example train \"$@\"";
    let out = crate::support::ps::run_limited(
        std::process::Command::new(WARREN)
            .args(["run", "-n", &SCHEDULE_HOSTS.len().to_string(), "--", "sh", "-c", script, WARREN])
            .args(SCHEDULE_ARGS)
            .envs(SCHEDULE_ENV)
            .env("WARREN_REDUCTION_ORDER", order),
        crate::support::training::LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    crate::support::procs::model_hash(&stdout).expect("a model")
}

/// Runs one schedule on three hosts (tasks placed as [`SCHEDULE_HOSTS`]) and the tracker's
/// own host; the job must end with `want`.
fn run_schedule(s: &Schedule, want: &str) {
    eprintln!("kill schedule seed {} ({} order, host fault on {:?}): {:?}", s.seed, s.order, s.host, s.faults);
    let started = std::time::Instant::now();
    let mut net = Net::new(5);
    let switch = net.bridge();
    let t = net.host(&switch);
    let hosts: Vec<Host> = (0..3).map(|_| net.host(&switch)).collect();
    let (tracker, uri) = tracker(&net, &t, SCHEDULE_HOSTS.len());
    let n = SCHEDULE_HOSTS.len();
    let mut job = Scheduled {
        net: &net,
        lost: vec![false; hosts.len()],
        doomed: s.host,
        hosts,
        uri,
        order: s.order,
        rnd: crate::support::training::Rng::new(s.seed ^ 0x5eed),
        workers: Vec::new(),
        on: vec![0; n],
        attempts: vec![0; n],
        steps: Vec::new(),
        progress: None,
        story: Vec::new(),
    };
    for (task, &host) in SCHEDULE_HOSTS.iter().enumerate() {
        let p = job.start(task, host);
        job.workers.push(p);
    }
    wait_for(&tracker.log, "ranks assigned", Duration::from_secs(30));
    job.wait_progress(5);
    let mut struck = 0;
    for (delay_ms, fault) in &s.faults {
        std::thread::sleep(Duration::from_millis(*delay_ms));
        // Not within the last tenth of the job: a fault lands while the others still call.
        if job.progress().is_some_and(|p| p >= SCHEDULE_ITERS * 9 / 10) {
            job.story.push(format!("{fault:?} skipped: the job is at iteration {:?}", job.progress));
            continue;
        }
        job.strike(&tracker, fault);
        struck += 1;
    }
    let story = std::mem::take(&mut job.story);
    assert!(struck > 0, "seed {}: the job outran every fault ({story:?})", s.seed);
    let ended: Vec<_> =
        std::mem::take(&mut job.workers).into_iter().map(|w| w.finish(Duration::from_secs(90))).collect();
    for (task, e) in ended.iter().enumerate() {
        assert!(e.status.success(), "seed {}: task {task} failed ({story:?}):\n{}", s.seed, e.stderr);
    }
    let tracker = tracker.finish(Duration::from_secs(20));
    assert!(tracker.stdout.contains("WARREN_JOB_DONE"), "seed {}: {}\n{}", s.seed, tracker.stdout, tracker.stderr);
    let hash = crate::support::procs::model_hash(&ended[0].stdout);
    assert_eq!(hash.as_deref(), Some(want), "seed {}: not the failure-free model ({story:?})", s.seed);
    let kind = if s.order == "hosts" { "allreduce(hier): n=" } else { "allreduce(ring): n=" };
    assert!(ended[0].stderr.contains(kind), "seed {}: rank 0 made no {kind}:\n{}", s.seed, ended[0].stderr);
    eprintln!("kill schedule seed {}: the failure-free model in {:.1?}: {story:?}", s.seed, started.elapsed());
}

/// Seeded random kill schedules on simulated hosts: five workers on three hosts (two, two
/// and one, so that the hierarchical allreduce has chains over shared memory) and the
/// tracker on a fourth. Each schedule SIGKILLs one or two random tasks at random times, each
/// replacement starting on a random live host (not necessarily its first); some lose a whole
/// host (its link down for good, its workers SIGKILLed) or cut a host's link for longer than
/// the peer timeout (its workers fenced, exiting by themselves, replaced once the link is
/// back); that host gets no replacement of another host's task before (see
/// [`Scheduled::live_host`]). Every job ends with the failure-free model of its reduction
/// order: the ranks order (the default) is the same bits wherever the ranks run, the hosts
/// order keeps the placement of the first view for the view's lifetime. `WARREN_NETNS_SCHEDULES` (default 4)
/// schedules from seed `WARREN_NETNS_SEED` (default 0) on; each prints its seed and plan.
#[test]
fn seeded_kill_schedules_on_simulated_hosts_keep_the_failure_free_model() {
    let _one = one_at_a_time();
    if !available() {
        eprintln!("skipped: network namespaces need root and `ip netns`");
        return;
    }
    let var = |k: &str, d: u64| std::env::var(k).map_or(d, |v| v.parse().unwrap_or_else(|_| panic!("{k}={v}")));
    let (first, count) = (var("WARREN_NETNS_SEED", 0), var("WARREN_NETNS_SCHEDULES", 4));
    let schedules: Vec<Schedule> = (first..first + count).map(Schedule::new).collect();
    let mut want = std::collections::HashMap::new();
    for s in &schedules {
        let hash = want.entry(s.order).or_insert_with(|| schedule_clean(s.order));
        run_schedule(s, hash);
    }
}

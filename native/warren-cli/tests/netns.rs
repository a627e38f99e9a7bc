//! Simulated hosts: the tracker and every worker in a network namespace of its own, joined by
//! veth pairs through bridges (see `support/netns.rs`; needs root). A worker whose link goes
//! down for longer than the peer timeout is fenced like a paused one and replaced; a partition
//! with the tracker on one side leaves only that side going on, the other side's workers
//! exiting with the fenced error. Every wait is bounded; the namespaces are removed when a
//! test ends, failed or not.

mod support;

use std::time::Duration;

use support::netns::{Host, Net, available};
use support::procs::{Proc, assert_job_done, one_at_a_time, wait_for, worker_env};
use support::training::{WARREN, clean};

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

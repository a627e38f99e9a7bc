//! Faults beyond crashes, with real processes and real signals: a worker paused with SIGSTOP
//! for less than the peer timeout (the job waits, and the log names the paused worker), and
//! for longer (the tracker fences it, the job goes on with a replacement, and the paused
//! process, once continued, exits with the fenced error without disturbing the job); the
//! tracker paused (it blames no worker for its own silence, and the job goes on). Every run
//! has a hard time limit.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::procs::{Proc, assert_job_done, one_at_a_time, wait_for, worker_env};
use crate::support::training::{WARREN, clean, train};

/// The training job of these tests: long enough (150 iterations of at least 20 ms) for a
/// pause to land in the middle of it.
const ARGS: [&str; 4] = ["--iters", "150", "--compute-ms", "20"];

/// The failure-free model of [`ARGS`] (the pauses of `--compute-ms` do not change it).
fn want(n: usize) -> String {
    clean(n, &["--iters", "150"])
}

/// Seconds since midnight (UTC) now, and of a log line's `HH:MM:SS.mmm` stamp.
fn now_of_day() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() % 86_400.0
}

fn stamp_of(line: &str) -> Option<f64> {
    let t = line.split_whitespace().next()?;
    let mut parts = t.split(':').map(|p| p.parse::<f64>().ok());
    Some(parts.next()?? * 3600.0 + parts.next()?? * 60.0 + parts.next()??)
}

/// A worker paused for less than the peer timeout: the job waits and then goes on with the
/// failure-free model and no restart, and the tracker's log names the paused worker (task,
/// host, pid) as the one the others wait on.
#[test]
fn a_short_pause_is_reported_as_a_stall_naming_the_paused_worker() {
    let _one = one_at_a_time();
    let want = want(4);
    let env = [("WARREN_STALL_WARN_S", "1"), ("WARREN_PEER_TIMEOUT_S", "30")];
    let mut paused = None;
    let r = train(4, &[], &ARGS, &env, |job| {
        job.wait_assigned();
        std::thread::sleep(Duration::from_millis(700));
        paused = job.signal_task(2, "STOP");
        std::thread::sleep(Duration::from_millis(3500));
        job.signal_task(2, "CONT");
    });
    let pid = paused.expect("task 2 was running when paused");
    assert!(r.ok(), "job failed:\n{}", r.stderr);
    assert_eq!(r.hash().as_deref(), Some(want.as_str()), "model differs from the failure-free run");
    assert_eq!(r.restarts(), 0, "a short pause is not a failure:\n{}", r.stderr);
    let named = format!("(task 2 on 127.0.0.1, pid {pid}) [last heartbeat");
    let stall = r.stderr.lines().find(|l| l.contains("tracker: stall:") && l.contains(&named));
    let stall = stall.unwrap_or_else(|| panic!("no stall line names task 2 (pid {pid}):\n{}", r.stderr));
    assert!(stall.contains("the job waits on it"), "{stall}");
    assert!(r.stderr.contains("stalled: no progress for"), "the workers log their stalls too:\n{}", r.stderr);
    // And the workers name the paused one too, wherever it sits in their call.
    let told = format!("(task 2 on 127.0.0.1, pid {pid}) [no heartbeat for");
    assert!(
        r.stderr.lines().any(|l| l.contains("stalled: the tracker has heard nothing") && l.contains(&told)),
        "no worker's stall line names task 2 (pid {pid}):\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains("fenced"), "paused for less than the peer timeout:\n{}", r.stderr);
}

/// A worker paused for longer than the peer timeout is fenced, killed and restarted by
/// `warren run`; the job ends with the failure-free model. Prints the time from the pause to
/// the job going on (the replacement's link round complete).
#[test]
fn a_long_pause_fences_the_worker_and_the_job_goes_on_with_a_replacement() {
    let _one = one_at_a_time();
    let want = want(4);
    let env = [("WARREN_STALL_WARN_S", "1"), ("WARREN_PEER_TIMEOUT_S", "2")];
    let mut paused = None;
    let r = train(4, &[], &ARGS, &env, |job| {
        job.wait_assigned();
        std::thread::sleep(Duration::from_millis(700));
        paused = job.signal_task(2, "STOP").map(|pid| (pid, now_of_day()));
    });
    let (pid, paused_at) = paused.expect("task 2 was running when paused");
    assert!(r.ok(), "job failed:\n{}", r.stderr);
    assert_eq!(r.hash().as_deref(), Some(want.as_str()), "model differs from the failure-free run");
    assert_eq!(r.restarts(), 1, "{}", r.stderr);
    let fenced = format!("tracker: fenced rank 2 (task 2 on 127.0.0.1, pid {pid})");
    assert!(r.stderr.contains(&fenced), "no line says {fenced:?}:\n{}", r.stderr);
    assert!(r.stderr.contains("was fenced by the tracker: killing it"), "{}", r.stderr);
    let going_on = r.stderr.lines().find(|l| l.contains("after task 2 was fenced)"));
    let going_on = going_on.unwrap_or_else(|| panic!("no link round completed after the fence:\n{}", r.stderr));
    if let Some(at) = stamp_of(going_on) {
        eprintln!("pause to the job going on: {:.3} s (peer timeout 2 s): {going_on}", at - paused_at);
    }
}

/// `warren run` itself (the launcher and its tracker) paused for three peer timeouts while its
/// workers train: no worker is blamed for the tracker's silence, none takes itself for cut
/// off, and the job goes on to the failure-free model with no restart.
#[test]
fn a_paused_tracker_is_not_a_failure() {
    let _one = one_at_a_time();
    let args = ["--iters", "600", "--compute-ms", "20"];
    let want = clean(4, &["--iters", "600"]);
    let env = [("WARREN_PEER_TIMEOUT_S", "2")];
    let r = train(4, &[], &args, &env, |job| {
        job.wait_assigned();
        std::thread::sleep(Duration::from_millis(700));
        job.signal_launcher("STOP");
        std::thread::sleep(Duration::from_secs(6));
        job.signal_launcher("CONT");
    });
    assert!(r.ok(), "job failed:\n{}", r.stderr);
    assert_eq!(r.hash().as_deref(), Some(want.as_str()), "model differs from the failure-free run");
    assert_eq!(r.restarts(), 0, "a paused tracker is not a failure:\n{}", r.stderr);
    assert!(!r.stderr.contains("fenced"), "nobody is fenced:\n{}", r.stderr);
    assert!(r.stderr.contains("tracker: it did not run for"), "the tracker notices its pause:\n{}", r.stderr);
    let elapsed = r.summary()["elapsed_s"].as_f64().unwrap_or_default();
    assert!(elapsed > 6.0, "the job outlasted the pause ({elapsed} s)");
}

/// A worker cut off from the tracker while its process runs (`WARREN_MOCK` `,cut`: no
/// heartbeat leaves it, no answer reaches it) is fenced (by the tracker or by itself), replaced
/// by `warren run`, and the job ends with the failure-free model.
#[test]
fn a_worker_cut_off_from_the_tracker_is_fenced_and_replaced() {
    let _one = one_at_a_time();
    let want = want(4);
    let env = [("WARREN_PEER_TIMEOUT_S", "2"), ("WARREN_MOCK", "2,20,0,0,cut")];
    let r = train(4, &[], &ARGS, &env, |_| {});
    assert!(r.ok(), "job failed:\n{}", r.stderr);
    assert_eq!(r.hash().as_deref(), Some(want.as_str()), "model differs from the failure-free run");
    assert_eq!(r.restarts(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("WARREN_MOCK: rank 2 is cut off from the tracker at 2,20,0,0,cut"), "{}", r.stderr);
    // Both sides time the same silence: whichever notices first fences (the worker, which then
    // exits and is seen lost, or the tracker).
    let tracker = r.stderr.contains("tracker: fenced rank 2 (task 2 on 127.0.0.1");
    let itself = r.stderr.contains("fenced: task 2 heard nothing from the tracker");
    assert!(tracker || itself, "no line says task 2 was fenced:\n{}", r.stderr);
}

/// The secret of the jobs run by hand.
const SECRET: &str = "faults-test";

/// Worker `task` of a job of 3 run by hand against `warren tracker` (no launcher that would
/// kill it).
fn worker(uri: &str, task: usize, attempt: u32) -> Proc {
    Proc::start(
        Command::new(WARREN)
            .args(["example", "train", "--model-bytes", "40000"])
            .args(ARGS)
            .envs(worker_env(uri, 3, SECRET, task, attempt)),
    )
}

/// A fenced worker that is continued after its replacement took over exits with the fenced
/// error, and the job ends with the failure-free model and no further link round.
#[test]
fn a_fenced_worker_that_wakes_up_exits_fenced_without_disturbing_the_job() {
    let _one = one_at_a_time();
    let want = want(3);
    let (tracker, uri) = Proc::tracker(
        Command::new(WARREN)
            .args(["tracker", "-n", "3"])
            .env("WARREN_JOB_SECRET", SECRET)
            .env("WARREN_PEER_TIMEOUT_S", "2"),
    );
    let mut workers: Vec<Proc> = (0..3).map(|t| worker(&uri, t, 0)).collect();
    wait_for(&tracker.log, "ranks assigned", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(700));
    workers[1].signal("STOP");
    wait_for(&tracker.log, "tracker: fenced rank 1", Duration::from_secs(20));
    let old = std::mem::replace(&mut workers[1], worker(&uri, 1, 1));
    wait_for(&tracker.log, "after task 1 was fenced)", Duration::from_secs(20));
    old.signal("CONT");
    let old = old.finish(Duration::from_secs(20));
    assert!(!old.status.success(), "the fenced worker must fail:\n{}", old.stderr);
    assert!(old.stderr.contains("warren: error: fenced: "), "the fenced worker says it was fenced:\n{}", old.stderr);
    let tracker = assert_job_done(tracker, workers, &want);
    assert!(!tracker.stderr.contains("re-link round 2"), "the woken worker disturbed the job:\n{}", tracker.stderr);
}

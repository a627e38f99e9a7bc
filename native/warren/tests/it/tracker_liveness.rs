//! A worker whose tracker connection ends while its process lives on: the tracker counts it
//! lost and refuses everything its incarnation sends afterwards, heartbeats included, as from
//! a fenced worker. Before, it only stopped expecting heartbeats from it, so such a worker went
//! on unwatched: paused later, it stalled the job until the call timeout (on Spark, until the
//! executor heartbeat timeout), as `RecoveryClusterTest.k` once saw in CI.
//!
//! Such a worker that sends no heartbeat at all (paused, or its heartbeat connection closed
//! too) is fenced after the peer timeout and named to its runner with its attempt, unless its
//! task registered again meanwhile.
//!
//! Real tracker, real sockets on 127.0.0.1, the worker's side spoken by hand.

use std::time::{Duration, Instant};

use warren::tracker::proto::{FromTracker, ToTracker};
use warren::tracker::{FencedWorker, TrackerClient};
use warren::{Error, Tracker, TrackerConfig};

const SECRET: &str = "tracker-liveness-secret";

fn register(task: &str) -> ToTracker {
    ToTracker::Register {
        task_id: task.into(),
        host: "127.0.0.1".into(),
        port: 9,
        attempt: 0,
        pid: std::process::id(),
        host_id: "test-host".into(),
    }
}

/// A tracker of `world` workers that fences after `timeout` of silence.
fn tracker_with_timeout(world: usize, timeout: Duration) -> Tracker {
    let mut cfg = TrackerConfig::new(world, SECRET);
    cfg.peer_timeout = Some(timeout);
    Tracker::start(cfg).unwrap()
}

/// The workers `tracker` fences next, polled until `deadline` (empty if none by then).
fn wait_fenced(tracker: &Tracker, deadline: Instant) -> Vec<FencedWorker> {
    loop {
        let f = tracker.take_fenced();
        if !f.is_empty() || Instant::now() > deadline {
            return f;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn beat(task: &str, incarnation: u64) -> ToTracker {
    ToTracker::Beat { task_id: task.into(), incarnation, stall: None }
}

#[test]
fn a_worker_whose_tracker_connection_closed_is_refused_as_fenced() {
    let tracker = tracker_with_timeout(1, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(20);

    let mut main = TrackerClient::connect(tracker.uri(), SECRET.as_bytes(), None, deadline, None).unwrap();
    let incarnation = match main.request(&register("0"), deadline).unwrap() {
        FromTracker::Assignment { incarnation, .. } => incarnation,
        other => panic!("expected an assignment, got {other:?}"),
    };
    let mut beats = TrackerClient::connect(tracker.uri(), SECRET.as_bytes(), None, deadline, None).unwrap();
    match beats.request(&beat("0", incarnation), deadline) {
        Ok(FromTracker::Ack) => {}
        other => panic!("a heartbeat of the running worker must be acknowledged, got {other:?}"),
    }

    // The worker's own tracker connection ends; its process (this test) lives on and beats.
    drop(main);
    let refused = loop {
        match beats.request(&beat("0", incarnation), deadline) {
            // The tracker has not read the end of the connection yet.
            Ok(FromTracker::Ack) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(Error::Fenced(message)) => break message,
            other => panic!("a heartbeat after the worker's connection ended must be refused as fenced, got {other:?}"),
        }
    };
    assert!(refused.contains("task 0"), "the refusal names the task: {refused}");
    tracker.stop();
}

#[test]
fn a_finished_worker_is_not_fenced() {
    let tracker = tracker_with_timeout(2, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(20);

    let mut workers: Vec<TrackerClient> = (0..2)
        .map(|_| TrackerClient::connect(tracker.uri(), SECRET.as_bytes(), None, deadline, None).unwrap())
        .collect();
    for (task, w) in workers.iter_mut().enumerate() {
        w.send(&register(&task.to_string()), deadline).unwrap();
    }
    for w in workers.iter_mut() {
        assert!(matches!(w.recv(deadline).unwrap(), FromTracker::Assignment { .. }));
    }
    // Task 0 finishes and closes its connection: that is no loss, and nothing is fenced.
    let mut first = workers.remove(0);
    first.request(&ToTracker::Shutdown, deadline).unwrap();
    drop(first);
    std::thread::sleep(Duration::from_millis(200));
    assert!(tracker.take_fenced().is_empty(), "a finished worker is never reported fenced");
    tracker.stop();
}

/// Registers `task` as attempt `attempt` on a new connection (the assignment is read by
/// [`incarnation`]).
fn join(tracker: &Tracker, task: &str, attempt: u32, deadline: Instant) -> TrackerClient {
    let mut c = TrackerClient::connect(tracker.uri(), SECRET.as_bytes(), None, deadline, None).unwrap();
    let msg = match register(task) {
        ToTracker::Register { task_id, host, port, pid, host_id, .. } => {
            ToTracker::Register { task_id, host, port, attempt, pid, host_id }
        }
        other => other,
    };
    c.send(&msg, deadline).unwrap();
    c
}

/// Reads `c`'s assignment: the incarnation.
fn incarnation(c: &mut TrackerClient, deadline: Instant) -> u64 {
    match c.recv(deadline).unwrap() {
        FromTracker::Assignment { incarnation, .. } => incarnation,
        other => panic!("expected an assignment, got {other:?}"),
    }
}

/// A heartbeat connection that sent one acknowledged beat for `task`'s `incarnation`.
fn beating(tracker: &Tracker, task: &str, incarnation: u64, deadline: Instant) -> TrackerClient {
    let mut beats = TrackerClient::connect(tracker.uri(), SECRET.as_bytes(), None, deadline, None).unwrap();
    match beats.request(&beat(task, incarnation), deadline) {
        Ok(FromTracker::Ack) => beats,
        other => panic!("a heartbeat of the running worker must be acknowledged, got {other:?}"),
    }
}

/// What `RecoveryClusterTest.k` saw in CI: a worker's tracker connection closed under it, its
/// process lived on, and it was paused (SIGSTOP) before its next heartbeat could be refused.
/// Nothing told the runner, and Spark's 120 s executor heartbeat timeout ended it. Now the
/// tracker fences it after the peer timeout, names it to the runner with the attempt that
/// registered (not a later one), and tells the other workers.
#[test]
fn a_worker_cut_off_and_then_silent_is_fenced_with_its_attempt() {
    let timeout = Duration::from_millis(800);
    let tracker = tracker_with_timeout(2, timeout);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut main0 = join(&tracker, "0", 0, deadline);
    let mut main1 = join(&tracker, "1", 3, deadline);
    let (inc0, inc1) = (incarnation(&mut main0, deadline), incarnation(&mut main1, deadline));
    let mut beats0 = beating(&tracker, "0", inc0, deadline);
    let _beats1 = beating(&tracker, "1", inc1, deadline);

    // Task 1's tracker connection ends; its heartbeat connection stays open and silent.
    let cut_at = Instant::now();
    drop(main1);
    let mut told = false;
    let fenced = loop {
        assert!(Instant::now() < deadline, "the silent worker was never fenced");
        let f = tracker.take_fenced();
        if !f.is_empty() {
            break f;
        }
        // Task 0 keeps beating, and hears of the fence on its heartbeat connection.
        beats0.send(&beat("0", inc0), deadline).unwrap();
        loop {
            match beats0.recv(Instant::now() + Duration::from_millis(100)) {
                Ok(FromTracker::Ack) => {}
                Ok(FromTracker::PeerFenced { task_id, .. }) if task_id == "1" => told = true,
                Ok(other) => panic!("unexpected {other:?}"),
                Err(Error::Timeout { .. }) => break,
                Err(e) => panic!("task 0's heartbeats: {e}"),
            }
        }
    };
    let waited = cut_at.elapsed();
    assert_eq!(fenced, vec![FencedWorker { task_id: "1".into(), attempt: 3 }]);
    assert!(waited >= timeout, "fenced after the peer timeout, not at once ({waited:?})");
    assert!(waited < timeout * 4, "fenced soon after the peer timeout ({waited:?})");
    while !told && Instant::now() < deadline {
        match beats0.request(&beat("0", inc0), deadline) {
            Ok(FromTracker::PeerFenced { task_id, .. }) if task_id == "1" => told = true,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("task 0's heartbeats: {e}"),
        }
    }
    assert!(told, "the other worker is told its peer was fenced");
    tracker.stop();
}

/// What CI showed next: both of the worker's connections to the tracker (its own and its
/// heartbeat connection) closed while its process lived on, and it was paused later. The
/// tracker cannot tell that from a process that died, so either way, once the task has not
/// registered again within the peer timeout, the worker is fenced and named to its runner with
/// its attempt (the runner ends that attempt if it still runs). Both closing orders.
#[test]
fn a_worker_whose_connections_both_end_is_fenced_after_the_timeout() {
    for beats_first in [true, false] {
        let timeout = Duration::from_millis(500);
        let tracker = tracker_with_timeout(1, timeout);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut main = join(&tracker, "0", 1, deadline);
        let inc = incarnation(&mut main, deadline);
        let beats = beating(&tracker, "0", inc, deadline);
        let ended = Instant::now();
        if beats_first {
            drop(beats);
            std::thread::sleep(Duration::from_millis(50));
            drop(main);
        } else {
            drop(main);
            std::thread::sleep(Duration::from_millis(50));
            drop(beats);
        }
        let fenced = wait_fenced(&tracker, deadline);
        assert_eq!(fenced, vec![FencedWorker { task_id: "0".into(), attempt: 1 }], "beats_first = {beats_first}");
        assert!(ended.elapsed() >= timeout, "not before the peer timeout ({:?})", ended.elapsed());
        tracker.stop();
    }
}

/// A task whose connection was cut registers again (its runner re-ran it): the earlier
/// incarnation is replaced, and nothing is fenced although it never beat again.
#[test]
fn a_cut_worker_replaced_in_time_is_not_fenced() {
    let timeout = Duration::from_millis(500);
    let tracker = tracker_with_timeout(1, timeout);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut main = join(&tracker, "0", 0, deadline);
    let inc = incarnation(&mut main, deadline);
    let _old_beats = beating(&tracker, "0", inc, deadline);
    drop(main);
    std::thread::sleep(Duration::from_millis(100));
    let mut again = join(&tracker, "0", 1, deadline);
    let inc2 = incarnation(&mut again, deadline);
    let mut beats = beating(&tracker, "0", inc2, deadline);
    let until = Instant::now() + timeout * 3;
    while Instant::now() < until {
        match beats.request(&beat("0", inc2), deadline) {
            Ok(FromTracker::Ack) => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("the new incarnation's heartbeats are acknowledged, got {other:?}"),
        }
    }
    assert_eq!(tracker.take_fenced(), vec![], "the replaced incarnation is not fenced");
    tracker.stop();
}

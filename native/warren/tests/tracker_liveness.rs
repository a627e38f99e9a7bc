//! A worker whose tracker connection ends while its process lives on: the tracker counts it
//! lost and refuses everything its incarnation sends afterwards, heartbeats included, as from
//! a fenced worker. Before, it only stopped expecting heartbeats from it, so such a worker went
//! on unwatched: paused later, it stalled the job until the call timeout (on Spark, until the
//! executor heartbeat timeout), as `RecoveryClusterTest.k` once saw in CI.
//!
//! Real tracker, real sockets on 127.0.0.1, the worker's side spoken by hand.

use std::time::{Duration, Instant};

use warren::tracker::TrackerClient;
use warren::tracker::proto::{FromTracker, ToTracker};
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

fn beat(task: &str, incarnation: u64) -> ToTracker {
    ToTracker::Beat { task_id: task.into(), incarnation, stall: None }
}

#[test]
fn a_worker_whose_tracker_connection_closed_is_refused_as_fenced() {
    let mut cfg = TrackerConfig::new(1, SECRET);
    cfg.peer_timeout = Some(Duration::from_secs(30));
    let tracker = Tracker::start(cfg).unwrap();
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
    let mut cfg = TrackerConfig::new(2, SECRET);
    cfg.peer_timeout = Some(Duration::from_secs(30));
    let tracker = Tracker::start(cfg).unwrap();
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

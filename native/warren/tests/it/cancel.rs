//! Cancelling a communicator from another thread, through real sockets: the running call
//! returns `Aborted` within 100 ms, later calls at once, and the peers fail (plain mode) or
//! wait for a replacement of the cancelled worker (robust mode).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{RefusedPort, start_tracker, worker_config};
use warren::{CancelHandle, Communicator, Config, Error, Op};

/// How long the cancelled call may take to return after `cancel`.
const PROMPT: Duration = Duration::from_millis(100);

fn plain(mut cfg: Config) -> Config {
    cfg.robust = false;
    cfg
}

/// Cancels `handle` after `delay`; returns when it did.
fn cancel_after(handle: CancelHandle, delay: Duration) -> thread::JoinHandle<Instant> {
    thread::spawn(move || {
        thread::sleep(delay);
        let at = Instant::now();
        handle.cancel("test cancel");
        at
    })
}

fn assert_cancelled(e: &Error, rank: usize) {
    match e {
        Error::Aborted { rank: r, reason } => {
            assert_eq!(*r, rank, "{e}");
            assert!(reason.contains("test cancel"), "{e}");
        }
        other => panic!("expected Aborted by rank {rank}, got {other}"),
    }
}

/// A join cancelled before it had a rank: `Aborted` by the test's cancel, promptly.
fn assert_join_cancelled(r: warren::Result<Communicator>, took: Duration) {
    match r {
        Err(e) => assert_cancelled(&e, warren::cancel::NO_RANK),
        Ok(_) => panic!("expected Aborted, the join succeeded"),
    }
    assert!(took < PROMPT, "init returned {took:?} after cancel");
}

#[test]
fn cancel_mid_allreduce_returns_within_100ms_and_the_peers_fail_promptly() {
    // Two workers run large ring allreduces back to back, so data is in flight when rank 0 is
    // cancelled.
    let tracker = start_tracker(2);
    let (tx, rx) = mpsc::channel();
    let (handle_tx, handle_rx) = mpsc::channel();
    for task in 0..2 {
        let mut cfg = plain(worker_config(&tracker, task));
        cfg.ring_threshold = 1;
        let (tx, handle_tx) = (tx.clone(), handle_tx.clone());
        thread::spawn(move || {
            let mut c = Communicator::init(cfg).expect("joins");
            handle_tx.send((c.rank(), c.cancel_handle())).unwrap();
            let mut buf = vec![1.0f32; 4 << 20];
            let mut calls = 0;
            let r = loop {
                if let Err(e) = c.allreduce(&mut buf, Op::Sum) {
                    break e;
                }
                calls += 1;
            };
            let returned = Instant::now();
            let again = c.allreduce(&mut buf, Op::Sum);
            tx.send((c.rank(), r, returned, again, returned.elapsed(), calls)).unwrap();
        });
    }
    let handles: Vec<(usize, CancelHandle)> =
        (0..2).map(|_| handle_rx.recv_timeout(Duration::from_secs(30)).unwrap()).collect();
    let h0 = handles.iter().find(|(r, _)| *r == 0).map(|(_, h)| h.clone()).expect("rank 0");
    let cancelled_at = cancel_after(h0, Duration::from_millis(500)).join().unwrap();

    let mut by_rank: Vec<_> = (0..2).map(|_| rx.recv_timeout(Duration::from_secs(30)).expect("both return")).collect();
    by_rank.sort_by_key(|r| r.0);
    let (_, e0, ret0, again0, again_took, calls) = &by_rank[0];
    let took = ret0.saturating_duration_since(cancelled_at);
    println!("rank 0 returned {took:?} after cancel (after {calls} calls); a later call took {again_took:?}");
    assert!(*calls > 0, "no call completed before the cancel");
    assert_cancelled(e0, 0);
    assert!(took < PROMPT, "rank 0 returned {took:?} after cancel");
    assert_cancelled(again0.as_ref().unwrap_err(), 0);
    assert!(*again_took < Duration::from_millis(10), "a later call took {again_took:?}");

    let (_, e1, ret1, _, _, _) = &by_rank[1];
    let peer_took = ret1.saturating_duration_since(cancelled_at);
    println!("rank 1 failed {peer_took:?} after rank 0 was cancelled: {e1}");
    assert!(matches!(e1, Error::PeerLost { rank: 0, .. }), "rank 1: {e1}");
    assert!(peer_took < Duration::from_secs(1), "rank 1 failed {peer_took:?} after the cancel");
}

#[test]
fn cancel_while_joining_a_job_whose_other_worker_never_arrives() {
    let tracker = start_tracker(2);
    let cfg = plain(worker_config(&tracker, 0));
    let cancel = CancelHandle::new();
    let cancelled_at = cancel_after(cancel.clone(), Duration::from_millis(300));
    let started = Instant::now();
    let r = Communicator::init_cancellable(cfg, &cancel);
    let returned = Instant::now();
    let at = cancelled_at.join().unwrap();
    let took = returned.saturating_duration_since(at);
    println!("init returned {took:?} after cancel ({:?} in all)", returned - started);
    assert_join_cancelled(r, took);
}

#[test]
fn cancel_while_the_tracker_is_not_listening_ends_the_connect_retries() {
    // A task started after its tracker closed keeps retrying the refused connection (until
    // connect_timeout, 300 s by default); a cancellation must end those retries at once.
    let closed = RefusedPort::new();
    let uri = closed.uri();
    let tracker = start_tracker(1);
    let mut cfg = plain(worker_config(&tracker, 0));
    cfg.tracker_uri = Some(uri);
    cfg.connect_timeout = Duration::from_secs(300);
    let cancel = CancelHandle::new();
    let cancelled_at = cancel_after(cancel.clone(), Duration::from_millis(1500));
    let r = Communicator::init_cancellable(cfg, &cancel);
    let returned = Instant::now();
    let took = returned.saturating_duration_since(cancelled_at.join().unwrap());
    println!("init returned {took:?} after cancel");
    assert_join_cancelled(r, took);
}

#[test]
fn cancel_while_waiting_for_a_peer_that_never_calls() {
    // Two workers; rank 1 joins and never calls: rank 0 waits in a small (tree) allreduce.
    let tracker = start_tracker(2);
    let cfgs: Vec<Config> = (0..2).map(|t| plain(worker_config(&tracker, t))).collect();
    let mut it = cfgs.into_iter();
    let (c0, c1) = (it.next().unwrap(), it.next().unwrap());
    let idle = thread::spawn(move || {
        let c = Communicator::init(c1).expect("joins");
        thread::sleep(Duration::from_secs(2));
        drop(c);
    });
    let mut c = Communicator::init(c0).expect("joins");
    let cancelled_at = cancel_after(c.cancel_handle(), Duration::from_millis(200));
    let mut buf = [1i64; 4];
    let r = c.allreduce(&mut buf, Op::Sum);
    let took = Instant::now().saturating_duration_since(cancelled_at.join().unwrap());
    println!("the waiting call returned {took:?} after cancel");
    assert_cancelled(&r.unwrap_err(), c.rank());
    assert!(took < PROMPT, "returned {took:?} after cancel");
    idle.join().unwrap();
}

#[test]
fn robust_peers_wait_for_a_replacement_of_the_cancelled_worker() {
    // Robust mode: rank 1 is cancelled in its second call; rank 0 waits in that call, and a
    // replacement of task 1 (attempt 1) catches up: rank 0 gets the right result.
    let tracker = start_tracker(2);
    let mut cfgs: Vec<Config> = (0..2).map(|t| worker_config(&tracker, t)).collect();
    let mut replacement = worker_config(&tracker, 1);
    replacement.attempt = 1;
    let c1 = cfgs.pop().unwrap();
    let c0 = cfgs.pop().unwrap();
    let survivor = thread::spawn(move || -> warren::Result<Vec<f64>> {
        let mut c = Communicator::init(c0)?;
        let mut out = Vec::new();
        for i in 0..3 {
            let mut buf = [i as f64 + c.rank() as f64];
            c.allreduce(&mut buf, Op::Sum)?;
            out.push(buf[0]);
        }
        c.finalize()?;
        Ok(out)
    });
    let mut c = Communicator::init(c1).expect("joins");
    let mut buf = [1.0f64];
    c.allreduce(&mut buf, Op::Sum).expect("first call");
    // The survivor is now in call #1, waiting for this worker.
    thread::sleep(Duration::from_millis(200));
    c.cancel_handle().cancel("test cancel");
    let mut buf = [2.0f64];
    assert_cancelled(&c.allreduce(&mut buf, Op::Sum).unwrap_err(), 1);
    drop(c);
    let mut c = Communicator::init(replacement).expect("the replacement joins");
    let mut got = Vec::new();
    for i in 0..3 {
        let mut buf = [i as f64 + 1.0];
        c.allreduce(&mut buf, Op::Sum).expect("replayed and new calls");
        got.push(buf[0]);
    }
    c.finalize().expect("finalize");
    let survived = survivor.join().unwrap().expect("the survivor recovers");
    assert_eq!(survived, vec![1.0, 3.0, 5.0]);
    assert_eq!(got, survived);
}

#[test]
fn a_kept_handle_does_not_hold_the_tracker_connection_and_a_cancelled_worker_does_not_finish() {
    // Robust mode. Task 1's first attempt is dropped (a crash, as the JVM's abort does) while
    // the test keeps a clone of its cancel handle: the tracker must still see it leave. Its
    // second attempt is cancelled, then finalized: it must leave as lost, not finished. A third
    // attempt then joins and the survivor's call completes with it.
    let tracker = start_tracker(2);
    let c0 = worker_config(&tracker, 0);
    let attempts: Vec<Config> = (0..3)
        .map(|a| {
            let mut c = worker_config(&tracker, 1);
            c.attempt = a;
            c
        })
        .collect();
    let survivor = thread::spawn(move || -> warren::Result<f64> {
        let mut c = Communicator::init(c0)?;
        let mut buf = [1.0f64];
        c.allreduce(&mut buf, Op::Sum)?;
        c.finalize()?;
        Ok(buf[0])
    });
    let mut attempts = attempts.into_iter();
    let first = Communicator::init(attempts.next().unwrap()).expect("joins");
    let kept = first.cancel_handle();
    drop(first);
    let second = Communicator::init(attempts.next().unwrap()).expect("a replacement of a dropped worker joins");
    second.cancel_handle().cancel("test cancel");
    assert_cancelled(&second.finalize().unwrap_err(), 1);
    let mut third = Communicator::init(attempts.next().unwrap()).expect("a replacement of a cancelled worker joins");
    let mut buf = [2.0f64];
    third.allreduce(&mut buf, Op::Sum).expect("the replacement's call");
    third.finalize().expect("finalize");
    assert_eq!(survivor.join().unwrap().expect("the survivor"), 3.0);
    assert_eq!(buf[0], 3.0);
    assert!(!kept.is_cancelled());
}

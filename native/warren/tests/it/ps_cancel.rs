//! Cancelling a parameter-server client from another thread (what the JVM's interrupt of a
//! trainer's thread does): a pull waiting for a slower trainer, and a call waiting for a
//! server that went away, both end with `Error::Aborted` soon after the cancel, and later
//! calls fail at once. Real servers and sockets; every wait bounded.

use std::thread;
use std::time::{Duration, Instant};

use warren::ps::{
    Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, PsConfig, PsServer, TableKind, TableSpec,
};
use warren::{CancelHandle, Error};

const SECRET: &str = "ps-cancel-secret";

fn job() -> JobSpec {
    JobSpec {
        trainers: 2,
        joining: Vec::new(),
        mode: Mode::Sync,
        tables: vec![TableSpec {
            name: "w".into(),
            kind: TableKind::Dense { len: 4 },
            init: Init::Zeros,
            optimizer: Optimizer::sgd(1.0),
        }],
    }
}

fn opts() -> PsClientOptions {
    PsClientOptions {
        connect_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(120),
        ..Default::default()
    }
}

fn push(c: &mut PsClient) {
    c.push(&[Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0; 4] }]).unwrap();
}

/// Cancels `cancel` after `after` from another thread; returns how long the call took after the cancel.
fn cancel_later(cancel: &CancelHandle, after: Duration) -> thread::JoinHandle<Instant> {
    let cancel = cancel.clone();
    thread::spawn(move || {
        thread::sleep(after);
        let at = Instant::now();
        cancel.cancel("test cancels");
        at
    })
}

fn assert_aborted(e: Error) {
    assert!(matches!(e, Error::Aborted { .. }), "expected an abort, got {e}");
    assert!(e.to_string().contains("test cancels"), "{e}");
}

#[test]
fn a_pull_waiting_for_a_slower_trainer_is_cancelled() {
    let mut cfg = PsConfig::new(SECRET, 0, 1);
    cfg.pull_timeout = Duration::from_secs(120);
    let server = PsServer::start(cfg).unwrap();
    let uris = vec![server.uri().to_string()];
    let cancel = CancelHandle::new();
    let mut c = PsClient::connect_cancellable(&uris, SECRET, Some(0), opts(), cancel.clone()).unwrap();
    c.define(&job()).unwrap();
    push(&mut c);
    // Trainer 1 never pushes step 0: this pull waits for it.
    let canceller = cancel_later(&cancel, Duration::from_millis(300));
    let e = c.pull_dense("w", 0..4).unwrap_err();
    let took = canceller.join().unwrap().elapsed();
    assert_aborted(e);
    println!("pull ended {took:?} after the cancel");
    // Generous bound for a loaded machine; the design target is 100 ms.
    assert!(took < Duration::from_secs(10), "the pull ended {took:?} after the cancel");
    let started = Instant::now();
    assert_aborted(c.status().unwrap_err());
    assert!(started.elapsed() < Duration::from_secs(5), "a call after the cancel fails at once");
}

#[test]
fn a_call_waiting_for_a_server_that_went_away_is_cancelled() {
    let server = PsServer::start(PsConfig::new(SECRET, 0, 1)).unwrap();
    let uris = vec![server.uri().to_string()];
    let cancel = CancelHandle::new();
    let mut c = PsClient::connect_cancellable(&uris, SECRET, Some(0), opts(), cancel.clone()).unwrap();
    c.define(&job()).unwrap();
    server.stop();
    // The push finds the server gone and waits (up to 120 s) for it to come back.
    let canceller = cancel_later(&cancel, Duration::from_millis(500));
    let e = c.push(&[Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0; 4] }]).unwrap_err();
    let took = canceller.join().unwrap().elapsed();
    assert_aborted(e);
    println!("push ended {took:?} after the cancel");
    assert!(took < Duration::from_secs(10), "the push ended {took:?} after the cancel");
}

#[test]
fn connecting_to_a_server_not_there_yet_is_cancelled() {
    let nobody = crate::common::RefusedPort::new();
    let uris = vec![nobody.uri()];
    let cancel = CancelHandle::new();
    let canceller = cancel_later(&cancel, Duration::from_millis(300));
    let e = PsClient::connect_cancellable(&uris, SECRET, Some(0), opts(), cancel.clone()).unwrap_err();
    let took = canceller.join().unwrap().elapsed();
    assert_aborted(e);
    assert!(took < Duration::from_secs(10), "connecting ended {took:?} after the cancel");
}

//! Test harness: a real tracker and N workers as threads on 127.0.0.1, with a hard time limit.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use warren::{Communicator, Config, Tracker, TrackerConfig};

/// Hard limit on any one multi-worker test body.
pub const HARD_LIMIT: Duration = Duration::from_secs(120);

pub fn start_tracker(n: usize) -> Tracker {
    Tracker::start(TrackerConfig::new(n, "test-secret")).expect("tracker starts")
}

pub fn worker_config(tracker: &Tracker, task: usize) -> Config {
    let mut env: std::collections::HashMap<String, String> = tracker.worker_env().into_iter().collect();
    env.insert("WARREN_TASK_ID".into(), task.to_string());
    env.insert("WARREN_TIMEOUT_S".into(), "30".into());
    env.insert("WARREN_CONNECT_TIMEOUT_S".into(), "30".into());
    Config::from_map(&env).expect("valid config")
}

/// Runs `body` on `n` workers (threads), each with its config tweaked by `tweak`; returns the
/// results indexed by task id. Panics if the workers do not all return within HARD_LIMIT.
pub fn run_world<T, F, C>(n: usize, tweak: C, body: F) -> Vec<warren::Result<T>>
where
    T: Send + 'static,
    F: Fn(&mut Communicator) -> warren::Result<T> + Send + Sync + 'static,
    C: Fn(usize, &mut Config),
{
    let tracker = start_tracker(n);
    let body = std::sync::Arc::new(body);
    let (tx, rx) = mpsc::channel();
    for task in 0..n {
        let mut cfg = worker_config(&tracker, task);
        tweak(task, &mut cfg);
        let tx = tx.clone();
        let body = body.clone();
        thread::spawn(move || {
            let r = Communicator::init(cfg).and_then(|mut c| {
                let out = body(&mut c);
                match out {
                    Ok(v) => c.finalize().map(|_| v),
                    Err(e) => Err(e),
                }
            });
            let _ = tx.send((task, r));
        });
    }
    drop(tx);
    let mut out: Vec<Option<warren::Result<T>>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (task, r) = rx.recv_timeout(HARD_LIMIT).expect("a worker hung past the hard limit");
        out[task] = Some(r);
    }
    out.into_iter().map(|r| r.unwrap()).collect()
}

/// A path under the system's temporary directory named after `tag`, unique in this process:
/// every suite runs in the one test process, so its id and a tag alone may name the same
/// directory for two tests.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("warren-{tag}-{}-{n}", std::process::id()))
}

/// A port on 127.0.0.1 bound but never listening, for as long as this value lives:
/// connections to it are refused, and no other test's listener can take the port over (a
/// port closed after binding can be handed to the next listener that asks for any port).
pub struct RefusedPort(socket2::Socket);

impl RefusedPort {
    pub fn new() -> RefusedPort {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let any_port: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket.bind(&any_port.into()).unwrap();
        RefusedPort(socket)
    }

    /// `127.0.0.1:port`.
    pub fn uri(&self) -> String {
        self.0.local_addr().unwrap().as_socket().unwrap().to_string()
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().unwrap().as_socket().unwrap().port()
    }
}

/// Deterministic pseudo-random numbers (xorshift) so tests need no seed plumbing.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

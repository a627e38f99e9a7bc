//! What the master crash sweeps share: a dataset of one-record chunks, `warren master`
//! processes on a fixed port, worker clients that record every task they finished, and the
//! end-of-pass checks (through `warren master status` and by reloading the store).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warren::master::{ClientOptions, GetTask, MasterClient, Queue, QueueCodec, QueueSettings};
use warren::recordio::{Compressor, Writer, WriterOptions};
use warren::store::Store;

pub const WARREN: &str = env!("CARGO_BIN_EXE_warren");
pub const SECRET: &str = "crash-test-secret";
/// Tasks in a schedule's dataset (one chunk each, in two files).
pub const TASKS: u64 = 60;
/// Worker clients per schedule.
pub const CLIENTS: usize = 3;

/// A temporary directory, removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    /// A fresh directory named after `tag`.
    pub fn new(tag: &str) -> Dir {
        let dir = super::temp_dir(tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes [`TASKS`] one-record chunks into two RecordIO files; returns their glob pattern.
pub fn dataset(dir: &Path) -> String {
    for f in 0..2 {
        let mut w = Writer::create(
            dir.join(format!("part-{f}.rio")),
            WriterOptions { max_chunk_bytes: 1, compressor: Compressor::None },
        )
        .unwrap();
        for i in 0..TASKS / 2 {
            w.write(format!("{f}-{i}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    dir.join("part-*.rio").display().to_string()
}

/// A port that was free a moment ago, below the kernel's ephemeral range: a killed server is
/// restarted on the same port, and a port from that range (what binding port 0 gives) may be
/// taken meanwhile as the local port of any outgoing connection ("Address already in use").
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, span) = (ephemeral_low.saturating_sub(12_000).max(1024), 12_000u32.min(ephemeral_low - 1024));
    // Test processes run in parallel: each starts at its own place and steps by a number
    // prime to the span, so it visits every port once.
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = low + start.wrapping_add(n.wrapping_mul(7)) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free port in {low}..{}", low + span)
}

/// A `warren master` process; killed (SIGKILL) on drop.
pub struct Master {
    pub child: Child,
    uri: mpsc::Receiver<String>,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl Master {
    /// Starts `warren master` on `store` and `port` with short task timeouts (a task handed
    /// out in a reply the kill swallowed comes back soon). `extra` are further arguments.
    pub fn spawn(dir: &Path, store: &str, pattern: &str, port: u16, n: usize, extra: &[&str]) -> Master {
        let log = dir.join(format!("master-{n}.log"));
        let mut child = Command::new(WARREN)
            .args(["master", "--dataset", pattern, "--chunks-per-task", "1", "--store", store])
            .args(["--port", &port.to_string(), "--progress-s", "0.5"])
            .args(["--initial-timeout-s", "0.5", "--min-timeout-s", "0.5", "--max-failures", "1000"])
            .args(extra)
            .env("WARREN_JOB_SECRET", SECRET)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn warren master");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(uri) = line.strip_prefix("WARREN_MASTER_URI=") {
                    let _ = tx.send(uri.to_string());
                }
            }
        });
        Master { child, uri: rx, log }
    }

    /// Waits (at most `limit`) until the master serves, and checks it serves on `port`.
    pub fn wait_serving(&mut self, port: u16, limit: Duration) {
        let uri = self.uri.recv_timeout(limit).unwrap_or_else(|_| {
            let _ = self.child.kill();
            panic!("master did not start within {limit:?}; log:\n{}", self.log_text())
        });
        assert_eq!(uri, format!("127.0.0.1:{port}"));
    }

    /// Whether it printed its address (serves) already.
    pub fn is_serving(&self) -> bool {
        self.uri.try_recv().is_ok()
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the workers of a schedule report.
#[derive(Default)]
pub struct Progress {
    /// Tasks some worker reported finished (and the master acknowledged the report).
    pub finished: Mutex<BTreeSet<u64>>,
    /// Finish reports acknowledged.
    pub reports: AtomicU64,
    /// Set when the schedule is over time.
    pub stop: AtomicBool,
}

/// A worker: sets the dataset, then gets and finishes tasks (2-10 ms each) until the master
/// says pass 0 is over.
pub fn worker(uri: String, seed: u64, progress: &Progress, pattern: String) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let opts = ClientOptions { call_timeout: Duration::from_secs(30), ..Default::default() };
    let mut c = MasterClient::new(&uri, SECRET, opts);
    c.set_dataset(&[pattern], 1).map_err(|e| e.to_string())?;
    while !progress.stop.load(Ordering::Relaxed) {
        match c.get_task(0).map_err(|e| e.to_string())? {
            GetTask::Task(t) => {
                std::thread::sleep(Duration::from_micros(rng.gen_range(2000..10_000)));
                c.task_finished(t.id, t.epoch).map_err(|e| e.to_string())?;
                progress.finished.lock().unwrap().insert(t.id.0);
                progress.reports.fetch_add(1, Ordering::Relaxed);
            }
            GetTask::NoMoreTasksNow => std::thread::sleep(Duration::from_millis(5)),
            GetTask::PassFinished { current_pass: 1 } => return Ok(()),
            other => return Err(format!("unexpected answer {other:?}")),
        }
    }
    Err("stopped: schedule over time".into())
}

/// Waits for a random kill point: a random number of further finish reports, or a random
/// time. Returns false if the workers are all done first.
pub fn wait_kill_point(rng: &mut StdRng, progress: &Progress, done: &dyn Fn() -> bool, deadline: Instant) -> bool {
    if rng.gen_bool(0.5) {
        let target = progress.reports.load(Ordering::Relaxed) + rng.gen_range(0..TASKS / 4);
        while progress.reports.load(Ordering::Relaxed) < target && !done() {
            assert!(Instant::now() < deadline, "no progress");
            std::thread::sleep(Duration::from_micros(200));
        }
    } else {
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..60)));
    }
    !done()
}

/// The end-of-pass checks: every task was reported finished by some client, and the live
/// master (asked through `warren master status`) has moved on to pass 1 with every task in
/// todo.
pub fn check_pass_done(seed: u64, uri: &str, progress: &Progress) {
    let finished = progress.finished.lock().unwrap().clone();
    assert_eq!(finished, (0..TASKS).collect::<BTreeSet<_>>(), "seed {seed}");
    let out = Command::new(WARREN)
        .args(["master", "status", "--uri", uri])
        .env("WARREN_JOB_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "seed {seed}: {}", String::from_utf8_lossy(&out.stderr));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (st["pass"].as_u64(), st["tasks"].as_u64(), st["todo"].as_u64()),
        (Some(1), Some(TASKS), Some(TASKS)),
        "seed {seed}: {st}"
    );
}

/// The store (the master that used it killed) reloads into a consistent queue at the start
/// of pass 1: every task in todo, none pending, done or failed.
pub fn check_store(seed: u64, store: &dyn Store<QueueCodec>) {
    let (snapshot, changes) = store.load().unwrap();
    let q = Queue::restore(QueueSettings::default(), snapshot, changes).unwrap();
    assert_eq!(q.pass(), 1, "seed {seed}");
    let c = q.counts();
    assert_eq!((c.todo, c.pending, c.done, c.failed), (TASKS as usize, 0, 0, 0), "seed {seed}");
    assert_eq!(q.task_count(), TASKS as usize, "seed {seed}");
}

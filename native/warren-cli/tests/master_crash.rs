//! Crash tests of the data master: a real `warren master` process is killed with SIGKILL at
//! seeded random points while worker clients pull and finish tasks, and restarted on the same
//! store and port. Afterwards every task of the pass was reported finished by some client
//! (at-least-once), the master has moved on to the next pass, `warren master status` says
//! so, and the store reloads into a consistent queue. Each schedule has a time limit.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warren::master::{ClientOptions, GetTask, MasterClient, Queue, QueueSettings};
use warren::recordio::{Compressor, Writer, WriterOptions};
use warren::store::{FileStore, Store};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");
const SECRET: &str = "crash-test-secret";
const TASKS: u64 = 60;
const SCHEDULES: u64 = 20;
const CLIENTS: usize = 3;
/// Time limit of one schedule, restarts included.
const SCHEDULE_LIMIT: Duration = Duration::from_secs(60);

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dataset(dir: &Path) -> String {
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `warren master` and waits (bounded) for its WARREN_MASTER_URI line.
fn start_master(dir: &Path, pattern: &str, port: u16, n: usize) -> Child {
    let log = std::fs::File::create(dir.join(format!("master-{n}.log"))).unwrap();
    let mut child = Command::new(WARREN)
        .args(["master", "--dataset", pattern, "--chunks-per-task", "1"])
        .arg("--store")
        .arg(format!("file:{}", dir.join("store").display()))
        .args(["--port", &port.to_string(), "--progress-s", "0.5"])
        // Short timeouts: a task handed out in a reply the kill swallowed comes back soon.
        .args(["--initial-timeout-s", "0.5", "--min-timeout-s", "0.5", "--max-failures", "1000"])
        .env("WARREN_JOB_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(log)
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
    let uri = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!(
            "master {n} did not start; log:\n{}",
            std::fs::read_to_string(dir.join(format!("master-{n}.log"))).unwrap()
        )
    });
    assert_eq!(uri, format!("127.0.0.1:{port}"));
    child
}

struct Progress {
    finished: Mutex<BTreeSet<u64>>,
    reports: AtomicU64,
    stop: AtomicBool,
}

fn worker(uri: String, seed: u64, progress: Arc<Progress>, pattern: String) -> Result<(), String> {
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

fn run_schedule(seed: u64) -> (usize, u64) {
    let dir = Dir(std::env::temp_dir().join(format!("warren-crash-{}-{seed}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let pattern = dataset(&dir.0);
    let port = free_port();
    let uri = format!("127.0.0.1:{port}");
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut starts = 0;
    let mut master = start_master(&dir.0, &pattern, port, starts);
    let progress = Arc::new(Progress {
        finished: Mutex::new(BTreeSet::new()),
        reports: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (uri, progress, pattern) = (uri.clone(), progress.clone(), pattern.clone());
            std::thread::spawn(move || worker(uri, seed * 100 + i as u64, progress, pattern))
        })
        .collect();
    let all_done = |workers: &[std::thread::JoinHandle<Result<(), String>>]| workers.iter().all(|w| w.is_finished());

    let kills = rng.gen_range(1..=3);
    for _ in 0..kills {
        // Kill after a random number of further completions, or after a random time.
        if rng.gen_bool(0.5) {
            let target = progress.reports.load(Ordering::Relaxed) + rng.gen_range(0..TASKS / 4);
            while progress.reports.load(Ordering::Relaxed) < target && !all_done(&workers) {
                assert!(started.elapsed() < SCHEDULE_LIMIT, "seed {seed}: no progress");
                std::thread::sleep(Duration::from_micros(200));
            }
        } else {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..60)));
        }
        if all_done(&workers) {
            break;
        }
        master.kill().unwrap(); // SIGKILL
        master.wait().unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
        starts += 1;
        master = start_master(&dir.0, &pattern, port, starts);
    }
    while !all_done(&workers) {
        if started.elapsed() > SCHEDULE_LIMIT {
            progress.stop.store(true, Ordering::Relaxed);
            let _ = master.kill();
            panic!("seed {seed}: the pass did not finish within {SCHEDULE_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for w in workers {
        w.join().unwrap().unwrap_or_else(|e| panic!("seed {seed}: worker failed: {e}"));
    }
    // Every task was reported finished by some client.
    let finished = progress.finished.lock().unwrap().clone();
    assert_eq!(finished, (0..TASKS).collect::<BTreeSet<_>>(), "seed {seed}");

    // The live master agrees, through `warren master status`.
    let out = Command::new(WARREN)
        .args(["master", "status", "--uri", &uri])
        .env("WARREN_JOB_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((st["pass"].as_u64(), st["tasks"].as_u64(), st["todo"].as_u64()), (Some(1), Some(TASKS), Some(TASKS)));
    master.kill().unwrap();
    master.wait().unwrap();

    // The store reloads into a consistent queue at the same point.
    let store = FileStore::open(dir.0.join("store")).unwrap();
    let (snapshot, changes) = store.load().unwrap();
    let q = Queue::restore(QueueSettings::default(), snapshot, changes).unwrap();
    assert_eq!(q.pass(), 1, "seed {seed}");
    let c = q.counts();
    assert_eq!((c.todo, c.pending, c.done, c.failed), (TASKS as usize, 0, 0, 0), "seed {seed}");
    (starts, progress.reports.load(Ordering::Relaxed))
}

#[test]
fn master_killed_at_random_points_loses_no_task() {
    let mut restarts = 0;
    for seed in 0..SCHEDULES {
        let started = Instant::now();
        let (starts, reports) = run_schedule(seed);
        assert!(starts >= 1, "seed {seed}: the pass ended before the first kill; slow the workers down");
        eprintln!("seed {seed}: {starts} kill(s), {reports} finish reports, {:?}", started.elapsed());
        restarts += starts;
    }
    assert!(restarts >= SCHEDULES as usize, "the schedules must actually kill the master ({restarts} kills)");
}

//! `warren bench scale`: many workers as threads of this process on the in-memory transport
//! (`WARREN_TRANSPORT=mem`), with a real tracker in the process: rendezvous time, allreduce
//! latency, the time to recover one lost worker, and the tracker's CPU time in each phase.
//! The tracker's side (registration, views, re-link rounds, heartbeats) is the code a cluster
//! runs, and its CPU time is the part of rendezvous and recovery that does not shrink with more
//! machines; the workers share this machine's cores, so the wall-clock figures are upper bounds
//! of a cluster's, where every worker has cores of its own.

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use warren::config::TransportChoice;
use warren::{Communicator, Config, Error, Op, Tracker, TrackerConfig};

/// Arguments of `warren bench scale`.
#[derive(Args, Clone)]
pub struct BenchScaleArgs {
    /// Number of workers (threads of this process).
    #[arg(short = 'n', long = "workers", default_value_t = 64)]
    workers: usize,
    /// Sizes of the timed allreduces (float32 sum), in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4,1048576")]
    sizes: Vec<usize>,
    /// Timed allreduces per size (each followed by an untimed checkpoint).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// Seconds the workers stay idle (heartbeats only) while the tracker's CPU time is
    /// measured; 0 skips it.
    #[arg(long, default_value_t = 5.0)]
    idle_s: f64,
    /// Skip the one-loss recovery.
    #[arg(long)]
    no_loss: bool,
}

/// What one worker thread measured.
#[derive(Default)]
struct Sample {
    joined: Option<Instant>,
    /// Per size: rank 0's call times.
    calls: Vec<Vec<f64>>,
    recovered: Option<Instant>,
}

/// Runs the benchmark and prints one JSON line.
pub fn run(a: &BenchScaleArgs) -> warren::Result<u8> {
    if a.workers < 2 || a.iters == 0 || a.sizes.is_empty() {
        return Err(Error::Config("--workers must be at least 2, --iters at least 1, --sizes not empty".into()));
    }
    let n = a.workers;
    let mut tcfg = TrackerConfig::new(n, "bench-scale");
    tcfg.rendezvous_timeout = Duration::from_secs(600);
    let tracker = Tracker::start(tcfg)?;
    let env: std::collections::HashMap<String, String> = tracker.worker_env().into_iter().collect();
    let victim = n / 2;
    let samples: Arc<Vec<Mutex<Sample>>> = Arc::new((0..n).map(|_| Mutex::new(Sample::default())).collect());
    let phases = Arc::new(Phases::new(n + 1));
    let lose = Arc::new(Mutex::new(None::<Instant>));
    let start = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for task in 0..n {
        let mut env = env.clone();
        env.insert("WARREN_TASK_ID".into(), task.to_string());
        env.insert("WARREN_TIMEOUT_S".into(), "600".into());
        env.insert("WARREN_CONNECT_TIMEOUT_S".into(), "600".into());
        let mut cfg = Config::from_map(&env)?;
        cfg.transport = TransportChoice::Mem;
        cfg.robust = true;
        let (samples, phases, lose, a) = (samples.clone(), phases.clone(), lose.clone(), a.clone());
        let h = thread::Builder::new()
            .name(format!("bench-worker-{task}"))
            .stack_size(1 << 20)
            .spawn(move || worker(cfg, task, task == victim, &a, &samples[task], &phases, &lose))
            .map_err(|e| Error::io("starting a worker thread", e))?;
        handles.push(h);
    }
    phases.joined.wait();
    let rendezvous_cpu = tracker_cpu_s();
    let mut tracker_cpu = None;
    if a.idle_s > 0.0 {
        phases.idle_start.wait();
        let (cpu0, t0) = (tracker_cpu_s(), Instant::now());
        thread::sleep(Duration::from_secs_f64(a.idle_s));
        tracker_cpu = Some((tracker_cpu_s() - cpu0) / t0.elapsed().as_secs_f64());
        phases.idle_end.wait();
    }
    let mut recovery_cpu = None;
    if !a.no_loss {
        phases.loss_start.wait();
        let cpu0 = tracker_cpu_s();
        phases.loss_end.wait();
        recovery_cpu = Some(tracker_cpu_s() - cpu0);
    }
    for (task, h) in handles.into_iter().enumerate() {
        h.join().map_err(|_| Error::Protocol(format!("worker thread {task} panicked")))??;
    }
    let _ = tracker.wait(Some(Duration::from_secs(60)));
    let samples: Vec<Sample> = Arc::try_unwrap(samples)
        .map_err(|_| Error::Protocol("a worker thread still holds its sample".into()))?
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    let last_join = samples.iter().filter_map(|s| s.joined).max().expect("every worker joined");
    let lost_at = *lose.lock().unwrap_or_else(|e| e.into_inner());
    let recovery = lost_at.map(|t0| {
        let done = samples.iter().filter_map(|s| s.recovered).max().expect("every worker recovered");
        (done - t0).as_secs_f64()
    });
    let calls: Vec<serde_json::Value> = a
        .sizes
        .iter()
        .zip(&samples[0].calls)
        .map(|(&bytes, times)| {
            let mut t = times.clone();
            t.sort_by(f64::total_cmp);
            serde_json::json!({"bytes": bytes / 4 * 4, "median_s": t[t.len() / 2], "max_s": t[t.len() - 1]})
        })
        .collect();
    let line = serde_json::json!({
        "bench": "scale",
        "workers": n,
        "transport": "mem",
        "robust": true,
        "rendezvous_s": (last_join - start).as_secs_f64(),
        "rendezvous_tracker_cpu_s": rendezvous_cpu,
        "allreduce": calls,
        "tracker_cpu_idle_share": tracker_cpu,
        "idle_s": a.idle_s,
        "recovery_s": recovery,
        "recovery_tracker_cpu_s": recovery_cpu,
        "rss_mib": rss_mib(),
        "nproc": thread::available_parallelism().map(|p| p.get()).unwrap_or(1),
    });
    println!("{line}");
    Ok(0)
}

/// Where the workers and the measuring thread meet, between the phases.
struct Phases {
    joined: Barrier,
    idle_start: Barrier,
    idle_end: Barrier,
    loss_start: Barrier,
    loss_end: Barrier,
}

impl Phases {
    fn new(n: usize) -> Phases {
        let b = || Barrier::new(n);
        Phases { joined: b(), idle_start: b(), idle_end: b(), loss_start: b(), loss_end: b() }
    }
}

fn worker(
    cfg: Config,
    task: usize,
    is_victim: bool,
    a: &BenchScaleArgs,
    sample: &Mutex<Sample>,
    phases: &Phases,
    lose: &Mutex<Option<Instant>>,
) -> warren::Result<()> {
    let replacement = {
        let mut c = cfg.clone();
        c.attempt = 1;
        c
    };
    let mut comm = Communicator::init(cfg)?;
    let record = |f: &mut dyn FnMut(&mut Sample)| f(&mut sample.lock().unwrap_or_else(|e| e.into_inner()));
    record(&mut |s| s.joined = Some(Instant::now()));
    phases.joined.wait();
    for &bytes in &a.sizes {
        let mut buf = vec![task as f32; (bytes / 4).max(1)];
        comm.allreduce(&mut buf, Op::Sum)?;
        comm.checkpoint(&[], None)?;
        let mut times = Vec::with_capacity(a.iters);
        for _ in 0..a.iters {
            let t = Instant::now();
            comm.allreduce(&mut buf, Op::Sum)?;
            times.push(t.elapsed().as_secs_f64());
            comm.checkpoint(&[], None)?;
        }
        record(&mut |s| s.calls.push(times.clone()));
    }
    if a.idle_s > 0.0 {
        phases.idle_start.wait();
        phases.idle_end.wait();
    }
    if !a.no_loss {
        comm.barrier()?;
        comm.checkpoint(&[], None)?;
        phases.loss_start.wait();
        if is_victim {
            *lose.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            drop(comm);
            comm = Communicator::init(replacement)?;
            comm.load_checkpoint()?;
        }
        let mut one = [1.0f32];
        comm.allreduce(&mut one, Op::Sum)?;
        record(&mut |s| s.recovered = Some(Instant::now()));
        phases.loss_end.wait();
    }
    comm.finalize()
}

/// CPU seconds spent so far by this process's tracker threads (`warren-tracker`).
fn tracker_cpu_s() -> f64 {
    let tick = 100.0; // USER_HZ: the unit of /proc's utime and stime on Linux
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|stat| {
            let (comm, rest) = stat.split_once(") ")?;
            comm.contains("warren-tracker").then_some(())?;
            let f: Vec<&str> = rest.split(' ').collect();
            // After the name: state is field 3, utime 14, stime 15.
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / tick)
        })
        .sum()
}

/// This process's resident memory in MiB.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

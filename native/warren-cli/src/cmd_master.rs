//! `warren master`: the data master as a process; `warren master status`; and
//! `warren bench master`, which measures completions through the real network service.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use warren::Error;
use warren::master::{ClientOptions, GetTask, MasterClient, MasterConfig, MasterService, QueueCodec, QueueSettings};
use warren::recordio::{Compressor, Writer, WriterOptions};
use warren::store::{DEFAULT_FLUSHES_IN_FLIGHT, MAX_LEASE_TTL_S, MIN_LEASE_TTL_S, OpenOptions};

/// Arguments of `warren master`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MasterArgs {
    #[command(subcommand)]
    cmd: Option<MasterCmd>,
    /// Glob pattern of the dataset's RecordIO files (repeatable). Without it, the first
    /// worker's `set_dataset` sets the dataset.
    #[arg(long)]
    dataset: Vec<String>,
    /// Chunks per task (with --dataset).
    #[arg(long, default_value_t = 1)]
    chunks_per_task: u32,
    /// Where the queue is kept: `file:DIR` (write-ahead log), `snapshot:DIR` (the seed's
    /// snapshot on every change; slow), or `etcd:HOST:PORT[/PREFIX]` (a leader lock: a second
    /// master on the same prefix waits, then takes over when the first dies).
    #[arg(long)]
    store: Option<String>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seconds between progress lines in the log.
    #[arg(long, default_value_t = 10.0)]
    progress_s: f64,
    /// Timeout of a task before any task completed, in seconds.
    #[arg(long, default_value_t = 600.0)]
    initial_timeout_s: f64,
    /// Lower bound of a task's timeout, in seconds.
    #[arg(long, default_value_t = 30.0)]
    min_timeout_s: f64,
    /// Failures or timeouts of a task in one pass before it is discarded.
    #[arg(long, default_value_t = 3)]
    max_failures: u32,
    /// Answer a task hand-out only once it is durable. By default it is answered at once and
    /// made durable with the next group commit; a crash may then forget hand-outs nobody has
    /// reported on, and their tasks are handed out again (at-least-once, as after a timeout).
    #[arg(long)]
    durable_hand_outs: bool,
    #[command(flatten)]
    etcd: EtcdArgs,
}

/// Settings of the etcd store (`--store etcd:...`).
#[derive(Args, Clone, Debug)]
pub struct EtcdArgs {
    /// Lease TTL of the etcd leader lock, in seconds (1-3600): after a master dies, a
    /// successor waits this long before it takes over; a master that cannot renew its lease
    /// for this long stops. etcd raises a TTL below its minimum (1.5 x its
    /// --election-timeout, 2 s by default) to that minimum.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i64).range(MIN_LEASE_TTL_S..=MAX_LEASE_TTL_S))]
    etcd_lease_ttl_s: i64,
    /// etcd transactions of queued changes in flight at once (1-64): with more than one, a
    /// change submitted during a round trip starts its own at once and etcd commits them
    /// together; more, smaller transactions cost more CPU (docs/benchmarks-master.md).
    #[arg(long, default_value_t = DEFAULT_FLUSHES_IN_FLIGHT, value_parser = clap::value_parser!(u16).range(1..=64))]
    etcd_flushes_in_flight: u16,
}

impl EtcdArgs {
    /// These settings as the options of [`warren::store::open_with`].
    fn open_options(&self) -> OpenOptions {
        OpenOptions {
            etcd_lease_ttl_s: self.etcd_lease_ttl_s,
            etcd_flushes_in_flight: usize::from(self.etcd_flushes_in_flight),
        }
    }
}

/// Subcommands of `warren master`.
#[derive(Subcommand)]
enum MasterCmd {
    /// Print a running master's counts as one JSON line.
    Status(StatusArgs),
}

/// Arguments of `warren master status`.
#[derive(Args)]
struct StatusArgs {
    /// The master's `host:port` (as printed in WARREN_MASTER_URI).
    #[arg(long, env = "WARREN_MASTER_URI")]
    uri: String,
    /// Seconds to wait for the master.
    #[arg(long, default_value_t = 10.0)]
    timeout_s: f64,
}

/// The job secret from the environment; unlike the tracker, a client cannot invent one.
pub(crate) fn client_secret() -> warren::Result<String> {
    if std::env::var(warren::config::keys::JOB_SECRET).is_err()
        && std::env::var(warren::config::keys::JOB_SECRET_FILE).is_err()
    {
        return Err(Error::Config(
            "set WARREN_JOB_SECRET or WARREN_JOB_SECRET_FILE to the job secret of the service".into(),
        ));
    }
    super::launcher::job_secret(false)
}

/// Runs `warren master` (until killed, or until its store fails: exit status 1).
pub fn run(a: MasterArgs) -> warren::Result<u8> {
    if let Some(MasterCmd::Status(s)) = a.cmd {
        return status(s);
    }
    let spec = a.store.ok_or_else(|| Error::Config("warren master needs --store file:DIR or etcd:HOST:PORT".into()))?;
    let store = warren::store::open_with::<QueueCodec>(&spec, &a.etcd.open_options())?;
    let secret = super::launcher::job_secret(true)?;
    let mut cfg = MasterConfig::new(secret);
    cfg.tls = super::launcher::tls()?;
    cfg.host = a.host;
    cfg.port = a.port;
    cfg.progress_interval = Duration::from_secs_f64(a.progress_s.max(0.1));
    cfg.durable_hand_outs = a.durable_hand_outs;
    cfg.settings = QueueSettings {
        initial_timeout_ms: (a.initial_timeout_s * 1000.0) as u64,
        min_timeout_ms: (a.min_timeout_s * 1000.0) as u64,
        max_failures: a.max_failures,
        ..QueueSettings::default()
    };
    if !a.dataset.is_empty() {
        cfg.dataset = Some((a.dataset, a.chunks_per_task));
    }
    let master = MasterService::start(cfg, store)?;
    println!("WARREN_MASTER_URI={}", master.uri());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(why) = master.failure() {
            eprintln!("warren master: stopping: {why}");
            return Ok(1);
        }
    }
}

fn status(s: StatusArgs) -> warren::Result<u8> {
    let opts = ClientOptions {
        call_timeout: Duration::from_secs_f64(s.timeout_s),
        tls: super::launcher::tls()?,
        ..Default::default()
    };
    let mut client = MasterClient::new(&s.uri, client_secret()?, opts);
    let st = client.status()?;
    println!("{}", serde_json::to_string(&st).expect("status serializes"));
    Ok(0)
}

/// Arguments of `warren bench master`.
#[derive(Args, Clone)]
pub struct BenchMasterArgs {
    /// Tasks in the dataset (one chunk each).
    #[arg(long, default_value_t = 100_000)]
    tasks: u64,
    /// Client threads, each with its own connection.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// `file:DIR`, `snapshot:DIR` or `etcd:HOST:PORT[/PREFIX]` (default: a file store in a temporary directory).
    #[arg(long)]
    store: Option<String>,
    /// `separate`: get_task then task_finished (two calls per completion; only the second
    /// waits for durability unless --durable-hand-outs);
    /// `combined`: finish_and_get_task (one).
    #[arg(long, default_value = "separate")]
    mode: String,
    /// Stop after this many completions (for slow stores; the rate is then extrapolated).
    #[arg(long)]
    max_completions: Option<u64>,
    /// As `warren master --durable-hand-outs`: a get_task waits for durability too.
    #[arg(long)]
    durable_hand_outs: bool,
    #[command(flatten)]
    etcd: EtcdArgs,
}

/// Runs `warren bench master`: a master service in this process, on a real TCP port, and
/// `--clients` client threads completing tasks through it; prints one JSON line.
pub fn bench(a: BenchMasterArgs) -> warren::Result<u8> {
    let combined = match a.mode.as_str() {
        "separate" => false,
        "combined" => true,
        other => return Err(Error::Config(format!("--mode {other:?}: expected separate or combined"))),
    };
    if a.tasks == 0 || a.clients == 0 {
        return Err(Error::Config("--tasks and --clients must be at least 1".into()));
    }
    let tmp = std::env::temp_dir().join(format!("warren-bench-master-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    let result = bench_in(&a, combined, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn bench_in(a: &BenchMasterArgs, combined: bool, tmp: &std::path::Path) -> warren::Result<u8> {
    let data = tmp.join("data.rio");
    let mut w = Writer::create(&data, WriterOptions { max_chunk_bytes: 1, compressor: Compressor::None })?;
    for i in 0..a.tasks {
        w.write(&i.to_le_bytes())?;
    }
    w.finish()?;
    let spec = a.store.clone().unwrap_or_else(|| format!("file:{}", tmp.join("store").display()));
    let store = warren::store::open_with::<QueueCodec>(&spec, &a.etcd.open_options())?;
    let secret = warren::wire::auth::generate_secret();
    let mut cfg = MasterConfig::new(secret.clone());
    cfg.dataset = Some((vec![data.display().to_string()], 1));
    cfg.progress_interval = Duration::from_secs(3600);
    cfg.durable_hand_outs = a.durable_hand_outs;
    let master = MasterService::start(cfg, store)?;
    let limit = a.max_completions.unwrap_or(u64::MAX);
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..a.clients)
        .map(|_| {
            let (uri, secret, done) = (master.uri().to_string(), secret.clone(), done.clone());
            std::thread::spawn(move || client_loop(&uri, &secret, combined, &done, limit))
        })
        .collect();
    let mut hist = Histogram::<u64>::new(3).expect("valid histogram");
    for t in threads {
        let h = t.join().map_err(|_| Error::Master("a benchmark client panicked".into()))??;
        hist.add(h).expect("same histogram bounds");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let completions = done.load(Ordering::Relaxed);
    let store_kind = spec.split(':').next().unwrap_or("file");
    let line = serde_json::json!({
        "bench": "master",
        "store": store_kind,
        "mode": a.mode,
        "tasks": a.tasks,
        "clients": a.clients,
        "completions": completions,
        "elapsed_s": elapsed,
        "completions_per_s": completions as f64 / elapsed,
        "p50_us": hist.value_at_quantile(0.5),
        "p99_us": hist.value_at_quantile(0.99),
        "full_pass": completions >= a.tasks,
    });
    println!("{line}");
    master.stop();
    Ok(0)
}

/// One client: completes tasks until the pass is over or `limit` completions were counted;
/// returns the latency histogram of its completions (µs).
fn client_loop(
    uri: &str,
    secret: &str,
    combined: bool,
    done: &AtomicU64,
    limit: u64,
) -> warren::Result<Histogram<u64>> {
    let mut hist = Histogram::<u64>::new(3).expect("valid histogram");
    let mut c = MasterClient::new(uri, secret, ClientOptions::default());
    let mut t0 = Instant::now();
    let mut next = c.get_task(0)?;
    loop {
        let task = match next {
            GetTask::Task(t) => t,
            GetTask::NoMoreTasksNow => {
                std::thread::sleep(Duration::from_millis(1));
                next = c.get_task(0)?;
                continue;
            }
            _ => return Ok(hist),
        };
        if done.load(Ordering::Relaxed) >= limit {
            return Ok(hist);
        }
        next = if combined {
            c.finish_and_get_task(task.id, task.epoch, 0)?.1
        } else {
            c.task_finished(task.id, task.epoch)?;
            let _ = hist.record(t0.elapsed().as_micros() as u64);
            done.fetch_add(1, Ordering::Relaxed);
            t0 = Instant::now();
            c.get_task(0)?
        };
        if combined {
            let _ = hist.record(t0.elapsed().as_micros() as u64);
            done.fetch_add(1, Ordering::Relaxed);
            t0 = Instant::now();
        }
    }
}

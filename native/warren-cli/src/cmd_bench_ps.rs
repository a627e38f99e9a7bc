//! `warren bench ps`: `T` trainers x `S` parameter servers (threads of this process, or
//! servers already running with `--uris`), real loopback TCP connections. Prints one JSON
//! line.
//!
//! - `--model dense` (default): a step of a trainer pulls the whole dense table and pushes a
//!   gradient of the whole table, so it moves `2 x bytes`; the rate is the bytes all trainers
//!   moved per second of wall time, against the loopback TCP stream limit measured in the same
//!   run (one TCP connection over 127.0.0.1 writing and reading `bytes`-sized buffers as fast
//!   as it can: the same kernel copies, no encoding, no server work).
//! - `--model sparse`: an embedding of `--keys` hashed keys x `--width` floats and a dense
//!   weight of `--width` floats; a step takes a batch of `--batch` examples of `--features`
//!   random keys, pulls the rows of its keys and the weight, computes the logistic
//!   loss of (mean of the example's rows) . weight, and pushes the gradients (the model of
//!   `bench/ps_tf.py`, for TensorFlow's ParameterServerStrategy). Beside it, measured in the
//!   same run (unless `--uris`): the same traffic echoed over the same connections with no
//!   server work (`loopback_step_s`, `loopback_cpu_step_s`: [`bench_loopback::exchange`]),
//!   and the trainers' model alone on one thread (`model_cpu_step_s`). With `--bags`, the
//!   same model pulls each example's keys as one bag (the servers sum its rows: one row per
//!   example over the wire, not one per key) and pushes one gradient row per example (the
//!   model of `bench/ps_tf.py --bags`, TensorFlow's `embedding_lookup_sparse`).
//!
//! Every line has `step_s` (wall time per step) and `cpu_step_s` (this process's CPU time per
//! step over the same span: the servers' threads too, unless `--uris`).
//!
//! `--compute-ms M` makes each trainer step also sleep a random 0..M ms (uneven compute), to
//! compare sync, SSP(k) and async. `--step-log FILE` appends `trainer step unix_seconds` for
//! every completed step (the recovery benchmark reads it).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use rand::distributions::Uniform;
use rand::rngs::{SmallRng, StdRng};
use rand::{Rng, SeedableRng};
use warren::Error;
use warren::ps::{
    Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, PsConfig, PsServer, Pull, TableKind, TableSpec,
};

use crate::bench_loopback::{self, StepBytes, process_cpu_s};

/// Arguments of `warren bench ps`.
#[derive(Args, Clone)]
pub struct BenchPsArgs {
    /// Model size in bytes (one dense table of `f32`).
    #[arg(long, default_value_t = 64 << 20)]
    bytes: usize,
    /// Trainer threads.
    #[arg(long, default_value_t = 2)]
    trainers: u32,
    /// Parameter servers (threads of this process).
    #[arg(long, default_value_t = 2)]
    servers: usize,
    /// Timed steps per trainer (each a pull and a push of the whole model).
    #[arg(long, default_value_t = 5)]
    steps: u64,
    /// Untimed steps first.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// sync, async or ssp.
    #[arg(long, default_value = "async", value_parser = ["sync", "async", "ssp"])]
    mode: String,
    /// The bound k of `--mode ssp`.
    #[arg(long, default_value_t = 2)]
    staleness: u64,
    /// dense (push + pull of the whole model) or sparse (the embedding model).
    #[arg(long, default_value = "dense", value_parser = ["dense", "sparse"])]
    model: String,
    /// Sparse model: number of hashed keys (rows of the embedding).
    #[arg(long, default_value_t = 1 << 20)]
    keys: u64,
    /// Sparse model: floats per row.
    #[arg(long, default_value_t = 16)]
    width: u32,
    /// Sparse model: examples per batch.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Sparse model: keys per example.
    #[arg(long, default_value_t = 8)]
    features: usize,
    /// Sparse model: pull each example's keys as one bag (the sum of its rows, summed where
    /// the rows are) and push one gradient row per example (`Pull::SparseBags`,
    /// `Grad::SparseBags`), instead of a row per key both ways. The same model and data.
    #[arg(long)]
    bags: bool,
    /// Sparse model: the rows the embedding is expected to hold, for the servers to make room
    /// for up front (`TableKind::Sparse::expected_rows`; default `--keys`, as TensorFlow is
    /// given the whole embedding; 0: no hint, the table grows as rows are made).
    #[arg(long)]
    expected_rows: Option<u64>,
    /// Threads of each server started here (`PsConfig::threads`).
    #[arg(long, default_value_t = warren::ps::DEFAULT_THREADS)]
    server_threads: usize,
    /// Each trainer step also sleeps a random 0..M milliseconds (uneven compute).
    #[arg(long, default_value_t = 0)]
    compute_ms: u64,
    /// Use these running servers (`host:port`s in server order, comma-separated; secret from
    /// WARREN_JOB_SECRET) instead of starting `--servers` threads; no loopback reference.
    #[arg(long)]
    uris: Option<String>,
    /// Append `trainer step unix_seconds` to FILE for every completed step.
    #[arg(long)]
    step_log: Option<std::path::PathBuf>,
}

/// Runs the benchmark.
pub fn run(a: &BenchPsArgs) -> warren::Result<u8> {
    if a.bytes < 4 || a.trainers == 0 || a.servers == 0 || a.steps == 0 || a.keys == 0 || a.width == 0 {
        return Err(Error::Config(
            "--bytes must be at least 4, --trainers, --servers, --steps, --keys and --width at least 1".into(),
        ));
    }
    let sparse = a.model == "sparse";
    let loopback = if sparse || a.uris.is_some() {
        None
    } else {
        Some(bench_loopback::stream_rate(a.bytes, (2 * a.steps * u64::from(a.trainers)) as usize)?)
    };
    let exchange = if sparse && a.uris.is_none() {
        let keys = a.batch * a.features / a.servers;
        let row = a.width as usize * 4;
        let bytes = if a.bags {
            // The bags with a key at a server: all but those whose keys all went elsewhere.
            let elsewhere = (1.0 - 1.0 / a.servers as f64).powi(a.features as i32);
            let bags = (a.batch as f64 * (1.0 - elsewhere)).round() as usize;
            StepBytes { request: (keys + bags) * 8, reply: bags * row, push: (keys + bags) * 8 + bags * row }
        } else {
            StepBytes { request: keys * 8, reply: keys * row, push: keys * (8 + row) }
        };
        Some(bench_loopback::exchange(a.trainers as usize, a.servers, bytes, a.steps as usize)?)
    } else {
        None
    };
    let (elapsed, cpu) = ps_elapsed(a)?;
    let step_s = elapsed / a.steps as f64;
    let mode = if a.mode == "ssp" { format!("ssp({})", a.staleness) } else { a.mode.clone() };
    let common = format!(
        "\"trainers\":{},\"servers\":{},\"mode\":\"{mode}\",\"steps\":{},\"compute_ms\":{},\"step_s\":{step_s:.6},\"cpu_step_s\":{:.6}",
        a.trainers,
        a.servers,
        a.steps,
        a.compute_ms,
        cpu / a.steps as f64
    );
    if sparse {
        let reference = exchange.map_or(String::new(), |e| {
            format!(",\"loopback_step_s\":{:.6},\"loopback_cpu_step_s\":{:.6}", e.wall_s, e.cpu_s)
        });
        let model = format!(",\"model_cpu_step_s\":{:.6}", sparse_model_cpu_s(a));
        println!(
            "{{\"bench\":\"ps_sparse\",\"keys\":{},\"width\":{},\"batch\":{},\"features\":{},\"bags\":{},{common}{reference}{model}}}",
            a.keys, a.width, a.batch, a.features, a.bags
        );
        return Ok(0);
    }
    let rate = 2.0 * a.bytes as f64 * a.steps as f64 * f64::from(a.trainers) / elapsed;
    let reference =
        loopback.map_or(String::new(), |l| format!(",\"loopback_bytes_per_s\":{l:.0},\"ratio\":{:.3}", rate / l));
    println!("{{\"bench\":\"ps_dense\",\"bytes\":{},{common},\"ps_bytes_per_s\":{rate:.0}{reference}}}", a.bytes);
    Ok(0)
}

/// The job the benchmark runs.
fn job(a: &BenchPsArgs) -> warren::Result<JobSpec> {
    let sgd = Optimizer::sgd(if a.model == "sparse" { 0.1 } else { 0.001 });
    let tables = if a.model == "sparse" {
        vec![
            TableSpec {
                name: "emb".into(),
                kind: TableKind::Sparse { width: a.width, expected_rows: a.expected_rows.unwrap_or(a.keys) },
                init: Init::Uniform { scale: 0.01, seed: 1 },
                optimizer: sgd,
            },
            TableSpec {
                name: "w".into(),
                kind: TableKind::Dense { len: a.width.into() },
                init: Init::Zeros,
                optimizer: sgd,
            },
        ]
    } else {
        let len = (a.bytes / 4) as u64;
        vec![TableSpec { name: "w".into(), kind: TableKind::Dense { len }, init: Init::Zeros, optimizer: sgd }]
    };
    Ok(JobSpec { trainers: a.trainers, joining: Vec::new(), mode: Mode::parse(&a.mode, a.staleness)?, tables })
}

/// Seconds the timed steps of every trainer took, all trainers together: wall time, and the
/// CPU time of this whole process over the same span (the servers' threads too, unless
/// `--uris`).
fn ps_elapsed(a: &BenchPsArgs) -> warren::Result<(f64, f64)> {
    let (servers, uris, secret) = match &a.uris {
        Some(u) => (Vec::new(), super::cmd_ps::parse_uris(u)?, super::cmd_master::client_secret()?),
        None => {
            let secret = "warren-bench-ps".to_string();
            let servers: Vec<PsServer> = (0..a.servers)
                .map(|i| {
                    let mut cfg = PsConfig::new(secret.clone(), i, a.servers);
                    cfg.threads = a.server_threads;
                    PsServer::start(cfg)
                })
                .collect::<warren::Result<_>>()?;
            let uris = servers.iter().map(|s| s.uri().to_string()).collect();
            (servers, uris, secret)
        }
    };
    let job = job(a)?;
    let log = match &a.step_log {
        Some(path) => Some(Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Error::io(format!("opening {}", path.display()), e))?,
        ))),
        None => None,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..a.trainers {
        let (uris, job, tx, a, secret, log) =
            (uris.clone(), job.clone(), tx.clone(), a.clone(), secret.clone(), log.clone());
        std::thread::spawn(move || {
            let _ = tx.send(trainer(t, &uris, &secret, &job, &a, log));
        });
    }
    // Each trainer's calls have deadlines; this wait too.
    let mut spans = Vec::new();
    for _ in 0..a.trainers {
        let span = rx.recv_timeout(Duration::from_secs(1800)).map_err(|_| Error::Timeout {
            what: "the benchmark's trainers".into(),
            after: Duration::from_secs(1800),
        })??;
        spans.push(span);
    }
    let first = spans.iter().min_by_key(|s| s.start).expect("at least one trainer");
    let last = spans.iter().max_by_key(|s| s.end).expect("at least one trainer");
    let elapsed = (last.end - first.start).as_secs_f64();
    drop(servers);
    Ok((elapsed, last.cpu_at_end - first.cpu_at_start))
}

/// One step of a trainer's model on its client, given the step number.
type ModelStep<'a> = Box<dyn FnMut(&mut PsClient, u64) -> warren::Result<()> + 'a>;

/// When a trainer's timed steps started and ended, with the process's CPU seconds then.
struct Span {
    start: Instant,
    cpu_at_start: f64,
    end: Instant,
    cpu_at_end: f64,
}

/// Trainer `t`: untimed steps, then the timed ones; returns when they started and ended.
fn trainer(
    t: u32,
    uris: &[String],
    secret: &str,
    job: &JobSpec,
    a: &BenchPsArgs,
    log: Option<Arc<Mutex<std::fs::File>>>,
) -> warren::Result<Span> {
    let mut c = PsClient::connect(uris, secret, Some(t), PsClientOptions::default())?;
    c.define(job)?;
    let mut model: ModelStep<'_> =
        if a.model == "sparse" { Box::new(sparse_step(t, a)) } else { Box::new(dense_step(a)) };
    let mut rng = StdRng::seed_from_u64(u64::from(t));
    let mut step = |c: &mut PsClient| -> warren::Result<()> {
        let n = c.step();
        model(c, n)?;
        if a.compute_ms > 0 {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..a.compute_ms)));
        }
        if let Some(log) = &log {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
            let mut f = log.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(f, "{t} {n} {now:.6}").map_err(|e| Error::io("writing the step log", e))?;
        }
        Ok(())
    };
    while c.step() < a.warmup {
        step(&mut c)?;
    }
    let (start, cpu_at_start) = (Instant::now(), process_cpu_s());
    while c.step() < a.warmup + a.steps {
        step(&mut c)?;
    }
    let (end, cpu_at_end) = (Instant::now(), process_cpu_s());
    c.leave()?;
    Ok(Span { start, cpu_at_start, end, cpu_at_end })
}

/// A dense step: pull the whole table, push a gradient of the whole table.
fn dense_step(a: &BenchPsArgs) -> impl FnMut(&mut PsClient, u64) -> warren::Result<()> {
    let len = (a.bytes / 4) as u64;
    let grad = [Grad::Dense { table: "w".into(), offset: 0, values: vec![1e-3; len as usize] }];
    let mut model = vec![0f32; len as usize];
    move |c, _| {
        c.pull_dense_into("w", 0..len, &mut model)?;
        std::hint::black_box(&model);
        c.push(&grad)
    }
}

/// The sparse embedding model (see the module documentation) of one trainer: its batches and
/// its gradients, without the parameter servers.
struct SparseModel {
    trainer: u32,
    keys: u64,
    width: usize,
    batch: usize,
    features: usize,
    h: Vec<f32>,
}

impl SparseModel {
    fn new(trainer: u32, a: &BenchPsArgs) -> Self {
        let width = a.width as usize;
        SparseModel { trainer, keys: a.keys, width, batch: a.batch, features: a.features, h: vec![0f32; width] }
    }

    /// Batch `n`: its keys (`features` an example) and labels, random, seeded by the trainer
    /// and `n`.
    fn batch(&self, n: u64) -> (Vec<u64>, Vec<f32>) {
        let mut rng = SmallRng::seed_from_u64((u64::from(self.trainer) << 32) ^ n);
        // One uniform distribution for the batch's keys, not one set up per key.
        let keys = Uniform::new(0, self.keys);
        let ex: Vec<u64> = (&mut rng).sample_iter(keys).take(self.batch * self.features).collect();
        let labels: Vec<f32> = (0..self.batch).map(|_| f32::from(rng.gen_range(0u8..2))).collect();
        (ex, labels)
    }

    /// The gradients of the logistic loss given the batch's pulled `rows` and the weight `w`:
    /// a row per key of the batch, and the weight's into `g_w`.
    fn gradients(&mut self, rows: &[f32], w: &[f32], labels: &[f32], g_w: &mut [f32]) -> Vec<f32> {
        let (width, features) = (self.width, self.features);
        let mut g_rows = Vec::with_capacity(rows.len());
        g_w.fill(0.0);
        for (example, label) in rows.chunks_exact(features * width).zip(labels) {
            self.h.fill(0.0);
            for row in example.chunks_exact(width) {
                self.h.iter_mut().zip(row).for_each(|(x, v)| *x += v / features as f32);
            }
            // Every key of the example gets the same gradient row: computed once, copied.
            let at = g_rows.len();
            self.example_gradient(w, *label, g_w, &mut g_rows);
            for _ in 1..features {
                g_rows.extend_from_within(at..at + width);
            }
        }
        g_rows
    }

    /// [`gradients`](Self::gradients) given each example's sum of rows (a bagged pull): one
    /// gradient row per example, which counts for each of its keys (a bagged push).
    fn bag_gradients(&mut self, sums: &[f32], w: &[f32], labels: &[f32], g_w: &mut [f32]) -> Vec<f32> {
        let mut g_rows = Vec::with_capacity(sums.len());
        g_w.fill(0.0);
        for (sum, label) in sums.chunks_exact(self.width).zip(labels) {
            let features = self.features as f32;
            self.h.iter_mut().zip(sum).for_each(|(x, v)| *x = v / features);
            self.example_gradient(w, *label, g_w, &mut g_rows);
        }
        g_rows
    }

    /// The loss's gradient for one example of mean row `self.h` and label `label`: adds the
    /// weight's to `g_w` and appends the row every key of the example gets to `g_rows`.
    fn example_gradient(&self, w: &[f32], label: f32, g_w: &mut [f32], g_rows: &mut Vec<f32>) {
        let features = self.features as f32;
        let z: f32 = self.h.iter().zip(w).map(|(x, y)| x * y).sum();
        let g = (1.0 / (1.0 + (-z).exp()) - label) / self.batch as f32;
        g_w.iter_mut().zip(&self.h).for_each(|(d, x)| *d += g * x);
        g_rows.extend(w.iter().map(|y| g * y / features));
    }

    /// Where each example's keys end in a batch's keys (its bags).
    fn ends(&self) -> Vec<u64> {
        (1..=self.batch as u64).map(|e| e * self.features as u64).collect()
    }
}

/// CPU seconds per step of every trainer's model alone (batches and gradients, on this
/// thread, over rows and a weight as small as the servers' initial ones).
fn sparse_model_cpu_s(a: &BenchPsArgs) -> f64 {
    let width = a.width as usize;
    let rows: Vec<f32> = (0..a.batch * a.features * width).map(|i| (i % 17) as f32 * 1e-3).collect();
    let w: Vec<f32> = (0..width).map(|i| i as f32 * 1e-3).collect();
    let mut g_w = vec![0f32; width];
    let mut models: Vec<SparseModel> = (0..a.trainers).map(|t| SparseModel::new(t, a)).collect();
    let sums = &rows[..a.batch * width];
    let started = process_cpu_s();
    for n in 0..a.steps {
        for m in &mut models {
            let (keys, labels) = m.batch(n);
            let g_rows = if a.bags {
                m.bag_gradients(sums, &w, &labels, &mut g_w)
            } else {
                m.gradients(&rows, &w, &labels, &mut g_w)
            };
            std::hint::black_box((keys, g_rows));
        }
    }
    (process_cpu_s() - started) / a.steps as f64
}

/// A step of the sparse embedding model on trainer `t`'s batch `n`. As TensorFlow's
/// `embedding_lookup` in `bench/ps_tf.py`, every key of the batch is pulled and gets a
/// gradient row of its own, repeated keys included (uniform keys over a million repeat
/// rarely: about 1.5 % of a batch of 32 K); the servers sum a step's gradient rows per key.
fn sparse_step(t: u32, a: &BenchPsArgs) -> impl FnMut(&mut PsClient, u64) -> warren::Result<()> + use<> {
    let mut model = SparseModel::new(t, a);
    let mut g_w = vec![0f32; model.width];
    let mut rows = vec![0f32; a.batch * a.features * model.width];
    let mut w = vec![0f32; model.width];
    let (bags, ends) = (a.bags, model.ends());
    let mut sums = vec![0f32; a.batch * model.width];
    move |c, n| {
        let (ex, labels) = model.batch(n);
        if bags {
            let range = 0..w.len() as u64;
            c.pull(&mut [
                Pull::SparseBags { table: "emb", keys: &ex, ends: &ends, out: &mut sums },
                Pull::Dense { table: "w", range, out: &mut w },
            ])?;
            let g_bags = model.bag_gradients(&sums, &w, &labels, &mut g_w);
            return c.push(&[
                Grad::SparseBags { table: "emb".into(), keys: ex, ends: ends.clone(), values: g_bags },
                Grad::Dense { table: "w".into(), offset: 0, values: g_w.clone() },
            ]);
        }
        // Both tables in one round trip.
        let range = 0..w.len() as u64;
        c.pull(&mut [
            Pull::Sparse { table: "emb", keys: &ex, out: &mut rows },
            Pull::Dense { table: "w", range, out: &mut w },
        ])?;
        let g_rows = model.gradients(&rows, &w, &labels, &mut g_w);
        c.push(&[
            Grad::Sparse { table: "emb".into(), keys: ex, values: g_rows },
            Grad::Dense { table: "w".into(), offset: 0, values: g_w.clone() },
        ])
    }
}

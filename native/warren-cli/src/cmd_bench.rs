//! `warren bench allreduce|broadcast`: N local worker processes time a collective; rank 0
//! prints one JSON line (the format the reference benchmarks under `bench/` print too).

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use warren::{CallOptions, Communicator, Config, DataType, Error, Op};

use super::launcher::{LaunchSpec, launch};

/// The collective to measure.
#[derive(Subcommand)]
pub enum BenchCmd {
    /// Allreduce of `--bytes` bytes.
    Allreduce(BenchArgs),
    /// Broadcast of `--bytes` bytes from rank 0.
    Broadcast(BenchArgs),
    /// Durable task completions per second through a master service and its clients.
    Master(super::cmd_master::BenchMasterArgs),
    /// Dense push + pull of a whole model through parameter servers, against the loopback
    /// TCP stream limit measured in the same run.
    Ps(super::cmd_bench_ps::BenchPsArgs),
    /// Many workers as threads of this process on the in-memory transport: rendezvous,
    /// allreduce latency, the tracker's CPU for heartbeats, one lost worker's recovery.
    Scale(super::cmd_bench_scale::BenchScaleArgs),
}

/// Arguments shared by the benchmarks.
#[derive(Args, Clone)]
pub struct BenchArgs {
    /// Number of worker processes.
    #[arg(short = 'n', long = "workers", default_value_t = 2)]
    workers: usize,
    /// Payload size in bytes (rounded down to whole elements).
    #[arg(long, default_value_t = 4)]
    bytes: usize,
    /// Timed iterations.
    #[arg(long, default_value_t = 1000)]
    iters: usize,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Element type.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Reduction operator.
    #[arg(long, default_value = "sum")]
    op: String,
    /// Allreduce with `Communicator::allreduce_lent` (out of place, the result lent rather
    /// than copied into the caller's buffer; `f32` only).
    #[arg(long)]
    lent: bool,
    /// Run as one of the workers (set by the launcher).
    #[arg(long, hide = true)]
    worker: bool,
}

/// Runs a benchmark.
pub fn run(cmd: BenchCmd) -> warren::Result<u8> {
    let (name, a) = match cmd {
        BenchCmd::Allreduce(a) => ("allreduce", a),
        BenchCmd::Broadcast(a) => ("broadcast", a),
        BenchCmd::Master(m) => return super::cmd_master::bench(m),
        BenchCmd::Ps(p) => return super::cmd_bench_ps::run(&p),
        BenchCmd::Scale(s) => return super::cmd_bench_scale::run(&s),
    };
    let dtype = DataType::from_name(&a.dtype).ok_or_else(|| Error::Config(format!("unknown --dtype {:?}", a.dtype)))?;
    let op = Op::from_name(&a.op).ok_or_else(|| Error::Config(format!("unknown --op {:?}", a.op)))?;
    if a.iters == 0 {
        return Err(Error::Config("--iters must be at least 1".into()));
    }
    if a.lent && (name != "allreduce" || dtype != DataType::F32) {
        return Err(Error::Config("--lent measures an allreduce of f32 (--dtype f32)".into()));
    }
    if a.worker {
        return worker(name, &a, dtype, op);
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("locating the warren binary", e))?;
    let mut command = vec![exe.display().to_string(), "bench".into(), name.into()];
    command.extend(
        [
            "--workers",
            &a.workers.to_string(),
            "--bytes",
            &a.bytes.to_string(),
            "--iters",
            &a.iters.to_string(),
            "--warmup",
            &a.warmup.to_string(),
            "--dtype",
            &a.dtype,
            "--op",
            &a.op,
            "--worker",
        ]
        .map(String::from),
    );
    if a.lent {
        command.push("--lent".into());
    }
    let mut env = Vec::new();
    if std::env::var("WARREN_LOG").is_err() {
        env.push(("WARREN_LOG".to_string(), "warn".to_string()));
    }
    let outcome = launch(&LaunchSpec {
        workers: a.workers,
        elastic: None,
        rejoin_timeout: None,
        join_hold: warren::tracker::DEFAULT_JOIN_HOLD,
        max_restarts: 0,
        command,
        env,
        rendezvous_timeout: Duration::from_secs(60),
        capture_stdout: true,
        fail_all: false,
        secret: None,
        announce: false,
    })?;
    if !outcome.ok {
        return Err(Error::Tracker("a benchmark worker failed".into()));
    }
    print!("{}", outcome.stdout[0]);
    Ok(0)
}

/// Calls between the (untimed) checkpoints of a robust-mode benchmark.
const CALLS_PER_CHECKPOINT: usize = 8;

fn worker(name: &str, a: &BenchArgs, dtype: DataType, op: Op) -> warren::Result<u8> {
    let mut comm = Communicator::init(Config::from_env()?)?;
    let elems = a.bytes / dtype.size();
    let bytes = elems * dtype.size();
    let mut store = vec![0u64; bytes.div_ceil(8)];
    let buf = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut store)[..bytes];
    let call = |comm: &mut Communicator, buf: &mut [u8]| -> warren::Result<()> {
        match name {
            "allreduce" if a.lent => comm.allreduce_lent::<f32>(bytemuck::cast_slice(buf), op).map(drop),
            "allreduce" => comm.allreduce_bytes(buf, dtype, op, &CallOptions::new()),
            _ => comm.broadcast(buf, 0),
        }
    };
    for _ in 0..a.warmup {
        call(&mut comm, buf)?;
    }
    let mut times = Vec::with_capacity(a.iters);
    for i in 0..a.iters {
        // In robust mode results are kept until the next checkpoint, as in a training loop
        // that checkpoints every few calls; checkpoints are not timed.
        if comm.config().robust && i % CALLS_PER_CHECKPOINT == 0 {
            comm.checkpoint(&[], None)?;
        }
        let t = Instant::now();
        call(&mut comm, buf)?;
        times.push(t.elapsed().as_secs_f64());
    }
    if comm.rank() == 0 {
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
        let median = q(0.5);
        let n = comm.world_size() as f64;
        let algbw = if median > 0.0 { bytes as f64 / median / 1e9 } else { 0.0 };
        let factor = if name == "allreduce" { 2.0 * (n - 1.0) / n } else { 1.0 };
        let line = serde_json::json!({
            "impl": "warren",
            "collective": name,
            "workers": comm.world_size(),
            "bytes": bytes,
            "iters": a.iters,
            "dtype": dtype.name(),
            "op": op.name(),
            "median_s": median,
            "p99_s": q(0.99),
            "mean_s": times.iter().sum::<f64>() / times.len() as f64,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * factor,
            "ring_threshold": comm.config().ring_threshold,
            "ring_slice": comm.config().ring_slice,
            "spin_us": comm.config().spin.as_micros() as u64,
            "robust": comm.config().robust,
            "lent": a.lent,
        });
        println!("{line}");
    }
    comm.finalize()?;
    Ok(0)
}

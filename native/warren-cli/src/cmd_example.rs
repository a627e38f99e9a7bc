//! Example jobs to run under `warren run`: a synthetic training loop and a self-check.

use clap::{Args, Subcommand};
use sha2::{Digest, Sha256};
use warren::{CallOptions, Communicator, Config, Element, Error, Op};

/// The examples.
#[derive(Subcommand)]
pub enum ExampleCmd {
    /// A synthetic training job: bootstrap calls, then per iteration several collectives of
    /// varied sizes; rank 0 prints `MODEL_HASH <hex>` of the final model and
    /// `LINKS shm=<n> tcp=<m>` (how its links carry data).
    Train(TrainArgs),
    /// Checks every type and operator against a serial computation; exits 1 on any difference.
    Check,
    /// A sparse logistic regression through parameter servers (sync, async or SSP); trainer 0
    /// prints `MODEL_HASH <hex>`. Run it under `warren run -n N --ps-servers S`.
    PsTrain(Box<super::cmd_ps_train::PsTrainArgs>),
}

/// Arguments of `warren example train`.
#[derive(Args)]
pub struct TrainArgs {
    /// Iterations.
    #[arg(long, default_value_t = 100)]
    iters: u64,
    /// Size of the model (the gradient allreduced every iteration), in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    model_bytes: usize,
    /// Milliseconds of "compute" per iteration (sleep), to make a job last.
    #[arg(long, default_value_t = 0)]
    compute_ms: u64,
    /// Checkpoint no local (per-worker) model.
    #[arg(long)]
    no_local: bool,
    /// Milliseconds a re-run worker (`WARREN_ATTEMPT` > 0) waits before joining, like a
    /// replacement that first loads its data; the others wait for it in their current call.
    #[arg(long, default_value_t = 0)]
    rejoin_delay_ms: u64,
    /// An elastic job (`warren run --min-workers/--max-workers`, or a tracker with limits):
    /// follow view changes after each checkpoint (the rank and world size change, so the
    /// model depends on the membership schedule); a worker that is removed prints `LEFT
    /// <version>` and exits 0, a joiner prints `JOINED <version> <world>`, and a worker that
    /// rolls back (a lost worker given up on) prints `ROLLED_BACK <version> <world>`.
    #[arg(long)]
    elastic: bool,
    /// Rank 0 prints `STEP <iteration> <world> <unix time in s>` once each iteration's
    /// gradient allreduce is done (the resize benchmark, bench/resize/, reads them).
    #[arg(long)]
    timeline: bool,
    /// Allreduce the gradient with `allreduce_lent` (out of place, the sum lent rather than
    /// copied back into the gradient): the same model bits.
    #[arg(long)]
    lent: bool,
}

/// Runs an example.
pub fn run(cmd: ExampleCmd) -> warren::Result<u8> {
    match cmd {
        ExampleCmd::Train(a) => train(&a),
        ExampleCmd::Check => check(),
        ExampleCmd::PsTrain(a) => super::cmd_ps_train::run(&a),
    }
}

/// A deterministic pseudo-random value in [-1, 1) from integers (splitmix64).
fn noise(a: u64, b: u64, c: u64) -> f32 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ c.wrapping_mul(0x94D0_49BB_1331_11EB);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

fn train(a: &TrainArgs) -> warren::Result<u8> {
    let cfg = Config::from_env()?;
    if cfg.attempt > 0 && a.rejoin_delay_ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(a.rejoin_delay_ms));
    }
    let mut comm = Communicator::init(cfg)?;
    let (mut rank, mut world) = (comm.rank() as u64, comm.world_size());
    // Bootstrap calls, made once before the first checkpoint: the feature count (max over
    // workers) and a seed chosen by rank 0.
    let mut cols = [64u64 + rank];
    comm.allreduce_with(&mut cols, Op::Max, &CallOptions::new().bootstrap())?;
    let mut seed = if rank == 0 { 0x5eed_u64.to_le_bytes().to_vec() } else { Vec::new() };
    comm.broadcast_with(&mut seed, 0, &CallOptions::new().bootstrap())?;
    let seed =
        u64::from_le_bytes(seed.as_slice().try_into().map_err(|_| Error::Protocol("seed of wrong size".into()))?);
    let n = (a.model_bytes / 4).max(1);
    // Resume from the latest checkpoint: one per iteration, so its version is the iteration.
    let (start, mut model, mut local_sum, had_local) = resume(&mut comm, a, n)?;
    if start > 0 {
        log::info!("rank {rank}: resuming at iteration {start} from the checkpoint");
    }
    if a.elastic && start > 0 && !had_local {
        println!("JOINED {start} {world}");
    }
    let mut grad = vec![0f32; n];
    let started = std::time::Instant::now();
    let mut it = start;
    'iters: while it < a.iters {
        // A lost worker given up on (the rejoin timeout) during this iteration: the job rolls
        // back to the last checkpoint in the new view, so this worker goes on from there.
        macro_rules! step {
            ($call:expr) => {
                match $call {
                    Err(Error::RolledBack { version, .. }) => {
                        (it, model, local_sum, _) = resume(&mut comm, a, n)?;
                        let _ = comm.take_view_change();
                        (rank, world) = (comm.rank() as u64, comm.world_size());
                        println!("ROLLED_BACK {version} {world}");
                        continue 'iters;
                    }
                    r => r?,
                }
            };
        }
        if a.compute_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(a.compute_ms));
        }
        for (i, g) in grad.iter_mut().enumerate() {
            *g = noise(seed ^ rank, it, i as u64) + model[i] * 0.01 + cols[0] as f32 * 1e-4;
        }
        let summed;
        let grad: &[f32] = if a.lent {
            summed = step!(comm.allreduce_lent(&grad, Op::Sum));
            &summed
        } else {
            step!(comm.allreduce(&mut grad, Op::Sum));
            &grad
        };
        if a.timeline && rank == 0 {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            println!("STEP {it} {world} {:.6}", now.as_secs_f64());
        }
        let mut loss = [grad.iter().take(1024).map(|g| (*g as f64).powi(2)).sum::<f64>(), 1.0];
        step!(comm.allreduce(&mut loss, Op::Sum));
        let mut lr =
            if rank == it % world as u64 { (0.1f32 / (1.0 + it as f32)).to_le_bytes().to_vec() } else { Vec::new() };
        step!(comm.broadcast(&mut lr, (it % world as u64) as usize));
        let lr = f32::from_le_bytes(lr.as_slice().try_into().map_err(|_| Error::Protocol("lr of wrong size".into()))?);
        for (m, g) in model.iter_mut().zip(grad) {
            *m -= lr * g / world as f32;
        }
        local_sum = local_sum.wrapping_add(it * (rank + 1));
        let local: Vec<u8> = [rank.to_le_bytes(), local_sum.to_le_bytes()].concat();
        step!(comm.checkpoint(bytemuck::cast_slice(&model), (!a.no_local).then_some(local.as_slice())));
        if let Some(change) = comm.take_view_change() {
            let Some(r) = change.rank else {
                println!("LEFT {}", it + 1);
                comm.finalize()?;
                return Ok(0);
            };
            log::info!("rank {rank} is now rank {r} of {} (after iteration {})", change.to.world(), it + 1);
            (rank, world) = (r as u64, change.to.world());
        }
        if rank == 0 && (it + 1) % 10.max(a.iters / 10) == 0 {
            log::info!(
                "iteration {}/{}: loss {:.4} ({:.2?} elapsed)",
                it + 1,
                a.iters,
                loss[0] / loss[1],
                started.elapsed()
            );
        }
        it += 1;
    }
    // Every worker's local state must be what a failure-free run gives.
    let expected: u64 = (0..a.iters).map(|it| it * (rank + 1)).fold(0, u64::wrapping_add);
    if local_sum != expected && !a.no_local && !a.elastic {
        return Err(Error::Protocol(format!("rank {rank}: local model {local_sum} != {expected}")));
    }
    if rank == 0 {
        println!("MODEL_HASH {}", hex::encode(Sha256::digest(bytemuck::cast_slice::<f32, u8>(&model))));
        let links = comm.link_transports();
        let shm = links.iter().filter(|(_, t)| *t == warren::transport::Transport::Shm).count();
        println!("LINKS shm={shm} tcp={} tls={} lending={}", links.len() - shm, comm.tls_links(), comm.lending_links());
        log::info!("{} iterations of {} bytes on {world} workers: {}", a.iters, a.model_bytes, comm.stats().summary());
    }
    if comm.recoveries() > 0 {
        log::info!("rank {rank}: finished after {} recoveries", comm.recoveries());
    }
    comm.finalize()?;
    Ok(0)
}

/// Where training resumes: the latest checkpoint's version (the iteration), its global model,
/// this worker's local state, and whether the checkpoint held a local model for it.
fn resume(comm: &mut Communicator, a: &TrainArgs, n: usize) -> warren::Result<(u64, Vec<f32>, u64, bool)> {
    let rank = comm.rank() as u64;
    let ckpt = comm.load_checkpoint()?;
    let start = ckpt.version as u64;
    let model: Vec<f32> = if start == 0 { vec![0f32; n] } else { bytemuck::pod_collect_to_vec(&ckpt.global) };
    // The local model: this worker's own running state, which only it (and its replica) has.
    let local_sum: u64 = match &ckpt.local {
        // In an elastic job the rank may have changed since the model was written.
        Some(l) if l.len() == 16 && (a.elastic || u64::from_le_bytes(l[..8].try_into().unwrap()) == rank) => {
            u64::from_le_bytes(l[8..].try_into().unwrap())
        }
        None if start == 0 || a.no_local || a.elastic => 0,
        other => {
            return Err(Error::Protocol(format!("rank {rank} got a wrong local model at version {start}: {other:?}")));
        }
    };
    if model.len() != n {
        return Err(Error::Protocol(format!("checkpoint holds {} floats, expected {n}", model.len())));
    }
    Ok((start, model, local_sum, ckpt.local.is_some()))
}

fn value(r: usize, i: usize, op: Op) -> i64 {
    match op {
        Op::Prod => 1 + i64::from((r + i) % 3 == 0),
        Op::Sum => ((r * 7 + i * 3) % 5) as i64 - 2,
        _ => ((r * 7 + i * 3) % 5) as i64 * 13 + r as i64,
    }
}

fn check_one<T: Element + PartialEq + std::fmt::Debug>(
    comm: &mut Communicator,
    len: usize,
    from: fn(i64) -> T,
) -> Result<(), String> {
    for op in Op::ALL.into_iter().filter(|o| o.supports(T::DTYPE)) {
        let mut buf: Vec<T> = (0..len).map(|i| from(value(comm.rank(), i, op))).collect();
        comm.allreduce(&mut buf, op).map_err(|e| e.to_string())?;
        let mut want: Vec<T> = (0..len).map(|i| from(value(0, i, op))).collect();
        for r in 1..comm.world_size() {
            let other: Vec<T> = (0..len).map(|i| from(value(r, i, op))).collect();
            T::reduce(&mut want, &other, op);
        }
        if buf != want {
            let at = buf.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "{} {} of {len}: element {at} is {:?}, expected {:?}",
                T::DTYPE.name(),
                op.name(),
                buf[at],
                want[at]
            ));
        }
    }
    Ok(())
}

fn check() -> warren::Result<u8> {
    let mut comm = Communicator::init(Config::from_env()?)?;
    let mut failures = Vec::new();
    for len in [0usize, 1, 7, 1000, 65_537, 300_001] {
        let results = [
            check_one::<i8>(&mut comm, len, |v| v as i8),
            check_one::<i16>(&mut comm, len, |v| v as i16),
            check_one::<i32>(&mut comm, len, |v| v as i32),
            check_one::<i64>(&mut comm, len, |v| v),
            check_one::<u8>(&mut comm, len, |v| v as u8),
            check_one::<u16>(&mut comm, len, |v| v as u16),
            check_one::<u32>(&mut comm, len, |v| v as u32),
            check_one::<u64>(&mut comm, len, |v| v as u64),
            check_one::<f32>(&mut comm, len, |v| v as f32),
            check_one::<f64>(&mut comm, len, |v| v as f64),
        ];
        failures.extend(results.into_iter().filter_map(|r| r.err()));
        if !failures.is_empty() {
            break;
        }
    }
    // Broadcast from every root, and an allgather.
    for root in 0..comm.world_size() {
        let mut d = if comm.rank() == root { vec![root as u8; 1000 + root] } else { Vec::new() };
        comm.broadcast(&mut d, root)?;
        if d != vec![root as u8; 1000 + root] {
            failures.push(format!("broadcast from {root} gave wrong data"));
        }
    }
    let blocks = comm.allgather(&vec![comm.rank() as u8; comm.rank() + 1])?;
    if blocks.iter().enumerate().any(|(k, b)| *b != vec![k as u8; k + 1]) {
        failures.push("allgather gave wrong data".into());
    }
    let rank = comm.rank();
    comm.finalize()?;
    if failures.is_empty() {
        println!("CHECK_OK rank {rank}");
        Ok(0)
    } else {
        for f in &failures {
            eprintln!("rank {rank}: {f}");
        }
        Ok(1)
    }
}

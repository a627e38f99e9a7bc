//! `warren example ps-train`: a synthetic sparse logistic regression over hashed features,
//! trained through the parameter servers (sync, async or SSP), or serially in one process
//! with `--serial` (the reference a sync run must equal bit for bit).
//!
//! Trainer `t`'s batch of step `n` is a pure function of `(seed, t, n)`: each example has
//! `--features` hashed feature keys in `0..--buckets` and a label from a hidden weight vector.
//! The model is a sparse table `w` (one float per key) and a dense table `bias` (one float).
//! Trainer 0 waits for every trainer to finish, then prints `MODEL_HASH` (SHA-256 of every
//! weight in key order, then the bias). Trainers may join and leave at given steps (`--join`,
//! `--leave`): a sync step counts the trainers taking part in it, a step none takes part in
//! (all left, and one joins later) is skipped without an update, and `--serial` follows the
//! same schedule.
//!
//! With `--master URI` the examples come from the data master's task queues instead (see
//! `ps_feed.rs`; `--write-dataset DIR` writes a dataset of this example's examples for it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use rand::Rng;
use sha2::{Digest, Sha256};
use warren::Error;
use warren::config::keys;
use warren::ps::{
    EtcdRegistry, Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, Pull, Resolver, ServerStatus, Shard,
    TableKind, TableSpec, initial,
};

use super::cmd_ps::{PS_URIS, RegistryArgs, parse_uris};
use super::ps_feed::{Example, Next};

/// Arguments of `warren example ps-train`.
#[derive(Args)]
pub struct PsTrainArgs {
    /// sync, async or ssp.
    #[arg(long, default_value = "sync", value_parser = ["sync", "async", "ssp"])]
    mode: String,
    /// The bound k of `--mode ssp`: no trainer more than k steps ahead of the slowest.
    #[arg(long, default_value_t = 2)]
    staleness: u64,
    /// Steps (mini-batches) per trainer.
    #[arg(long, default_value_t = 50)]
    steps: u64,
    /// Examples per batch.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Hashed features per example.
    #[arg(long, default_value_t = 8)]
    features: usize,
    /// Number of feature keys (rows of `w`).
    #[arg(long, default_value_t = 1 << 16)]
    buckets: u64,
    /// Server-side optimizer of both tables: sgd:LR, momentum:LR:M, adagrad:LR[:EPS[:A0]],
    /// adam:LR[:B1:B2:EPS].
    #[arg(long, default_value = "adagrad:0.5")]
    optimizer: String,
    /// Seed of the data and of the initial weights.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Each step, sleep a random 0..M milliseconds (different in every run) to vary the order
    /// in which trainers arrive.
    #[arg(long, default_value_t = 0)]
    max_sleep_ms: u64,
    /// Number of trainers (default: WARREN_NUM_WORKERS, set by `warren run`).
    #[arg(long, env = keys::NUM_WORKERS, required_unless_present = "write_dataset")]
    trainers: Option<u32>,
    /// This trainer's id (default: WARREN_TASK_ID, set by `warren run`).
    #[arg(long, env = keys::TASK_ID, default_value_t = 0)]
    trainer: u32,
    /// The servers' addresses in server order, comma-separated (default: WARREN_PS_URIS, set
    /// by `warren run --ps-servers` and printed by `warren ps`).
    #[arg(long, env = PS_URIS)]
    uris: Option<String>,
    /// With --store: the job's number of servers, to wait for in etcd.
    #[arg(long)]
    servers: Option<usize>,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Failure injection: `trainer,step,point,attempt[;...]` entries naming where a trainer
    /// kills itself with SIGKILL (points: before-push, staged, half-committed, after-push,
    /// mid-pull; attempt 0 is the first run, a replacement by `warren run` is attempt 1).
    #[arg(long, env = "WARREN_PS_MOCK")]
    mock: Option<String>,
    /// This run's attempt of the trainer's task (default: WARREN_ATTEMPT, set by `warren run`).
    #[arg(long, env = keys::ATTEMPT, default_value_t = 0)]
    attempt: u32,
    /// Trainer `T` joins the job at step `STEP` (`T:STEP`, repeatable): it takes part in steps
    /// `STEP..` only (a sync step counts the trainers taking part in it).
    #[arg(long = "join", value_name = "T:STEP")]
    joins: Vec<String>,
    /// Trainer `T` leaves the job after step `STEP - 1` (`T:STEP`, repeatable): it takes part
    /// in the steps before `STEP` only.
    #[arg(long = "leave", value_name = "T:STEP")]
    leaves: Vec<String>,
    /// Train every trainer's batches serially in this process, without servers, as sync mode
    /// defines it (all trainers of a step read the same model; their gradients are summed in
    /// trainer order).
    #[arg(long)]
    serial: bool,
    /// Take the examples from the data master at this `host:port` (default: WARREN_MASTER_URI):
    /// one example per record (`LABEL KEY KEY ...`), a task's records in batches of `--batch`;
    /// the job trains pass `--pass` and ends with it (`--steps`, `--join` and `--leave` do not
    /// apply).
    #[arg(long, env = "WARREN_MASTER_URI", conflicts_with_all = ["serial", "joins", "leaves"])]
    master: Option<String>,
    /// The master's pass to train (with --master).
    #[arg(long, default_value_t = 0)]
    pass: u64,
    /// Instead of training, write `--examples` examples of this example's data (trainer 0's
    /// batches, in order) to DIR/part-0.rio for `warren master --dataset`, and exit.
    #[arg(long, value_name = "DIR")]
    write_dataset: Option<std::path::PathBuf>,
    /// Examples written by --write-dataset.
    #[arg(long, default_value_t = 10_000)]
    examples: u64,
    /// Bytes of records per RecordIO chunk written by --write-dataset (a task of the master
    /// with --chunks-per-task 1).
    #[arg(long, default_value_t = 4096)]
    chunk_bytes: usize,
}

impl PsTrainArgs {
    /// The job's trainer count (clap requires it unless only a dataset is written).
    fn trainers(&self) -> u32 {
        self.trainers.unwrap_or(1)
    }
}

/// Runs the example.
pub fn run(a: &PsTrainArgs) -> warren::Result<u8> {
    let optimizer = Optimizer::parse(&a.optimizer).map_err(Error::Config)?;
    if a.buckets == 0 || a.batch == 0 || a.features == 0 || a.trainers() == 0 {
        return Err(Error::Config("--buckets, --batch, --features and --trainers must be at least 1".into()));
    }
    if let Some(dir) = &a.write_dataset {
        let examples = (0..).flat_map(|n| batch(a, 0, n)).take(a.examples as usize);
        let path = super::ps_feed::write_dataset(dir, examples, a.chunk_bytes)?;
        println!("WROTE {} ({} examples)", path.display(), a.examples);
        return Ok(0);
    }
    let job = JobSpec {
        trainers: a.trainers(),
        joining: Vec::new(),
        mode: Mode::parse(&a.mode, a.staleness)?,
        tables: vec![
            TableSpec {
                name: "w".into(),
                kind: TableKind::Sparse { width: 1, expected_rows: a.buckets },
                init: Init::Uniform { scale: 0.01, seed: a.seed },
                optimizer,
            },
            TableSpec { name: "bias".into(), kind: TableKind::Dense { len: 1 }, init: Init::Zeros, optimizer },
        ],
    };
    let plan = Membership::parse(a)?;
    let job = JobSpec { joining: plan.joining(), ..job };
    if a.serial { serial(a, &job, &plan) } else { trainer(a, &job, &plan) }
}

/// Which steps each trainer takes part in (`--join`, `--leave`).
struct Membership {
    /// Per trainer, its steps `from..to`.
    steps: Vec<std::ops::Range<u64>>,
}

impl Membership {
    fn parse(a: &PsTrainArgs) -> warren::Result<Membership> {
        let mut steps = vec![0..a.steps; a.trainers() as usize];
        let entry = |e: &str, what: &str| -> warren::Result<(usize, u64)> {
            let bad =
                || Error::Config(format!("--{what} {e:?}: expected TRAINER:STEP with TRAINER < {}", a.trainers()));
            let (t, n) = e.split_once(':').ok_or_else(bad)?;
            let (t, n) = (t.parse::<usize>().map_err(|_| bad())?, n.parse::<u64>().map_err(|_| bad())?);
            if t >= a.trainers() as usize || n > a.steps {
                return Err(bad());
            }
            Ok((t, n))
        };
        for e in &a.joins {
            let (t, n) = entry(e, "join")?;
            steps[t].start = n;
        }
        for e in &a.leaves {
            let (t, n) = entry(e, "leave")?;
            steps[t].end = n;
        }
        Ok(Membership { steps })
    }

    /// The trainers that join after step 0.
    fn joining(&self) -> Vec<u32> {
        (0..self.steps.len() as u32).filter(|&t| self.steps[t as usize].start > 0).collect()
    }
}

/// Under sync, before this trainer's push of step `n`: waits until every trainer the plan
/// has joining at step `n` has joined (the servers apply step `n` once every trainer taking
/// part has pushed it, and refuse a join at a step already applied, so a joiner whose process
/// started late would otherwise fail the job: the plan is the same on every trainer). Gives up
/// after a minute, leaving the refusal to name the late joiner.
fn await_joiners(c: &mut PsClient, plan: &Membership, me: u32, n: u64) -> warren::Result<()> {
    let joiners: Vec<usize> =
        (0..plan.steps.len()).filter(|&t| t != me as usize && plan.steps[t].start == n && n > 0).collect();
    if joiners.is_empty() {
        return Ok(());
    }
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut said = false;
    loop {
        let status = c.status()?;
        let joined = |t: usize| status.iter().all(|s| s.clocks.get(t).is_some_and(|&clock| clock >= n));
        if joiners.iter().all(|&t| joined(t)) || Instant::now() > give_up {
            return Ok(());
        }
        if !said {
            log::info!("trainer {me}: waiting for trainers {joiners:?} to join at step {n}");
            said = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mix(a: u64, b: u64) -> u64 {
    warren::ps::mix(a ^ warren::ps::mix(b.wrapping_add(0x9E37_79B9_7F4A_7C15)))
}

/// Trainer `t`'s batch of step `n`.
fn batch(a: &PsTrainArgs, t: u32, n: u64) -> Vec<Example> {
    let truth = Init::Uniform { scale: 1.0, seed: a.seed ^ 0x7275_7468 };
    (0..a.batch as u64)
        .map(|i| {
            let base = mix(mix(mix(a.seed, t as u64), n), i);
            let keys: Vec<u64> = (0..a.features as u64).map(|f| mix(base, f) % a.buckets).collect();
            let score: f32 = keys.iter().map(|&k| initial(truth, k, 0)).sum();
            Example { keys, label: if score > 0.0 { 1.0 } else { 0.0 } }
        })
        .collect()
}

/// The gradients of a batch given the weights of its distinct keys (sorted) and the bias;
/// returns them with the batch's mean log loss.
fn gradients(examples: &[Example], keys: &[u64], w: &[f32], bias: f32) -> (Vec<Grad>, f64) {
    let mut gw = vec![0f32; keys.len()];
    let mut gb = 0f32;
    let mut loss = 0f64;
    let scale = 1.0 / examples.len() as f32;
    for e in examples {
        let at: Vec<usize> = e.keys.iter().map(|k| keys.binary_search(k).expect("key of the batch")).collect();
        let z = bias + at.iter().map(|&i| w[i]).sum::<f32>();
        let p = 1.0 / (1.0 + (-z).exp());
        loss -= if e.label > 0.5 { (p.max(1e-7) as f64).ln() } else { ((1.0 - p).max(1e-7) as f64).ln() };
        let dz = (p - e.label) * scale;
        for i in at {
            gw[i] += dz;
        }
        gb += dz;
    }
    let grads = vec![
        Grad::Sparse { table: "w".into(), keys: keys.to_vec(), values: gw },
        Grad::Dense { table: "bias".into(), offset: 0, values: vec![gb] },
    ];
    (grads, loss / examples.len() as f64)
}

fn distinct_keys(examples: &[Example]) -> Vec<u64> {
    let mut keys: Vec<u64> = examples.iter().flat_map(|e| e.keys.iter().copied()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// SHA-256 of every weight in key order, then the bias, as little-endian bytes.
fn model_hash(w: &[f32], bias: &[f32]) -> String {
    let mut h = Sha256::new();
    for x in w.iter().chain(bias) {
        h.update(x.to_le_bytes());
    }
    hex::encode(h.finalize())
}

fn trainer(a: &PsTrainArgs, job: &JobSpec, plan: &Membership) -> warren::Result<u8> {
    let mine = plan.steps[a.trainer as usize].clone();
    let secret = super::cmd_master::client_secret()?;
    let mocks = warren::ps::failpoint::parse(a.mock.as_deref().unwrap_or(""))?;
    let (uris, resolver) = match a.registry.connect()? {
        Some(registry) => discover(a, registry)?,
        None => {
            let uris = parse_uris(a.uris.as_deref().ok_or_else(|| {
                Error::Config(format!(
                    "give the servers with --uris or {PS_URIS} (or run under warren run --ps-servers S), or \
                     --store etcd:HOST:PORT/PREFIX with --servers S"
                ))
            })?)?;
            (uris, None)
        }
    };
    let mut c = PsClient::connect(
        &uris,
        &secret,
        Some(a.trainer),
        PsClientOptions { tls: super::launcher::tls()?, ..Default::default() },
    )?;
    if let Some(r) = resolver {
        c.set_resolver(r);
    }
    for m in mocks.iter().filter(|m| m.trainer == a.trainer && m.attempt == a.attempt) {
        c.fail_at(m.step, m.point);
    }
    if c.step() > 0 {
        log::info!("trainer {}: resuming at step {} (attempt {})", a.trainer, c.step(), a.attempt);
    }
    c.define(job)?;
    if c.step() < mine.start {
        log::info!("trainer {}: joins at step {}", a.trainer, mine.start);
        c.join(mine.start)?;
    }
    if let Some(uri) = &a.master {
        return trainer_fed(a, job, &mut c, uri, &secret);
    }
    let started = Instant::now();
    let mut rng = rand::thread_rng();
    let mut loss = 0.0;
    for n in c.step()..mine.end {
        if a.max_sleep_ms > 0 {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..=a.max_sleep_ms)));
        }
        let examples = batch(a, a.trainer, n);
        let grads;
        (grads, loss) = step_gradients(&mut c, &examples)?;
        if job.mode == Mode::Sync {
            await_joiners(&mut c, plan, a.trainer, n)?;
        }
        c.push(&grads)?;
        if a.trainer == 0 && (n + 1) % 10.max(a.steps / 10) == 0 {
            log::info!("trainer 0: step {}/{}: loss {loss:.4} ({:.2?})", n + 1, a.steps, started.elapsed());
        }
    }
    c.leave()?;
    println!("TRAINER {} done: steps {mine:?}, last loss {loss:.4}", a.trainer);
    if job.mode != Mode::Sync {
        println!("PS_LOST_UPDATES trainer {}: {}", a.trainer, c.lost_updates());
    }
    if a.trainer == 0 {
        wait_all_done(&mut c, plan)?;
        print_model(a, &mut c)?;
    }
    Ok(0)
}

/// Pulls what `examples` need and works out their gradients and mean loss.
fn step_gradients(c: &mut PsClient, examples: &[Example]) -> warren::Result<(Vec<Grad>, f64)> {
    let keys = distinct_keys(examples);
    let (mut w, mut bias) = (vec![0f32; keys.len()], [0f32]);
    // Both tables in one round trip.
    c.pull(&mut [
        Pull::Sparse { table: "w", keys: &keys, out: &mut w },
        Pull::Dense { table: "bias", range: 0..1, out: &mut bias },
    ])?;
    Ok(gradients(examples, &keys, &w, bias[0]))
}

/// Prints `MODEL_HASH` of the whole model.
fn print_model(a: &PsTrainArgs, c: &mut PsClient) -> warren::Result<()> {
    let all: Vec<u64> = (0..a.buckets).collect();
    let w = c.pull_sparse("w", &all)?;
    let bias = c.pull_dense("bias", 0..1)?;
    println!("MODEL_HASH {}", model_hash(&w, &bias));
    Ok(())
}

/// A trainer fed by the data master at `uri` (see `ps_feed.rs`): trains its tasks' examples
/// until the pass is over, then leaves; trainer 0 then waits until every step pushed is
/// applied and prints `MODEL_HASH`.
fn trainer_fed(a: &PsTrainArgs, job: &JobSpec, c: &mut PsClient, uri: &str, secret: &str) -> warren::Result<u8> {
    let opts = warren::master::ClientOptions { tls: super::launcher::tls()?, ..Default::default() };
    let mut feed = super::ps_feed::Feed::new(uri, secret, a.pass, a.buckets, opts);
    let started = Instant::now();
    let (mut loss, mut idle_steps) = (0.0, 0u64);
    loop {
        match feed.next(a.batch)? {
            Next::Batch(examples) => {
                let grads;
                (grads, loss) = step_gradients(c, &examples)?;
                c.push(&grads)?;
                feed.trained(examples.len())?;
            }
            Next::Idle if job.mode != Mode::Async => {
                // Nothing to train for now: an empty step, so as not to hold the others back.
                c.push(&[])?;
                idle_steps += 1;
            }
            Next::Idle => {}
            Next::PassOver => break,
        }
        if a.trainer == 0 && c.step() > 0 && c.step() % 50 == 0 {
            log::info!(
                "trainer 0: step {}: {} examples, loss {loss:.4} ({:.2?})",
                c.step(),
                feed.examples,
                started.elapsed()
            );
        }
    }
    c.leave()?;
    println!(
        "TRAINER {} done: {} examples in {} tasks of pass {}, {} empty steps, last loss {loss:.4}",
        a.trainer, feed.examples, feed.tasks, a.pass, idle_steps
    );
    if job.mode != Mode::Sync {
        println!("PS_LOST_UPDATES trainer {}: {}", a.trainer, c.lost_updates());
    }
    if a.trainer == 0 {
        if job.mode == Mode::Sync {
            wait_applied(c)?;
        }
        print_model(a, c)?;
    }
    Ok(0)
}

/// Registers this trainer in etcd as `/trainer/<trainer>-<pid>-<random>` (bound to a lease: gone
/// when the trainer dies) and waits until every server is there; returns their addresses and
/// a resolver that asks etcd again for a server that failed (restarted, maybe elsewhere).
fn discover(a: &PsTrainArgs, registry: EtcdRegistry) -> warren::Result<(Vec<String>, Option<Resolver>)> {
    let servers =
        a.servers.ok_or_else(|| Error::Config("--store needs --servers S (the job's server count)".into()))?;
    let id = format!("{}-{}-{:08x}", a.trainer, std::process::id(), rand::random::<u32>());
    let value = serde_json::json!({"trainer": a.trainer, "pid": std::process::id(), "attempt": a.attempt}).to_string();
    registry.register_trainer(&id, &value)?;
    let uris = registry.wait_servers(servers, a.registry.timeout())?;
    let registry = Arc::new(registry);
    Ok((uris, Some(Resolver(Arc::new(move |i| registry.resolve(i))))))
}

/// Waits (at most 10 minutes) until every server has every trainer's pushes of every step it
/// takes part in.
fn wait_all_done(c: &mut PsClient, plan: &Membership) -> warren::Result<()> {
    let ends: Vec<u64> = plan.steps.iter().map(|r| r.end).collect();
    wait_servers(
        c,
        |s| s.clocks.iter().zip(&ends).all(|(&k, &end)| k >= end),
        |all| {
            let clocks: Vec<&Vec<u64>> = all.iter().map(|s| &s.clocks).collect();
            format!("every trainer to push its steps {ends:?} (clocks per server: {clocks:?})")
        },
    )
}

/// Waits (at most 10 minutes) until every server has applied every step any trainer pushed
/// (sync; under async and SSP a push is applied when it is committed).
fn wait_applied(c: &mut PsClient) -> warren::Result<()> {
    wait_servers(
        c,
        |s| s.clocks.iter().all(|&k| s.applied >= k),
        |all| {
            let at: Vec<(u64, &Vec<u64>)> = all.iter().map(|s| (s.applied, &s.clocks)).collect();
            format!("every pushed step to be applied ((applied, clocks) per server: {at:?})")
        },
    )
}

/// Polls the servers' status until `done` holds for every server, or fails after 10 minutes
/// with the wait that `what` describes.
fn wait_servers(
    c: &mut PsClient,
    done: impl Fn(&ServerStatus) -> bool,
    what: impl Fn(&[ServerStatus]) -> String,
) -> warren::Result<()> {
    let limit = Duration::from_secs(600);
    let deadline = Instant::now() + limit;
    loop {
        let status = c.status()?;
        if status.iter().all(&done) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout { what: what(&status), after: limit });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn serial(a: &PsTrainArgs, job: &JobSpec, plan: &Membership) -> warren::Result<u8> {
    let mut shard = Shard::new(0, 1, &job.tables)?;
    for n in 0..a.steps {
        let mut pushes = Vec::with_capacity(a.trainers() as usize);
        for t in (0..a.trainers()).filter(|&t| plan.steps[t as usize].contains(&n)) {
            let examples = batch(a, t, n);
            let keys = distinct_keys(&examples);
            let w = shard.pull_sparse("w", &keys)?;
            let bias = shard.pull_dense("bias", 0..1)?;
            pushes.push(gradients(&examples, &keys, &w, bias[0]).0);
        }
        // A step no trainer takes part in is skipped, as the servers skip it: no update.
        if !pushes.is_empty() {
            shard.apply(pushes.iter().map(Vec::as_slice));
        }
    }
    let all: Vec<u64> = (0..a.buckets).collect();
    let w = shard.pull_sparse("w", &all)?;
    let bias = shard.pull_dense("bias", 0..1)?;
    println!("MODEL_HASH {}", model_hash(&w, &bias));
    Ok(0)
}

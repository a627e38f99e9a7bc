//! A parameter server as a network service (tokio): authenticated connections carrying
//! [`Request`]s, answered from this server's [`Shard`] under its [`Clocks`].
//!
//! Each connection reads its requests in order; a pull that must wait (sync, SSP) waits on
//! the connection's task, without a thread, until the clocks allow it or its deadline passes.
//! Replies go out through a writer task, so a client that sends many requests before reading
//! any replies (the pipelined trainer client) never stalls the reader. Bad input gets an
//! error reply and the connection (and every other one) goes on; a malformed frame gets an
//! error reply and that connection is closed.
//!
//! With a checkpoint directory, every request that changes the state is logged before it is
//! answered (see `checkpoint.rs`): the reply goes out once its record is durable, and a
//! restarted server replays the log after its checkpoint.
//!
//! A trainer's hello *supersedes* its earlier connections: requests still arriving on them
//! (a killed trainer's last bytes, read after its replacement said hello) are refused, so a
//! replacement deciding to complete or undo a half-pushed step is never overtaken.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use log::{error, info, warn};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::checkpoint::{
    self, Checkpoint, CheckpointCodec, CheckpointPolicy, CheckpointRef, EncodedCheckpoint, LogRecord,
};
use super::consistency::{Clocks, Mode};
use super::proto::Grad;
use super::proto::{self, JobSpec, MAX_PS_FRAME, Reply, Request, ServerStatus, error_reply};
use super::shard::Shard;
use warren_base::error::{Error, Result};
use warren_base::pause::overslept;
use warren_store::{FileStore, Store, Ticket};
use warren_wire::auth::Purpose;
use warren_wire::{self as wire, FrameReader, pool};

/// A wait that wakes this much later than asked counts the lateness as time the server did
/// not run itself (see [`warren_base::pause::overslept`]).
const PAUSE_SLACK: Duration = Duration::from_secs(1);

/// Settings of a [`PsServer`].
#[derive(Clone, Debug)]
pub struct PsConfig {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port to bind (0 = any free port).
    pub port: u16,
    /// The job secret clients must prove they hold.
    pub secret: String,
    /// This server's index, below `servers`.
    pub index: usize,
    /// Number of servers of the job.
    pub servers: usize,
    /// Longest a pull waits for slower trainers before it fails (default 300 s).
    pub pull_timeout: Duration,
    /// How often a waiting pull logs whom it waits for (default 10 s).
    pub progress_interval: Duration,
    /// Where and how often to checkpoint the shard (default: never). A server started on a
    /// directory holding a checkpoint of its index loads it and goes on from there.
    pub checkpoint: Option<CheckpointPolicy>,
    /// TLS on every connection (default `None`: plain TCP); trainers must use TLS too.
    pub tls: Option<wire::Tls>,
    /// Threads serving connections (default [`DEFAULT_THREADS`]). A shard's rows are worked
    /// on by one thread at a time; more threads read and write several trainers' frames at
    /// once.
    pub threads: usize,
}

/// The default of [`PsConfig::threads`].
pub const DEFAULT_THREADS: usize = 2;

impl PsConfig {
    /// Server `index` of `servers` on `127.0.0.1`, any port, with `secret`.
    pub fn new(secret: impl Into<String>, index: usize, servers: usize) -> PsConfig {
        PsConfig {
            host: "127.0.0.1".into(),
            port: 0,
            secret: secret.into(),
            index,
            servers,
            pull_timeout: Duration::from_secs(300),
            progress_interval: Duration::from_secs(10),
            checkpoint: None,
            tls: None,
            threads: DEFAULT_THREADS,
        }
    }
}

/// The job's state at this server, once defined.
struct Job {
    spec: JobSpec,
    shard: Shard,
    clocks: Clocks<Vec<Grad>>,
}

/// A server's checkpointing: its store, policy and progress.
struct Checkpoints {
    store: Arc<FileStore<CheckpointCodec>>,
    policy: CheckpointPolicy,
    /// Progress (steps) at the last checkpoint started.
    last_steps: u64,
    last_at: Instant,
    /// A checkpoint is being written.
    writing: bool,
}

/// Who a connection speaks for.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Conn {
    /// The trainer, once it said hello as one (`None`: an observer, or no hello yet).
    pub trainer: Option<u32>,
    /// Which of the trainer's hellos this connection's was (see [`State::handle`]).
    pub generation: u64,
}

/// What a server holds; every request is carried out under its lock, briefly.
pub(crate) struct State {
    index: usize,
    servers: usize,
    job: Option<Job>,
    /// Each trainer's hellos so far: only its latest connection may act for it.
    generations: std::collections::HashMap<u32, u64>,
    pushes: u64,
    /// Trainers' pushes lost (async, SSP), as reported by their `Resume`s.
    lost: u64,
    checkpoints: Option<Checkpoints>,
    /// The number of the last record logged (see `checkpoint.rs`).
    logged: u64,
    /// The ticket of the record the request being handled logged, to wait for before the
    /// reply goes out.
    ticket: Option<Ticket>,
}

impl State {
    pub(crate) fn new(index: usize, servers: usize) -> State {
        State {
            index,
            servers,
            job: None,
            generations: Default::default(),
            pushes: 0,
            lost: 0,
            checkpoints: None,
            logged: 0,
            ticket: None,
        }
    }

    /// Goes on from `c`.
    fn restore(&mut self, c: Checkpoint) {
        self.pushes = c.pushes;
        self.lost = c.lost;
        self.logged = c.seq;
        let mut shard = c.shard;
        shard.make_room();
        self.job = Some(Job { spec: c.job, shard, clocks: c.clocks });
    }

    /// Carries out logged request `r` again (after a restart, before serving), as it was
    /// carried out the first time: the same state gives the same outcome.
    fn replay(&mut self, r: LogRecord) -> Result<()> {
        if r.seq != self.logged + 1 {
            return Err(Error::Protocol(format!(
                "ps server {}: log record {} follows record {}",
                self.index, r.seq, self.logged
            )));
        }
        let mut conn = Conn { trainer: r.trainer, generation: 0 };
        self.handle(r.req, &mut conn).map_err(|e| {
            Error::Protocol(format!("ps server {}: replaying log record {} failed: {e}", self.index, r.seq))
        })?;
        self.logged = r.seq;
        Ok(())
    }

    /// The state server `index` of `servers` left in `store`: its checkpoint, then the log
    /// after it replayed (`opened`: how long opening the store took, for the log line).
    fn recover(index: usize, servers: usize, store: &FileStore<CheckpointCodec>, opened: Duration) -> Result<State> {
        let started = Instant::now();
        let mut state = State::new(index, servers);
        let (checkpoint, records) = checkpoint::load(store, index, servers)?;
        if let Some(c) = checkpoint {
            let clocks: Vec<u64> = (0..c.clocks.trainers()).map(|t| c.clocks.clock(t)).collect();
            info!(
                "ps server {}: restored the checkpoint in {}: trainers' clocks {clocks:?}, {} rows, loaded in {:.0?} \
                 (the store opened in {opened:.0?})",
                index,
                store.dir().display(),
                c.shard.rows(),
                started.elapsed()
            );
            state.restore(c);
        }
        if !records.is_empty() {
            let (n, replaying) = (records.len(), Instant::now());
            for r in records {
                state.replay(r)?;
            }
            let clocks = state.status().clocks;
            info!(
                "ps server {}: replayed {n} logged request(s) in {:.0?}: trainers' clocks {clocks:?}",
                index,
                replaying.elapsed()
            );
        }
        Ok(state)
    }

    /// Logs `req` of `trainer` (carried out, or about to be and checked), if this server
    /// keeps a log; the reply waits for [`State::ticket`].
    fn log(&mut self, trainer: Option<u32>, req: Request) -> Result<()> {
        let Some(c) = &self.checkpoints else { return Ok(()) };
        let record = LogRecord { seq: self.logged + 1, trainer, req };
        self.ticket = Some(c.store.submit(std::slice::from_ref(&record))?);
        self.logged = record.seq;
        Ok(())
    }

    /// How far the job is, in steps: steps applied (sync), or pushes per trainer.
    fn progress(&self) -> u64 {
        match &self.job {
            Some(j) if j.clocks.mode() == Mode::Sync => j.clocks.applied(),
            Some(j) => self.pushes / u64::from(j.clocks.trainers().max(1)),
            None => 0,
        }
    }

    /// A checkpoint to write now, if one is due (or `forced`) and none is being written,
    /// encoded now (the caller holds the lock: the state stands still).
    fn checkpoint_due(&mut self, forced: bool) -> Option<(EncodedCheckpoint, Arc<FileStore<CheckpointCodec>>)> {
        let progress = self.progress();
        let job = self.job.as_ref()?;
        let c = self.checkpoints.as_mut()?;
        let due = c.policy.due(progress, c.last_steps, c.last_at.elapsed())
            || c.store.wants_compaction_for(job.shard.checkpoint_bytes());
        if c.writing || !(forced || due) {
            return None;
        }
        c.writing = true;
        c.last_steps = progress;
        let snapshot = CheckpointRef {
            index: self.index,
            servers: self.servers,
            job: &job.spec,
            shard: &job.shard,
            clocks: &job.clocks,
            pushes: self.pushes,
            lost: self.lost,
            seq: self.logged,
        };
        Some((snapshot.encode(), c.store.clone()))
    }

    /// Records that the checkpoint being written was written (or failed).
    fn checkpoint_written(&mut self) {
        if let Some(c) = self.checkpoints.as_mut() {
            c.writing = false;
            c.last_at = Instant::now();
        }
    }

    /// The trainer's steps this server holds durably (`None`: nothing is durable): with a
    /// log, every push it acknowledges.
    fn durable(&self, trainer: u32) -> Option<u64> {
        let job = self.job.as_ref()?;
        self.checkpoints.as_ref().map(|_| job.clocks.clock(trainer))
    }

    fn job(&mut self) -> Result<&mut Job> {
        self.job.as_mut().ok_or_else(|| Error::InvalidArgument("no job defined yet: a trainer must define it".into()))
    }

    /// The connection's trainer, for `op`; refused if a later hello superseded the connection.
    fn trainer(&self, conn: &Conn, op: &str) -> Result<u32> {
        let t = conn
            .trainer
            .ok_or_else(|| Error::InvalidArgument(format!("{op} needs a trainer id (say hello as a trainer)")))?;
        self.current(conn)?;
        Ok(t)
    }

    /// Refuses a trainer's connection superseded by a later hello of the same trainer.
    fn current(&self, conn: &Conn) -> Result<()> {
        match conn.trainer {
            Some(t) if self.generations.get(&t).copied().unwrap_or(0) != conn.generation => {
                Err(Error::InvalidArgument(format!(
                    "trainer {t} connected again (a replacement?): this older connection may no longer act for it"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether a pull by `trainer` may be answered now (observers never wait).
    pub(crate) fn pull_ready(&self, trainer: Option<u32>) -> bool {
        match (&self.job, trainer) {
            (Some(job), Some(t)) => job.clocks.pull_ready(t),
            _ => true,
        }
    }

    /// Who a pull by `trainer` waits for, for progress lines and timeouts.
    fn waiting_for(&self, trainer: u32) -> String {
        let Some(job) = &self.job else { return "a job definition".into() };
        let who = job.clocks.holding_back(trainer);
        format!("trainers {who:?} to reach step {} (mode {})", job.clocks.clock(trainer), job.clocks.mode())
    }

    /// Carries out a request whose wait (if a pull) is over, for connection `conn`.
    /// Returns the reply and whether the clocks moved.
    pub(crate) fn handle(&mut self, req: Request, conn: &mut Conn) -> Result<(Reply, bool)> {
        match req {
            Request::Hello { trainer: t } => self.hello(t, conn),
            Request::Define { job } => {
                self.current(conn)?;
                self.define(job.clone(), conn.trainer)?;
                self.log(conn.trainer, Request::Define { job })?;
                Ok((Reply::Done, false))
            }
            Request::Pull { pieces } => {
                self.current(conn)?;
                let values = self.job()?.shard.pull(&pieces)?;
                Ok((Reply::Floats { values }, false))
            }
            Request::Push { step, grads } => {
                let t = self.trainer(conn, "a push")?;
                let job = self.job()?;
                job.shard.check(&grads)?;
                job.clocks.check_stage(t, step)?;
                // Logged before it is carried out: the record shares the gradients, and is
                // encoded (a copy into the log's buffer) and dropped before they are taken.
                self.log(Some(t), Request::Push { step, grads: Arc::clone(&grads) })?;
                let job = self.job()?;
                job.clocks.stage(t, step, Arc::unwrap_or_clone(grads))?;
                if job.clocks.mode() == Mode::Sync {
                    return Ok((Reply::Staged, false));
                }
                // Async and SSP pushes count on arrival: one round trip, no commit (see
                // the consistency module's documentation).
                self.commit(t, step)
            }
            Request::Commit { step } => {
                let t = self.trainer(conn, "a commit")?;
                let done = self.commit(t, step)?;
                self.log(Some(t), Request::Commit { step })?;
                // Answered without waiting for its record: the staged push it commits is
                // durable, and a commit lost in a crash is made again, by the trainer (it
                // finds its own push staged, see `link.rs`) or its replacement (settling the
                // step); the next record waited for makes it durable, in the log's order.
                self.ticket = None;
                Ok(done)
            }
            Request::Abort { step } => {
                let t = self.trainer(conn, "an abort")?;
                self.job()?.clocks.abort(t, step)?;
                self.log(Some(t), Request::Abort { step })?;
                Ok((Reply::Done, false))
            }
            Request::Resume { step } => {
                let t = self.trainer(conn, "resuming")?;
                let lost = self.job()?.clocks.resume(t, step)?;
                if lost > 0 {
                    warn!("ps server {}: trainer {t} lost {lost} update(s) (skipped past them)", self.index);
                }
                self.lost += lost;
                self.log(Some(t), Request::Resume { step })?;
                Ok((Reply::Resumed { lost }, true))
            }
            Request::Leave => {
                let t = self.trainer(conn, "leaving")?;
                let job = self.job()?;
                let batches = job.clocks.leave(t)?;
                apply(&mut job.shard, batches);
                self.log(Some(t), Request::Leave)?;
                Ok((Reply::Done, true))
            }
            Request::Join { step } => {
                let t = self.trainer(conn, "joining")?;
                let job = self.job()?;
                let batches = job.clocks.join(t, step)?;
                apply(&mut job.shard, batches);
                self.log(Some(t), Request::Join { step })?;
                Ok((Reply::Done, true))
            }
            Request::Status => Ok((Reply::Status { status: self.status() }, false)),
        }
    }

    /// Commits trainer `t`'s staged push of `step` and applies what that releases.
    fn commit(&mut self, t: u32, step: u64) -> Result<(Reply, bool)> {
        let job = self.job()?;
        let before = job.clocks.clock(t);
        let batches = job.clocks.commit(t, step)?;
        apply(&mut job.shard, batches);
        let counted = job.clocks.clock(t) > before;
        if counted {
            self.pushes += 1;
        }
        Ok((Reply::Pushed { durable: self.durable(t) }, counted))
    }

    /// A hello: the connection now speaks for trainer `t` (superseding its earlier ones).
    fn hello(&mut self, t: Option<u32>, conn: &mut Conn) -> Result<(Reply, bool)> {
        let (clock, staged) = match (&self.job, t) {
            (Some(job), Some(t)) if t >= job.clocks.trainers() => {
                return Err(Error::InvalidArgument(format!(
                    "trainer {t} is not in this job of {} trainers",
                    job.clocks.trainers()
                )));
            }
            (Some(job), Some(t)) => (job.clocks.clock(t), job.clocks.staged(t)),
            _ => (0, None),
        };
        conn.trainer = t;
        if let Some(t) = t {
            let g = self.generations.entry(t).or_insert(0);
            *g += 1;
            conn.generation = *g;
        }
        let job = self.job.as_ref().map(|j| j.spec.clone());
        Ok((Reply::Hello { index: self.index, servers: self.servers, job, clock, staged }, false))
    }

    fn define(&mut self, spec: JobSpec, trainer: Option<u32>) -> Result<()> {
        if let Some(job) = &self.job {
            if job.spec == spec {
                return Ok(());
            }
            return Err(Error::InvalidArgument(format!(
                "the job is already defined differently: {} trainers, mode {}, tables {:?} (asked: {} trainers, mode {}, tables {:?})",
                job.spec.trainers,
                job.spec.mode,
                names(&job.spec),
                spec.trainers,
                spec.mode,
                names(&spec)
            )));
        }
        if spec.trainers == 0 {
            return Err(Error::InvalidArgument("a job needs at least one trainer".into()));
        }
        if let Some(t) = trainer.filter(|&t| t >= spec.trainers) {
            return Err(Error::InvalidArgument(format!("trainer {t} defines a job of {} trainers", spec.trainers)));
        }
        let shard = Shard::new(self.index, self.servers, &spec.tables)?;
        info!(
            "ps server {}: job defined: {} trainers, mode {}, tables {:?}",
            self.index,
            spec.trainers,
            spec.mode,
            names(&spec)
        );
        let clocks = Clocks::with_joiners(spec.mode, spec.trainers, &spec.joining)?;
        self.job = Some(Job { clocks, shard, spec });
        Ok(())
    }

    pub(crate) fn status(&self) -> ServerStatus {
        let (clocks, applied, rows): (Vec<u64>, u64, usize) = match &self.job {
            Some(j) => {
                ((0..j.clocks.trainers()).map(|t| j.clocks.clock(t)).collect(), j.clocks.applied(), j.shard.rows())
            }
            None => (Vec::new(), 0, 0),
        };
        ServerStatus {
            index: self.index,
            servers: self.servers,
            job: self.job.as_ref().map(|j| j.spec.clone()),
            clocks,
            applied,
            rows,
            pushes: self.pushes,
            lost: self.lost,
        }
    }
}

/// Applies released batches to `shard`, then gives their buffers back to the pool.
fn apply<A, B>(shard: &mut Shard, batches: Vec<Vec<(A, B, Vec<Grad>)>>) {
    for b in &batches {
        shard.apply(b.iter().map(|(_, _, g)| g.as_slice()));
    }
    batches.into_iter().flatten().flat_map(|(_, _, g)| g).for_each(Grad::recycle);
}

fn names(spec: &JobSpec) -> Vec<&str> {
    spec.tables.iter().map(|t| t.name.as_str()).collect()
}

/// What the connection tasks share.
struct Shared {
    state: Mutex<State>,
    /// Bumped whenever the clocks move, to wake waiting pulls.
    moved: watch::Sender<u64>,
    pull_timeout: Duration,
    progress_interval: Duration,
    index: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until a pull by `trainer` may be answered, or fails after the pull timeout
    /// naming the trainers it waited for. Time the server itself did not run (a wake later
    /// than asked by over [`PAUSE_SLACK`]: the process was stopped or frozen) moves the
    /// deadline as much later: the trainers waited for are not blamed for it.
    async fn wait_pull(&self, trainer: Option<u32>) -> Result<()> {
        let mut rx = self.moved.subscribe();
        let started = tokio::time::Instant::now();
        let mut deadline = started + self.pull_timeout;
        let mut next_progress = started + self.progress_interval;
        loop {
            if self.lock().pull_ready(trainer) {
                return Ok(());
            }
            let t = trainer.expect("observers never wait");
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "server {}: trainer {t}'s pull waited for {}",
                        self.index,
                        self.lock().waiting_for(t)
                    ),
                    after: self.pull_timeout,
                });
            }
            if now >= next_progress {
                info!("ps server {}: trainer {t}'s pull waits for {}", self.index, self.lock().waiting_for(t));
                next_progress = now + self.progress_interval;
            }
            let wake = deadline.min(next_progress);
            if let Ok(Err(_)) = tokio::time::timeout_at(wake, rx.changed()).await {
                return Err(Error::Protocol("the server is stopping".into()));
            }
            let woke = tokio::time::Instant::now();
            if let Some(stopped) = overslept(wake.into_std(), woke.into_std(), PAUSE_SLACK) {
                info!(
                    "ps server {}: it did not run for {stopped:.1?} (stopped or frozen): not counted against trainer {t}'s pull",
                    self.index
                );
                deadline += stopped;
                next_progress += stopped;
            }
        }
    }

    /// The frame answering `req`.
    async fn answer_frame(self: &Arc<Self>, req: Request, conn: &mut Conn) -> Vec<u8> {
        if let Request::Pull { pieces } = &req {
            // Written into the frame from the tables, under the lock: one copy.
            if let Err(e) = self.wait_pull(conn.trainer).await {
                return proto::encode(&error_reply(&e));
            }
            let mut st = self.lock();
            let frame = st.current(conn).and_then(|()| st.job()).and_then(|j| j.shard.pull_frame(pieces));
            return frame.unwrap_or_else(|e| proto::encode(&error_reply(&e)));
        }
        let reply = self.answer(req, conn).await;
        let frame = proto::encode(&reply);
        if let Reply::Floats { values } = reply {
            pool::FLOATS.give(values);
        }
        frame
    }

    async fn answer(self: &Arc<Self>, req: Request, conn: &mut Conn) -> Reply {
        let leaving = matches!(req, Request::Leave | Request::Join { .. });
        if matches!(req, Request::Pull { .. }) {
            if let Err(e) = self.wait_pull(conn.trainer).await {
                return error_reply(&e);
            }
        }
        let (result, ticket) = {
            let mut st = self.lock();
            let result = st.handle(req, conn);
            (result, st.ticket.take().zip(st.checkpoints.as_ref().map(|c| c.store.clone())))
        };
        if let Some((ticket, store)) = ticket {
            // Answered once its record is durable (the log's group commit shares the fsync).
            // A write to the kernel alone takes no longer than copying the record: done here,
            // without handing the wait to another thread and back.
            let durable = if store.waits_for_disk() {
                tokio::task::spawn_blocking(move || store.wait_durable(ticket))
                    .await
                    .map_err(|e| Error::Protocol(format!("log writer panicked: {e}")))
                    .and_then(|r| r)
            } else {
                store.wait_durable(ticket)
            };
            if let Err(e) = durable {
                error!("ps server {}: logging a request failed: {e}", self.index);
                return error_reply(&e);
            }
        }
        match result {
            Ok((reply, moved)) => {
                if moved {
                    self.moved.send_modify(|n| *n += 1);
                }
                if leaving {
                    // A trainer that left never pushes again, and one that joined holds the
                    // others back: a checkpoint now keeps the log a restart replays short.
                    if let Err(e) = self.checkpoint_now().await {
                        return error_reply(&e);
                    }
                } else if moved {
                    let due = self.lock().checkpoint_due(false);
                    if let Some((snapshot, store)) = due {
                        let shared = self.clone();
                        tokio::task::spawn_blocking(move || shared.write_checkpoint(snapshot, &store));
                    }
                }
                reply
            }
            Err(e) => error_reply(&e),
        }
    }
}

impl Shared {
    /// Writes `snapshot` (blocking); the trainers learn it is durable from the replies to
    /// their next pushes.
    fn write_checkpoint(&self, snapshot: EncodedCheckpoint, store: &FileStore<CheckpointCodec>) -> Result<()> {
        let started = Instant::now();
        let (seq, clocks, rows, encoding) = (snapshot.seq, snapshot.clocks.clone(), snapshot.rows, snapshot.encoding);
        let written = snapshot.write(store);
        match &written {
            Ok(()) => info!(
                "ps server {}: checkpoint at clocks {clocks:?} (log record {seq}, {rows} rows) encoded in {encoding:.0?} \
                 (requests wait meanwhile), written in {:.0?}",
                self.index,
                started.elapsed()
            ),
            Err(e) => error!("ps server {}: writing a checkpoint failed: {e}", self.index),
        }
        self.lock().checkpoint_written();
        written
    }

    /// Writes a checkpoint of the state now (after the one being written, if any) and waits
    /// for it; nothing to do without checkpoints.
    async fn checkpoint_now(self: &Arc<Self>) -> Result<()> {
        let deadline = tokio::time::Instant::now() + CHECKPOINT_WAIT;
        loop {
            let due = {
                let mut st = self.lock();
                let writing = match &st.checkpoints {
                    None => return Ok(()),
                    Some(c) => c.writing,
                };
                if writing { None } else { st.checkpoint_due(true) }
            };
            if let Some((snapshot, store)) = due {
                let shared = self.clone();
                return tokio::task::spawn_blocking(move || shared.write_checkpoint(snapshot, &store))
                    .await
                    .map_err(|e| Error::Protocol(format!("checkpoint writer panicked: {e}")))?;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout { what: "the checkpoint being written".into(), after: CHECKPOINT_WAIT });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Longest wait for a checkpoint being written before a forced one starts.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(300);

/// A running parameter server. Dropping it stops it.
pub struct PsServer {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
    uri: String,
}

impl std::fmt::Debug for PsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PsServer").field("uri", &self.uri).field("index", &self.shared.index).finish()
    }
}

impl PsServer {
    /// Binds and starts serving.
    pub fn start(cfg: PsConfig) -> Result<PsServer> {
        if cfg.secret.is_empty() {
            return Err(Error::Config("a parameter server needs a non-empty job secret".into()));
        }
        if cfg.threads == 0 {
            return Err(Error::Config("a parameter server needs at least one thread".into()));
        }
        if cfg.index >= cfg.servers {
            return Err(Error::Config(format!("server index {} is not below --servers {}", cfg.index, cfg.servers)));
        }
        // Bound before the checkpoint is loaded: trainers waiting for this server (restarted)
        // connect at once, and their handshakes are answered as soon as it is loaded, with
        // no retry interval in between.
        let wire::Bound { runtime, listener, addr } = wire::bind("ps", cfg.threads, &cfg.host, cfg.port)?;
        let mut state = State::new(cfg.index, cfg.servers);
        if let Some(policy) = cfg.checkpoint.clone() {
            let started = Instant::now();
            let store = Arc::new(checkpoint::open(&policy.dir, cfg.index, policy.log_sync)?);
            let opened = started.elapsed();
            state = State::recover(cfg.index, cfg.servers, &store, opened)?;
            let last_steps = state.progress();
            state.checkpoints =
                Some(Checkpoints { store, policy, last_steps, last_at: Instant::now(), writing: false });
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            moved: watch::Sender::new(0),
            pull_timeout: cfg.pull_timeout,
            progress_interval: cfg.progress_interval,
            index: cfg.index,
        });
        let uri = format!("{}:{}", cfg.host, addr.port());
        runtime.spawn(serve(listener, shared.clone(), Arc::new(cfg.secret.into_bytes()), cfg.tls));
        info!("ps server {} of {}: listening on {uri}", cfg.index, cfg.servers);
        Ok(PsServer { runtime: Some(runtime), shared, uri })
    }

    /// `host:port` trainers connect to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The server's state now.
    pub fn status(&self) -> ServerStatus {
        self.shared.lock().status()
    }

    /// Stops serving; open connections are closed. Outside an async context this waits (at
    /// most 10 s) for a checkpoint being written.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_err() {
                // Let a checkpoint being written finish, so that the directory is released
                // when this returns (a restarted server may open it next).
                rt.shutdown_timeout(Duration::from_secs(10));
            } else {
                rt.shutdown_background();
            }
        }
    }
}

impl Drop for PsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, secret: Arc<Vec<u8>>, tls: Option<wire::Tls>) {
    wire::serve(listener, secret, tls, Purpose::ParamServer, "ps", move |stream| connection(stream, shared.clone()))
        .await
}

async fn connection(stream: wire::ServiceStream, shared: Arc<Shared>) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let (rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                return;
            }
            pool::BYTES.give(frame);
        }
    });
    let mut requests = FrameReader::new(rd, peer.clone()).with_max_frame(MAX_PS_FRAME);
    let mut conn = Conn::default();
    loop {
        let frame = requests.next_frame().await.and_then(|f| {
            f.map(|mut f| {
                let req = proto::decode::<Request>(&mut f);
                requests.recycle(f);
                req
            })
            .transpose()
        });
        let req = match frame {
            Ok(Some(req)) => req,
            Ok(None) => break,
            Err(e @ Error::Protocol(_)) => {
                warn!("ps server {}: {peer} sent a bad frame, closing: {e}", shared.index);
                let _ = tx.send(proto::encode(&error_reply(&e)));
                break;
            }
            Err(e) => {
                info!("ps server {}: connection from {peer} ended: {e}", shared.index);
                break;
            }
        };
        let frame = shared.answer_frame(req, &mut conn).await;
        if tx.send(frame).is_err() {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consistency::Mode;
    use crate::optim::Optimizer;
    use crate::proto::PullPiece;
    use crate::table::{Init, TableKind, TableSpec};
    use warren_store::LogSync;

    fn job(mode: Mode) -> JobSpec {
        JobSpec {
            trainers: 2,
            joining: Vec::new(),
            mode,
            tables: vec![TableSpec {
                name: "w".into(),
                kind: TableKind::Dense { len: 4 },
                init: Init::Zeros,
                optimizer: Optimizer::sgd(1.0),
            }],
        }
    }

    fn pull_w(range: std::ops::Range<u64>) -> Request {
        Request::Pull { pieces: vec![PullPiece::Dense { table: "w".into(), start: range.start, end: range.end }] }
    }

    fn push(step: u64, v: f32) -> Request {
        Request::Push { step, grads: vec![Grad::Dense { table: "w".into(), offset: 0, values: vec![v; 4] }].into() }
    }

    /// Stages and commits push `step` of `v`s.
    fn push_both(s: &mut State, conn: &mut Conn, step: u64, v: f32) -> Result<Reply> {
        s.handle(push(step, v), conn)?;
        Ok(s.handle(Request::Commit { step }, conn)?.0)
    }

    #[test]
    fn requests_are_carried_out_on_the_state_with_clear_errors() {
        let mut s = State::new(0, 1);
        let (mut a, mut b, mut observer) = (Conn::default(), Conn::default(), Conn::default());
        let e = s.handle(pull_w(0..1), &mut a).unwrap_err();
        assert!(e.to_string().contains("no job defined"), "{e}");
        s.handle(Request::Hello { trainer: Some(0) }, &mut a).unwrap();
        s.handle(Request::Hello { trainer: Some(1) }, &mut b).unwrap();
        s.handle(Request::Hello { trainer: None }, &mut observer).unwrap();
        s.handle(Request::Define { job: job(Mode::Sync) }, &mut a).unwrap();
        s.handle(Request::Define { job: job(Mode::Sync) }, &mut b).unwrap();
        let e = s.handle(Request::Define { job: job(Mode::Async) }, &mut b).unwrap_err();
        assert!(e.to_string().contains("already defined differently"), "{e}");
        assert!(s.handle(push(0, 1.0), &mut observer).unwrap_err().to_string().contains("needs a trainer id"));
        assert_eq!(s.handle(push(0, 1.0), &mut b).unwrap().0, Reply::Staged);
        assert_eq!(s.status().clocks, vec![0, 0], "a staged push does not count");
        assert!(matches!(s.handle(Request::Commit { step: 0 }, &mut b).unwrap().0, Reply::Pushed { .. }));
        assert!(!s.pull_ready(b.trainer), "trainer 1 waits for trainer 0's step 0");
        assert!(s.pull_ready(observer.trainer));
        let e = s.handle(push(0, 1.0), &mut b).unwrap_err();
        assert!(e.to_string().contains("next step here is 1"), "{e}");
        push_both(&mut s, &mut a, 0, 2.0).unwrap();
        assert!(s.pull_ready(b.trainer));
        let (r, _) = s.handle(pull_w(0..4), &mut b).unwrap();
        assert_eq!(r, Reply::Floats { values: vec![-3.0; 4] });
        let bad = Request::Push {
            step: 1,
            grads: vec![Grad::Dense { table: "w".into(), offset: 3, values: vec![1.0; 2] }].into(),
        };
        assert!(s.handle(bad, &mut a).unwrap_err().to_string().contains("not on server 0"));
        assert_eq!(s.status().clocks, vec![1, 1], "a refused push does not move the clock");
    }

    #[test]
    fn a_replacement_hello_supersedes_the_trainers_older_connection() {
        let mut s = State::new(0, 1);
        let (mut old, mut new) = (Conn::default(), Conn::default());
        s.handle(Request::Hello { trainer: Some(0) }, &mut old).unwrap();
        s.handle(Request::Define { job: job(Mode::Sync) }, &mut old).unwrap();
        s.handle(push(0, 1.0), &mut old).unwrap();
        let (r, _) = s.handle(Request::Hello { trainer: Some(0) }, &mut new).unwrap();
        let Reply::Hello { clock: 0, staged: Some(0), .. } = r else { panic!("{r:?}") };
        let e = s.handle(Request::Commit { step: 0 }, &mut old).unwrap_err().to_string();
        assert!(e.contains("trainer 0 connected again"), "{e}");
        s.handle(Request::Abort { step: 0 }, &mut new).unwrap();
        let (r, _) = s.handle(Request::Hello { trainer: Some(0) }, &mut new).unwrap();
        assert!(matches!(r, Reply::Hello { clock: 0, staged: None, .. }), "undone: {r:?}");
        push_both(&mut s, &mut new, 0, 1.0).unwrap();
        assert_eq!(s.status().clocks, vec![1, 0]);
    }

    /// A server with a log on `dir`: what it left there, recovered, and logging from there on.
    fn logging(dir: &std::path::Path) -> State {
        let store = Arc::new(checkpoint::open(dir, 0, LogSync::Fsync).unwrap());
        let mut s = State::recover(0, 1, &store, Duration::ZERO).unwrap();
        let policy = CheckpointPolicy {
            dir: dir.to_path_buf(),
            every_steps: 0,
            every: Duration::ZERO,
            log_sync: LogSync::Fsync,
        };
        s.checkpoints = Some(Checkpoints { store, policy, last_steps: 0, last_at: Instant::now(), writing: false });
        s
    }

    /// Handles `req`, then waits until its record is durable, as a connection does before it
    /// answers.
    fn durably(s: &mut State, req: Request, conn: &mut Conn) -> Result<Reply> {
        let (reply, _) = s.handle(req, conn)?;
        if let Some(t) = s.ticket.take() {
            s.checkpoints.as_ref().unwrap().store.wait_durable(t)?;
        }
        Ok(reply)
    }

    /// The checkpoint a server encodes under its lock is byte for byte what the store's
    /// codec writes for the same state, so a restart decodes it as a [`Checkpoint`].
    #[test]
    fn a_checkpoint_encoded_under_the_lock_is_the_codecs_encoding_of_the_state() {
        let dir = warren_store::testdir::TestDir::new("ps-encode");
        let mut s = logging(dir.path());
        let (mut a, mut b) = (Conn::default(), Conn::default());
        durably(&mut s, Request::Hello { trainer: Some(0) }, &mut a).unwrap();
        durably(&mut s, Request::Hello { trainer: Some(1) }, &mut b).unwrap();
        durably(&mut s, Request::Define { job: job(Mode::Async) }, &mut a).unwrap();
        durably(&mut s, push(0, 1.5), &mut a).unwrap();
        durably(&mut s, push(0, 0.5), &mut b).unwrap();
        durably(&mut s, push(1, 2.5), &mut a).unwrap();
        let (encoded, _) = s.checkpoint_due(true).unwrap();
        let job = s.job.as_ref().unwrap();
        let owned = Checkpoint {
            index: 0,
            servers: 1,
            job: job.spec.clone(),
            shard: job.shard.clone(),
            clocks: job.clocks.clone(),
            pushes: s.pushes,
            lost: s.lost,
            seq: s.logged,
        };
        let mut codec = Vec::new();
        <CheckpointCodec as warren_store::Codec>::encode_snapshot(&owned, &mut codec).unwrap();
        assert!(encoded.frame == codec, "the encodings differ");
        assert_eq!((encoded.seq, encoded.clocks, encoded.rows), (s.logged, vec![2, 1], job.shard.rows()));
    }

    /// A server that logs every request before answering it comes back from a restart at
    /// the state it acknowledged, whether a checkpoint cut its log or not: the same
    /// parameters, clocks, staged and held-back pushes, counts; a push or commit sent again
    /// after the restart is recognized by its trainer and step and not applied twice.
    #[test]
    fn a_restarted_server_replays_its_log_to_the_state_it_acknowledged() {
        for (mode, checkpoint_at) in [(Mode::Sync, None), (Mode::Sync, Some(3)), (Mode::Async, Some(2))] {
            let dir = warren_store::testdir::TestDir::new("ps-log");
            let mut s = logging(dir.path());
            let (mut a, mut b) = (Conn::default(), Conn::default());
            durably(&mut s, Request::Hello { trainer: Some(0) }, &mut a).unwrap();
            durably(&mut s, Request::Hello { trainer: Some(1) }, &mut b).unwrap();
            durably(&mut s, Request::Define { job: job(mode) }, &mut a).unwrap();
            for step in 0..5u64 {
                for (conn, v) in [(&mut a, 1.0 + step as f32), (&mut b, 0.5)] {
                    durably(&mut s, push(step, v), conn).unwrap();
                    if mode == Mode::Sync && !(step == 4 && v == 0.5) {
                        durably(&mut s, Request::Commit { step }, conn).unwrap();
                    }
                }
                if checkpoint_at == Some(step) {
                    let (snapshot, store) = s.checkpoint_due(true).unwrap();
                    snapshot.write(&store).unwrap();
                    s.checkpoint_written();
                }
            }
            let want = (s.status(), s.job.as_ref().unwrap().shard.clone(), s.job.as_ref().unwrap().clocks.clone());
            drop(s);
            let mut s = logging(dir.path());
            let got = (s.status(), s.job.as_ref().unwrap().shard.clone(), s.job.as_ref().unwrap().clocks.clone());
            assert!(got == want, "{mode}, checkpoint at {checkpoint_at:?}: {:?} != {:?}", got.0, want.0);
            // Sent again after the restart: an old step's commit is a no-op, and its push is
            // refused (the client recognizes the step as held from the server's clock).
            let mut again = Conn::default();
            durably(&mut s, Request::Hello { trainer: Some(0) }, &mut again).unwrap();
            if mode == Mode::Sync {
                durably(&mut s, Request::Commit { step: 3 }, &mut again).unwrap();
            }
            assert!(durably(&mut s, push(3, 9.0), &mut again).unwrap_err().to_string().contains("next step here is 5"));
            assert_eq!(s.status(), want.0, "{mode}: nothing applied twice");
            let pushed = if mode == Mode::Sync { 9 } else { 10 };
            assert_eq!(want.0.pushes, pushed, "{mode}");
        }
    }
}

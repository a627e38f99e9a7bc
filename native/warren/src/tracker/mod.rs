//! The tracker: rendezvous, stable ranks, address brokering, the job's log and its outcome.
//!
//! Embeddable: [`Tracker::start`] runs it on its own threads (the Spark driver runs it
//! in-process); `warren tracker` runs it as a process. Workers reach it with
//! [`TrackerClient`].
//!
//! - [`registry`]: the decisions (ranks, recovery rounds, completion), pure.
//! - [`proto`]: the messages, pure; they travel as [`crate::wire`] frames.
//! - [`liveness`]: heartbeats, stall reports and fenced incarnations, pure.
//! - `server.rs` (tokio) and `client.rs` (blocking): the I/O, over [`crate::wire`];
//!   `fencing.rs`: heartbeats, stall reports and fencing a silent worker; `rejoin.rs`: an
//!   elastic job's rejoin timeout (going on without a lost worker that did not come back);
//!   `join_hold.rs`: a boundary's decision waiting briefly for a task added moments ago.

mod client;
pub mod encoded_once;
mod fencing;
mod join_hold;
pub mod liveness;
mod outcome;
pub mod proto;
pub mod registry;
mod rejoin;
mod replies;
mod server;
mod state;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use client::TrackerClient;
pub use outcome::{FencedWorker, JobOutcome, JobReport};
pub use registry::Registry;

use crate::config::{DEFAULT_PEER_TIMEOUT, keys};
use crate::error::{Error, Result};
use crate::membership::{Change, Limits};
use crate::wire;

/// How long a stopping tracker waits for queued replies to reach workers that are still
/// connected once the job has an outcome.
const REPLY_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Settings of a tracker.
#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Number of workers.
    pub num_workers: usize,
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port to bind (0 = any free port).
    pub port: u16,
    /// The job secret workers must prove they hold.
    pub secret: String,
    /// How long all workers have to arrive (default 600 s).
    pub rendezvous_timeout: Duration,
    /// A worker without a heartbeat for this long is fenced and replaced (default 30 s,
    /// [`DEFAULT_PEER_TIMEOUT`]; `None`: no heartbeats, a hung worker stalls the job until
    /// the call timeout).
    pub peer_timeout: Option<Duration>,
    /// Elastic membership: the job starts with `num_workers` and may then change size within
    /// these limits at checkpoint boundaries ([`Tracker::add_worker`], ...; default `None`:
    /// a fixed world).
    pub elastic: Option<Limits>,
    /// Elastic jobs: a lost member whose replacement has not registered within this time is
    /// dropped from the view at once, and the survivors roll back to their last checkpoint
    /// without it (never below the minimum: the job fails then, naming the missing tasks);
    /// it rejoins at a later checkpoint when it registers again (default `None`: wait for
    /// the replacement as long as the workers' connect timeout allows).
    pub rejoin_timeout: Option<Duration>,
    /// TLS on every connection (default `None`: plain TCP); the workers must use TLS too.
    pub tls: Option<crate::wire::Tls>,
    /// Elastic jobs: how long a checkpoint boundary's decision may wait, after an add or
    /// restart request, for that task's worker to register, so that it joins at the first
    /// boundary after the request rather than one interval later when its process starts
    /// slowly (default [`DEFAULT_JOIN_HOLD`]; zero: never wait). Each request holds at most
    /// once; the members wait in `checkpoint` meanwhile.
    pub join_hold: Duration,
}

/// The default [`TrackerConfig::join_hold`]: a worker process's start and registration take
/// a few hundred milliseconds here.
pub const DEFAULT_JOIN_HOLD: Duration = Duration::from_secs(1);

impl TrackerConfig {
    /// Settings for `num_workers` workers on `127.0.0.1`, any port, with `secret`.
    pub fn new(num_workers: usize, secret: impl Into<String>) -> TrackerConfig {
        TrackerConfig {
            num_workers,
            host: "127.0.0.1".into(),
            port: 0,
            secret: secret.into(),
            rendezvous_timeout: Duration::from_secs(600),
            peer_timeout: Some(DEFAULT_PEER_TIMEOUT),
            elastic: None,
            rejoin_timeout: None,
            tls: None,
            join_hold: DEFAULT_JOIN_HOLD,
        }
    }
}

/// A running tracker. Dropping it stops it.
pub struct Tracker {
    runtime: Option<tokio::runtime::Runtime>,
    state: state::SharedState,
    uri: String,
    secret: String,
    world: usize,
    tls: bool,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").field("uri", &self.uri).field("world", &self.world).finish()
    }
}

impl Tracker {
    /// Binds and starts serving.
    pub fn start(cfg: TrackerConfig) -> Result<Tracker> {
        if cfg.num_workers == 0 {
            return Err(Error::Config("a tracker needs at least one worker".into()));
        }
        if cfg.secret.is_empty() {
            return Err(Error::Config("a tracker needs a non-empty job secret".into()));
        }
        if cfg.rejoin_timeout.is_some() && cfg.elastic.is_none() {
            return Err(Error::Config("a rejoin timeout needs an elastic job (min and max workers)".into()));
        }
        let wire::Bound { runtime, listener, addr: bound } = wire::bind("tracker", 1, &cfg.host, cfg.port)?;
        if let Some(l) = cfg.elastic {
            if l.min == 0 || l.min > cfg.num_workers || cfg.num_workers > l.max {
                return Err(Error::Config(format!(
                    "an elastic job needs 1 <= min-workers ({}) <= workers ({}) <= max-workers ({})",
                    l.min, cfg.num_workers, l.max
                )));
            }
        }
        let state = state::new_state(cfg.num_workers, cfg.peer_timeout, cfg.elastic, cfg.join_hold);
        let tls = cfg.tls.is_some();
        runtime.spawn(server::serve(listener, state.clone(), Arc::new(cfg.secret.clone().into_bytes()), cfg.tls));
        runtime.spawn(server::rendezvous_deadline(state.clone(), cfg.rendezvous_timeout));
        if let Some(timeout) = cfg.peer_timeout {
            runtime.spawn(fencing::watchdog(state.clone(), timeout));
        }
        if let Some(timeout) = cfg.rejoin_timeout {
            runtime.spawn(rejoin::watchdog(state.clone(), timeout));
        }
        let uri = format!("{}:{}", cfg.host, bound.port());
        log::info!("tracker: listening on {uri} for {} workers", cfg.num_workers);
        Ok(Tracker { runtime: Some(runtime), state, uri, secret: cfg.secret, world: cfg.num_workers, tls })
    }

    /// `host:port` workers connect to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The settings every worker needs (add `WARREN_TASK_ID` per worker; with TLS on, user
    /// certificates, if any, come from each worker's own settings).
    pub fn worker_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            (keys::TRACKER_URI.into(), self.uri.clone()),
            (keys::NUM_WORKERS.into(), self.world.to_string()),
            (keys::JOB_SECRET.into(), self.secret.clone()),
        ];
        if self.tls {
            env.push((keys::TLS.into(), "1".into()));
        }
        env
    }

    /// Workers fenced since the last call (no heartbeat within the peer timeout), oldest
    /// first: whoever runs the workers replaces them as if they had died (kills the process if
    /// it still exists, and starts the task again). Each names the attempt fenced: by the time
    /// it is taken, a later attempt of the same task may already run, and must be left alone.
    pub fn take_fenced(&self) -> Vec<FencedWorker> {
        std::mem::take(&mut self.state.0.lock().unwrap().fenced_tasks)
    }

    /// Admits a new task id to an elastic job: it joins at checkpoint version `at` (or the
    /// next boundary) once its worker has registered. Refused above the maximum.
    pub fn add_worker(&self, task_id: &str, at: Option<u32>) -> Result<()> {
        self.control(Change::Add, task_id, at)
    }

    /// Lets a member of an elastic job finish the current checkpoint interval and stop (its
    /// `checkpoint` reports that it left). Refused below the minimum.
    pub fn remove_worker(&self, task_id: &str, at: Option<u32>) -> Result<()> {
        self.control(Change::Remove, task_id, at)
    }

    /// Brings a stopped task of an elastic job back: it joins once its worker registers.
    pub fn restart(&self, task_id: &str, at: Option<u32>) -> Result<()> {
        self.control(Change::Restart, task_id, at)
    }

    /// Gives up on a lost member of an elastic job: it is dropped from the view at the next
    /// boundary (never below the minimum), and rejoins when it registers again.
    pub fn give_up(&self, task_id: &str) -> Result<()> {
        self.control(Change::GiveUp, task_id, None)
    }

    /// Every task of an elastic job: its id, state and rank in the current view.
    pub fn list(&self) -> Result<Vec<proto::TaskInfo>> {
        match replies::roster_reply(&self.state.0.lock().unwrap().registry) {
            proto::FromTracker::Roster { tasks, .. } => Ok(tasks),
            proto::FromTracker::Error { message } => Err(Error::Tracker(message)),
            other => Err(Error::Protocol(format!("unexpected roster reply {other:?}"))),
        }
    }

    fn control(&self, change: Change, task_id: &str, at: Option<u32>) -> Result<()> {
        server::control(&mut self.state.0.lock().unwrap(), change, task_id, at).map_err(Error::Tracker)
    }

    /// The current registry (a copy), for status displays and tests.
    pub fn registry(&self) -> Registry {
        self.state.0.lock().unwrap().registry.clone()
    }

    /// Waits until every worker has shut down (`Ok`), the job failed (`Err(Tracker)`), or
    /// `timeout` passes (`Err(Timeout)`).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<JobReport> {
        let until = timeout.map(|t| Instant::now() + t);
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap();
        loop {
            if let Some(outcome) = &s.outcome {
                return outcome.clone().map_err(Error::Tracker);
            }
            match until {
                None => s = cv.wait(s).unwrap(),
                Some(u) => {
                    let left = u.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::Timeout {
                            what: format!(
                                "job completion (finished: {:?})",
                                s.registry.task_ids(Some(registry::WorkerState::Finished))
                            ),
                            after: timeout.unwrap_or_default(),
                        });
                    }
                    s = cv.wait_timeout(s, left).unwrap().0;
                }
            }
        }
    }

    /// Stops serving; open connections are closed.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take() {
            self.let_replies_drain(REPLY_DRAIN_LIMIT);
            rt.shutdown_background();
        }
    }

    /// Once the job has an outcome, waits (up to `limit`) for every connection to end, so the
    /// last worker's shutdown acknowledgement, or the error telling workers the job failed, is
    /// written before the runtime stops (workers close their connection once answered).
    fn let_replies_drain(&self, limit: Duration) {
        let until = Instant::now() + limit;
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap();
        // Held registrations (after a final failure) never end on their own.
        while s.outcome.is_some() && s.open_connections > s.held.len() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            s = cv.wait_timeout(s, left).unwrap().0;
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

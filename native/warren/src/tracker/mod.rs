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
//!   `fencing.rs`: heartbeats, stall reports and fencing a silent worker.

mod client;
mod fencing;
pub mod liveness;
pub mod proto;
pub mod registry;
mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use client::TrackerClient;
pub use registry::Registry;

use crate::config::{DEFAULT_PEER_TIMEOUT, keys};
use crate::error::{Error, Result};
use crate::wire;

/// How long a stopping tracker waits for queued replies to reach workers that are still
/// connected once the job has an outcome.
const REPLY_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How a finished job went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobReport {
    /// Number of workers.
    pub world: usize,
    /// Registrations of a task id that already had a rank.
    pub recoveries: u64,
    /// Time from tracker start to the last shutdown.
    pub elapsed: Duration,
}

/// `Ok` when every worker shut down cleanly, `Err` with the reason the job failed.
pub type JobOutcome = std::result::Result<JobReport, String>;

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
}

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
        }
    }
}

/// A running tracker. Dropping it stops it.
pub struct Tracker {
    runtime: Option<tokio::runtime::Runtime>,
    state: server::SharedState,
    uri: String,
    secret: String,
    world: usize,
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
        let wire::Bound { runtime, listener, addr: bound } = wire::bind("tracker", 1, &cfg.host, cfg.port)?;
        let state = server::new_state(cfg.num_workers, cfg.peer_timeout);
        runtime.spawn(server::serve(listener, state.clone(), Arc::new(cfg.secret.clone().into_bytes())));
        runtime.spawn(server::rendezvous_deadline(state.clone(), cfg.rendezvous_timeout));
        if let Some(timeout) = cfg.peer_timeout {
            runtime.spawn(fencing::watchdog(state.clone(), timeout));
        }
        let uri = format!("{}:{}", cfg.host, bound.port());
        log::info!("tracker: listening on {uri} for {} workers", cfg.num_workers);
        Ok(Tracker { runtime: Some(runtime), state, uri, secret: cfg.secret, world: cfg.num_workers })
    }

    /// `host:port` workers connect to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The settings every worker needs (add `WARREN_TASK_ID` per worker).
    pub fn worker_env(&self) -> Vec<(String, String)> {
        vec![
            (keys::TRACKER_URI.into(), self.uri.clone()),
            (keys::NUM_WORKERS.into(), self.world.to_string()),
            (keys::JOB_SECRET.into(), self.secret.clone()),
        ]
    }

    /// Task ids fenced since the last call (no heartbeat within the peer timeout), oldest
    /// first: whoever runs the workers replaces them as if they had died (kills the process if
    /// it still exists, and starts the task again).
    pub fn take_fenced(&self) -> Vec<String> {
        std::mem::take(&mut self.state.0.lock().unwrap().fenced_tasks)
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
        while s.outcome.is_some() && s.open_connections > 0 {
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

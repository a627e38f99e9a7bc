//! The tracker's state, shared by its connection tasks, its watchdogs and the
//! [`super::Tracker`] handle.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::liveness::Liveness;
use super::outcome::{FencedWorker, JobOutcome};
use super::proto::FromTracker;
use super::registry::Registry;
use crate::membership::Limits;

/// A member's request for the view after a checkpoint version, answered later.
pub(crate) struct Parked {
    pub(crate) task_id: String,
    pub(crate) version: u32,
    pub(crate) tx: UnboundedSender<FromTracker>,
}

/// State shared by the connection tasks and the [`super::Tracker`] handle.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) conns: HashMap<String, (u64, UnboundedSender<FromTracker>)>,
    pub(crate) next_conn: u64,
    pub(crate) outcome: Option<JobOutcome>,
    pub(crate) started: Instant,
    /// Task ids that registered again in the current round (restarted, not survivors).
    pub(crate) restarted: std::collections::HashSet<String>,
    /// Connections whose writer has not finished yet (replies may still be queued).
    pub(crate) open_connections: usize,
    /// Heartbeats and fences (`None`: no peer timeout, no heartbeats).
    pub(crate) liveness: Option<Liveness>,
    /// Each worker's heartbeat connection (fence notices are pushed there).
    pub(crate) beat_conns: HashMap<String, UnboundedSender<FromTracker>>,
    /// Workers fenced and not yet taken by [`super::Tracker::take_fenced`].
    pub(crate) fenced_tasks: Vec<FencedWorker>,
    /// The last fence (when, whom), until the link round that replaces it completes.
    pub(crate) last_fence: Option<(Instant, String)>,
    /// An elastic job's join hold ([`super::TrackerConfig::join_hold`]; zero: none).
    pub(crate) join_hold: Duration,
    /// When each task was last added or restarted by a control request.
    pub(crate) join_requested: HashMap<String, Instant>,
    /// Members' view requests waiting for a joiner ([`join_hold`]).
    pub(crate) parked: Vec<Parked>,
    /// A worker reported an error that cannot succeed on retry ([`super::proto::ToTracker::Failed`]):
    /// the job failed, and registrations are held, not answered.
    pub(crate) failed_finally: bool,
    /// The connections of the registrations held since (they end when the runner stops them).
    pub(crate) held: Vec<UnboundedSender<FromTracker>>,
}

pub(crate) type SharedState = Arc<(Mutex<Shared>, Condvar)>;

pub(crate) fn new_state(
    world: usize,
    peer_timeout: Option<Duration>,
    elastic: Option<Limits>,
    join_hold: Duration,
) -> SharedState {
    Arc::new((
        Mutex::new(Shared {
            registry: elastic.map_or_else(|| Registry::new(world), |l| Registry::elastic(world, l)),
            conns: HashMap::new(),
            next_conn: 0,
            outcome: None,
            started: Instant::now(),
            restarted: Default::default(),
            open_connections: 0,
            liveness: peer_timeout.map(Liveness::new),
            beat_conns: HashMap::new(),
            fenced_tasks: Vec::new(),
            last_fence: None,
            join_hold,
            join_requested: HashMap::new(),
            parked: Vec::new(),
            failed_finally: false,
            held: Vec::new(),
        }),
        Condvar::new(),
    ))
}

pub(crate) fn set_outcome(state: &SharedState, s: &mut Shared, outcome: JobOutcome) {
    if s.outcome.is_none() {
        s.outcome = Some(outcome);
        state.1.notify_all();
    }
}

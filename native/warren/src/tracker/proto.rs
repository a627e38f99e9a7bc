//! The tracker's messages, with no I/O: what workers (and CLI clients) send the tracker and
//! what it answers or pushes. They travel as [`crate::wire`] frames on a connection opened
//! with the handshake for [`Purpose::Tracker`](crate::wire::auth::Purpose::Tracker).

use serde::{Deserialize, Serialize};

pub use super::encoded_once::EncodedOnce;

/// A worker's address for peer links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerAddr {
    /// Rank of the worker.
    pub rank: usize,
    /// Its task id.
    pub task_id: String,
    /// Host it listens on.
    pub host: String,
    /// Port it listens on.
    pub port: u16,
    /// Its process id (0 if unknown), to name it in stall reports.
    #[serde(default)]
    pub pid: u32,
    /// Its host id (empty if unknown): workers with the same one link over shared memory.
    #[serde(default)]
    pub host_id: String,
    /// The host the collective algorithms place it on (the hierarchical allreduce groups
    /// ranks by it): its host id when the membership view was made, kept for the view's
    /// lifetime, so a replacement started on another host runs every call with the same
    /// algorithm and reduction order as the survivors. Empty: use `host_id`.
    #[serde(default)]
    pub placed_on: String,
}

/// A worker's report that it has waited in a call without progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// Report number of this worker (a new report every stall interval while it lasts).
    pub seq: u64,
    /// The call and what it waits for, as the worker describes it.
    pub call: String,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
    /// The ranks it waits for.
    pub ranks: Vec<usize>,
}

/// A message from a worker (or a CLI client) to the tracker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum ToTracker {
    /// Join the job (first start) or re-join it (recovery: same task id, same rank).
    Register {
        /// Stable identity of the worker (Spark partition id, `warren run` index).
        task_id: String,
        /// Host the worker's peer listener is bound to.
        host: String,
        /// Port of the worker's peer listener.
        port: u16,
        /// Attempt number of this task (0 for the first run).
        attempt: u32,
        /// The worker's process id (named in stall reports and fencing).
        #[serde(default)]
        pid: u32,
        /// The worker's host id (`WARREN_HOST_ID`), passed on to its peers.
        #[serde(default)]
        host_id: String,
    },
    /// A surviving worker whose links broke asks to re-link (joins the re-link round).
    Rejoin {
        /// Host of its peer listener.
        host: String,
        /// Port of its peer listener.
        port: u16,
        /// The last checkpoint version it committed (a round that rolls back goes on from the
        /// newest one a member committed: [`FromTracker::Assignment`]'s `version`).
        #[serde(default)]
        version: u32,
    },
    /// A heartbeat, sent on a connection of its own every fraction of the peer timeout by a
    /// thread of the worker; answered with [`FromTracker::Ack`] (or a fence: an error).
    Beat {
        /// The worker's task id.
        task_id: String,
        /// The incarnation the tracker gave it ([`FromTracker::Assignment`]).
        incarnation: u64,
        /// The stall this worker reports now, if it waits in a call without progress.
        #[serde(default)]
        stall: Option<Stall>,
    },
    /// Relay a message to the tracker's log.
    Print {
        /// The message.
        msg: String,
    },
    /// This worker failed with an error that cannot succeed on retry
    /// ([`crate::Error::is_final`]): the job has failed. Answered with [`FromTracker::Ack`].
    /// From then on the tracker answers no registration (it holds them until the job is
    /// stopped), so that a runner that re-runs failed tasks on its own (Spark's task retries)
    /// cannot use up its attempts on re-runs that would fail the same way.
    Failed {
        /// The error, as the worker reports it.
        message: String,
    },
    /// This worker finished cleanly (a robust member: it passed the final barrier of
    /// `finalize`). Answered with [`FromTracker::Ack`]; a robust member then waits for
    /// [`FromTracker::JobDone`], or re-links if a round opens before that (a member lost
    /// before it finished is being replaced, and the finished members serve it).
    Shutdown,
    /// Ask for the job status (used by `warren tracker` clients and tests).
    Status,
    /// A member of an elastic job committed checkpoint `version`: which view holds from now
    /// on? Answered with [`FromTracker::Decided`], the same answer to every member.
    ViewAt {
        /// The checkpoint version just committed.
        version: u32,
    },
    /// A control request on an elastic job (`warren ctl`): answered with
    /// [`FromTracker::Roster`], or an error saying why it is refused.
    Control {
        /// What to do.
        change: ControlChange,
        /// The task id it is about.
        task_id: String,
        /// The checkpoint version it applies at, at the earliest (default: the next).
        #[serde(default)]
        at: Option<u32>,
    },
    /// Ask for the elastic roster; answered with [`FromTracker::Roster`].
    List,
}

/// A control request's change, as [`ToTracker::Control`] carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlChange {
    /// Admit a new task id.
    Add,
    /// Let a member finish the checkpoint interval, then stop.
    Remove,
    /// Bring a stopped task back.
    Restart,
}

impl From<ControlChange> for crate::membership::Change {
    fn from(c: ControlChange) -> Self {
        match c {
            ControlChange::Add => crate::membership::Change::Add,
            ControlChange::Remove => crate::membership::Change::Remove,
            ControlChange::Restart => crate::membership::Change::Restart,
        }
    }
}

/// One task of an elastic job, as [`FromTracker::Roster`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// The task id.
    pub task_id: String,
    /// `running`, `joining`, `leaving`, `stopped` or `lost` ([`crate::membership::TaskState`]).
    pub state: String,
    /// Its rank in the current view, if it is a member.
    pub rank: Option<usize>,
}

/// A message from the tracker to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum FromTracker {
    /// The membership view (the worker's rank is its task id's position in it) and everyone's
    /// addresses.
    Assignment {
        /// The members of the job (shared by every member's assignment, encoded once).
        view: EncodedOnce<crate::membership::View>,
        /// Addresses of every rank, indexed by rank (shared by every member's assignment,
        /// encoded once).
        peers: EncodedOnce<Vec<PeerAddr>>,
        /// Re-link rounds completed so far (this one included).
        round: u64,
        /// Whether this registration is a recovery (the task id had a rank already).
        recovered: bool,
        /// This registration's identity: heartbeats carry it, and once the worker is fenced
        /// nothing carrying it is accepted.
        #[serde(default)]
        incarnation: u64,
        /// The tracker's peer timeout in milliseconds (0: no heartbeats expected).
        #[serde(default)]
        peer_timeout_ms: u64,
        /// Whether the job is elastic: members ask [`ToTracker::ViewAt`] after each
        /// checkpoint, and the view may change then.
        #[serde(default)]
        elastic: bool,
        /// The newest checkpoint version a member of this re-link round committed (0 for a
        /// first assignment): where the members go on from if the round rolls back (its view
        /// lacks members given up on).
        #[serde(default)]
        version: u32,
    },
    /// Answer to [`ToTracker::ViewAt`]: the view from this checkpoint on.
    Decided {
        /// The view (the same as before if nothing changed).
        view: crate::membership::View,
    },
    /// Answer to [`ToTracker::Control`] and [`ToTracker::List`]: every task the elastic job
    /// knows.
    Roster {
        /// The current view's epoch.
        epoch: u64,
        /// Fewest workers.
        min: usize,
        /// Most workers.
        max: usize,
        /// The tasks, in task order.
        tasks: Vec<TaskInfo>,
    },
    /// Pushed to every worker not yet in it: a re-link round has opened (a worker came back
    /// or lost its links); the others should re-link too.
    RoundStarted {
        /// Rank whose registration opened the round.
        by_rank: usize,
    },
    /// Pushed on every heartbeat connection: the tracker fenced a worker (no heartbeat within
    /// the peer timeout); the others leave the call they are in and re-link without it.
    PeerFenced {
        /// The fenced worker's rank.
        rank: usize,
        /// Its task id.
        task_id: String,
        /// Why it was fenced.
        reason: String,
        /// Link rounds complete when it was fenced (a later round has its replacement).
        round: u64,
    },
    /// This worker was fenced: it is being replaced, and nothing it sends is accepted.
    Fenced {
        /// Why.
        message: String,
    },
    /// Acknowledges `Print`, `Shutdown` or `Beat`.
    Ack,
    /// Pushed to every member once all of them finished (sent [`ToTracker::Shutdown`]): the
    /// job is done and no replacement can need anything from them any more.
    JobDone,
    /// Pushed on a heartbeat connection after a beat that reported a stall: the members
    /// silent at the tracker since that wait began (the ones the job waits on, wherever they
    /// sit in the call), named with their task, host, pid and silence.
    Silent {
        /// The stall report answered ([`Stall::seq`]).
        seq: u64,
        /// `"rank 2 (task 2 on 10.0.0.3, pid 4242) [no heartbeat for 3.1s]"`, one per member.
        members: Vec<String>,
    },
    /// The registration cannot be taken now (the task id is held by a live worker); send it
    /// again shortly.
    Retry {
        /// Why.
        message: String,
    },
    /// Answer to `Status`.
    Status {
        /// Number of workers expected.
        world: usize,
        /// Task ids registered so far.
        registered: Vec<String>,
        /// Task ids that shut down cleanly.
        finished: Vec<String>,
        /// Task ids whose connection dropped without a shutdown and that have not come back.
        lost: Vec<String>,
    },
    /// The registering (or waiting) task is not a member of the elastic job any more and
    /// will not be ([`crate::Error::Left`]): it should end without a result.
    Left {
        /// Why: removed and left, or removed before it could join.
        message: String,
    },
    /// The tracker refuses the request or the job failed.
    Error {
        /// Why.
        message: String,
    },
    /// Another worker failed with an error that cannot succeed on retry, and the tracker
    /// ended the job ([`crate::Error::JobFailed`]): this worker stops rather than wait for a
    /// replacement that cannot come, and a re-run of it has nothing to do.
    JobFailed {
        /// The failure: which worker, and its error.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_frame, encode_frame};

    #[test]
    fn messages_round_trip_through_frames() {
        let m = ToTracker::Register {
            task_id: "3".into(),
            host: "127.0.0.1".into(),
            port: 9,
            attempt: 1,
            pid: 7,
            host_id: "h".into(),
        };
        let f = encode_frame(&m);
        assert_eq!(decode_frame::<ToTracker>(&f).unwrap(), Some((m, f.len())));
        let r = FromTracker::RoundStarted { by_rank: 2 };
        let g = encode_frame(&r);
        assert_eq!(decode_frame::<FromTracker>(&g).unwrap(), Some((r, g.len())));
        let stall = Stall { seq: 1, call: "allreduce".into(), waited_ms: 10_000, ranks: vec![2] };
        let b = ToTracker::Beat { task_id: "0".into(), incarnation: 4, stall: Some(stall) };
        let f = encode_frame(&b);
        assert_eq!(decode_frame::<ToTracker>(&f).unwrap(), Some((b, f.len())));
    }
}

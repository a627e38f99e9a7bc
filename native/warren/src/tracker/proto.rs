//! The tracker's messages, with no I/O: what workers (and CLI clients) send the tracker and
//! what it answers or pushes. They travel as [`crate::wire`] frames on a connection opened
//! with the handshake for [`Purpose::Tracker`](crate::wire::auth::Purpose::Tracker).

use std::borrow::Cow;
use std::collections::HashMap;

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

/// Every member's address, indexed by rank: what each member's assignment carries. On the wire
/// each distinct host string (address, host id, placement) appears once and a rank is a row of
/// numbers, so an assignment at 1,024 workers is a fraction of a list of [`PeerAddr`] objects,
/// and decodes in a fraction of the time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peers(pub Vec<PeerAddr>);

impl std::ops::Deref for Peers {
    type Target = [PeerAddr];
    fn deref(&self) -> &[PeerAddr] {
        &self.0
    }
}

/// [`Peers`] on the wire: the distinct strings, the task ids by rank, and per rank the indices
/// of its address, host id and placement among the strings, with its port and pid.
#[derive(Serialize, Deserialize)]
struct PeersWire<'a> {
    #[serde(borrow)]
    strings: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    tasks: Vec<Cow<'a, str>>,
    /// `(address, port, pid, host id, placement)`, strings by index.
    ranks: Vec<(u32, u16, u32, u32, u32)>,
}

impl Serialize for Peers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut strings: Vec<Cow<'_, str>> = Vec::new();
        let mut ranks = Vec::with_capacity(self.0.len());
        for p in &self.0 {
            let mut idx = |s| {
                *index.entry(s).or_insert_with(|| {
                    strings.push(Cow::Borrowed(s));
                    (strings.len() - 1) as u32
                })
            };
            ranks.push((idx(p.host.as_str()), p.port, p.pid, idx(p.host_id.as_str()), idx(p.placed_on.as_str())));
        }
        let tasks = self.0.iter().map(|p| Cow::Borrowed(p.task_id.as_str())).collect();
        PeersWire { strings, tasks, ranks }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Peers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Peers, D::Error> {
        use serde::de::Error as _;
        let w = PeersWire::deserialize(deserializer)?;
        if w.tasks.len() != w.ranks.len() {
            return Err(D::Error::custom(format!("peers: {} task ids for {} ranks", w.tasks.len(), w.ranks.len())));
        }
        let string = |i: u32| {
            w.strings
                .get(i as usize)
                .map(|s| s.to_string())
                .ok_or_else(|| D::Error::custom(format!("peers: string {i} of {}", w.strings.len())))
        };
        let mut out = Vec::with_capacity(w.ranks.len());
        for (rank, (&(host, port, pid, host_id, placed), task)) in w.ranks.iter().zip(&w.tasks).enumerate() {
            out.push(PeerAddr {
                rank,
                task_id: task.to_string(),
                host: string(host)?,
                port,
                pid,
                host_id: string(host_id)?,
                placed_on: string(placed)?,
            });
        }
        Ok(Peers(out))
    }
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

/// A message from the tracker to a worker. On the wire `{"reply": kind, "body": fields}`,
/// the kind first, so that a reader decodes the fields straight from the bytes (an assignment
/// at 1,024 workers decodes several times faster than with the kind among the fields, which
/// makes the reader buffer the whole message first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", content = "body", rename_all = "snake_case")]
pub enum FromTracker {
    /// The membership view (the worker's rank is its task id's position in it) and everyone's
    /// addresses.
    Assignment {
        /// The members of the job (shared by every member's assignment, encoded once).
        view: EncodedOnce<crate::membership::View>,
        /// Addresses of every rank, indexed by rank (shared by every member's assignment,
        /// encoded once).
        peers: EncodedOnce<Peers>,
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

    fn addr(rank: usize, host: &str, host_id: &str, placed_on: &str) -> PeerAddr {
        PeerAddr {
            rank,
            task_id: format!("t{rank}"),
            host: host.into(),
            port: 9000 + rank as u16,
            pid: 100 + rank as u32,
            host_id: host_id.into(),
            placed_on: placed_on.into(),
        }
    }

    #[test]
    fn an_assignment_carries_every_address_and_each_host_string_once() {
        let peers = Peers(vec![
            addr(0, "10.0.0.1", "a", "a"),
            addr(1, "10.0.0.2", "b", "b"),
            addr(2, "10.0.0.1", "a", "a"),
            addr(3, "10.0.0.3", "c", "b"),
            addr(4, "10.0.0.2", "", ""),
        ]);
        let m = FromTracker::Assignment {
            view: EncodedOnce::new(crate::membership::View::new(1, (0..5).map(|r| format!("t{r}")))),
            peers: EncodedOnce::new(peers.clone()),
            round: 2,
            recovered: false,
            incarnation: 7,
            peer_timeout_ms: 0,
            elastic: false,
            version: 0,
        };
        let f = encode_frame(&m);
        assert_eq!(decode_frame::<FromTracker>(&f).unwrap(), Some((m, f.len())));
        let json = serde_json::to_string(&peers).unwrap();
        assert_eq!(json.matches("10.0.0.1").count(), 1, "{json}");
        assert_eq!(json.matches("\"b\"").count(), 1, "{json}");
    }

    #[test]
    fn addresses_naming_a_string_that_is_not_there_are_refused() {
        let bad = r#"{"strings":["h"],"tasks":["t0"],"ranks":[[0,1,2,0,5]]}"#;
        let e = serde_json::from_str::<Peers>(bad).unwrap_err().to_string();
        assert!(e.contains("peers: string 5 of 1"), "{e}");
        let short = r#"{"strings":["h"],"tasks":[],"ranks":[[0,1,2,0,0]]}"#;
        let e = serde_json::from_str::<Peers>(short).unwrap_err().to_string();
        assert!(e.contains("0 task ids for 1 ranks"), "{e}");
    }
}

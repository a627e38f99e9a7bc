//! The tracker's messages, with no I/O: what workers (and CLI clients) send the tracker and
//! what it answers or pushes. They travel as [`crate::wire`] frames on a connection opened
//! with the handshake for [`Purpose::Tracker`](crate::wire::auth::Purpose::Tracker).

use serde::{Deserialize, Serialize};

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
    },
    /// A surviving worker whose links broke asks to re-link (joins the re-link round).
    Rejoin {
        /// Host of its peer listener.
        host: String,
        /// Port of its peer listener.
        port: u16,
    },
    /// Relay a message to the tracker's log.
    Print {
        /// The message.
        msg: String,
    },
    /// This worker finished cleanly.
    Shutdown,
    /// Ask for the job status (used by `warren tracker` clients and tests).
    Status,
}

/// A message from the tracker to a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum FromTracker {
    /// The membership view (the worker's rank is its task id's position in it) and everyone's
    /// addresses.
    Assignment {
        /// The members of the job.
        view: crate::membership::View,
        /// Addresses of every rank, indexed by rank.
        peers: Vec<PeerAddr>,
        /// Re-link rounds completed so far (this one included).
        round: u64,
        /// Whether this registration is a recovery (the task id had a rank already).
        recovered: bool,
    },
    /// Pushed to every worker not yet in it: a re-link round has opened (a worker came back
    /// or lost its links); the others should re-link too.
    RoundStarted {
        /// Rank whose registration opened the round.
        by_rank: usize,
    },
    /// Acknowledges `Print` or `Shutdown`.
    Ack,
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
    /// The tracker refuses the request or the job failed.
    Error {
        /// Why.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_frame, encode_frame};

    #[test]
    fn messages_round_trip_through_frames() {
        let m = ToTracker::Register { task_id: "3".into(), host: "127.0.0.1".into(), port: 9, attempt: 1 };
        let f = encode_frame(&m);
        assert_eq!(decode_frame::<ToTracker>(&f).unwrap(), Some((m, f.len())));
        let r = FromTracker::RoundStarted { by_rank: 2 };
        let g = encode_frame(&r);
        assert_eq!(decode_frame::<FromTracker>(&g).unwrap(), Some((r, g.len())));
    }
}

//! The one error type of the `warren` crate.
//!
//! Every variant names what a user needs to act on it: the peer rank, the task id, the
//! setting. The JNI layer maps *variants* (never message text) to Java exception classes, so
//! add a variant rather than overloading the text of an existing one.

use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The rank of a communicator that has not joined yet (see [`Error::Aborted`]).
pub const NO_RANK: usize = usize::MAX;

/// Result type of the `warren` crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in Warren.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or malformed (environment variable, CLI flag, config field).
    #[error("configuration error: {0}")]
    Config(String),

    /// An operating-system I/O error outside of a peer link (listening socket, file, tracker).
    #[error("{context}: {source}")]
    Io {
        /// What Warren was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A wait ran past its deadline. `what` names the peer rank or task ids waited for.
    #[error("{}", timeout_text(what, after))]
    Timeout {
        /// What was waited for (a peer rank, the missing task ids, ...).
        what: String,
        /// How long Warren waited (zero: the deadline had already passed when the wait began).
        after: Duration,
    },

    /// A link to a peer broke (connection reset, closed, or an I/O error on it).
    #[error("link to peer rank {rank}{} lost: {reason}", task_suffix(task))]
    PeerLost {
        /// Rank of the peer at the other end.
        rank: usize,
        /// Task id of that peer, if known where the error surfaced (the communicator fills it
        /// in from its membership view before returning the error to the caller).
        task: Option<String>,
        /// What the operating system or the protocol said.
        reason: String,
    },

    /// Ranks called a collective with different arguments (size, type, op, root, call order):
    /// the two declarations that disagree.
    #[error("collective call mismatch: {0}")]
    Mismatch(CallMismatch),

    /// A peer or the tracker sent bytes that do not follow the protocol (bad magic, bad
    /// version, oversized or malformed frame).
    #[error("protocol error: {0}")]
    Protocol(String),

    /// The tracker or a peer refused us because we could not prove we hold the job secret,
    /// or a peer failed to prove it to us.
    #[error("authentication failed: {0}")]
    Auth(String),

    /// The collective was aborted because another rank failed, or because this worker was
    /// cancelled ([`crate::CancelHandle`]); carries that rank's reason.
    #[error("collective aborted by {}: {reason}", aborter(*rank))]
    Aborted {
        /// The rank that aborted first ([`NO_RANK`] for a worker cancelled
        /// before it had a rank).
        rank: usize,
        /// Its reason.
        reason: String,
    },

    /// The tracker fenced this worker: it sent no heartbeat within the peer timeout (paused,
    /// frozen or cut off), so the job went on without it and a replacement takes its place.
    /// Nothing it sends is accepted any more; it should exit.
    #[error("fenced: {0}")]
    Fenced(String),

    /// Linking to the peers was abandoned because a new re-link round started (a worker failed
    /// again while the others were linking to it); the worker re-links again.
    #[error("re-linking superseded: {0}")]
    RelinkSuperseded(String),

    /// Elastic membership: the view changed during a recovery (a lost worker whose
    /// replacement did not register within the rejoin timeout was dropped), and this worker
    /// rolled back to the last committed checkpoint in the new view. The call did not run and
    /// the communicator stays usable: call `load_checkpoint` and go on from its version
    /// (`take_view_change` says the new rank and world size).
    #[error("rolled back to checkpoint version {version}: {reason}")]
    RolledBack {
        /// The checkpoint version the job goes on from.
        version: u32,
        /// What changed.
        reason: String,
    },

    /// Recovery cannot proceed: the data a restarted worker needs is held by no live worker,
    /// or the workers' positions cannot be reconciled. Raised on every worker.
    #[error("recovery impossible: {reason}{}", lost_suffix(lost))]
    RecoveryImpossible {
        /// Task ids of the workers whose loss made it impossible (the restarted workers, or
        /// every worker that kept a copy of what is now missing).
        lost: Vec<String>,
        /// What is missing, by rank.
        reason: String,
    },

    /// Elastic membership: this task is not a member of the job any more and will not be:
    /// it was removed and left (a re-run of it, by Spark say, has nothing to do), or was
    /// removed before there was room for it to join. Not a failure of the job: the task
    /// should end without a result.
    #[error("not a member: {0}")]
    Left(String),

    /// The caller used the API wrongly (root out of range, element size mismatch, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The tracker reported a job-level failure (rendezvous deadline, worker lost, ...).
    #[error("tracker: {0}")]
    Tracker(String),

    /// Another worker failed with an error that cannot succeed on retry (the message names
    /// it), and the tracker ended the job: this worker's call fails rather than wait for a
    /// replacement that cannot come. Final, since a re-run has nothing to do; the error to fix
    /// is the one named.
    #[error("the job has failed: {0}")]
    JobFailed(String),

    /// A data file (RecordIO or dmlc `.rec`) is corrupt or truncated: bad magic, checksum
    /// mismatch, a length field that points past the end of the file or over a limit, or a
    /// payload that does not decode. Names the file, the chunk and its byte offset so the
    /// damage can be located with `warren recordio index`.
    #[error("{file}: corrupt chunk {chunk} at byte offset {offset}: {reason}")]
    Corrupt {
        /// The file (path, or the name the caller gave a stream).
        file: String,
        /// Index of the chunk within the file, from 0. For dmlc `.rec` files, which have no
        /// chunks, the index of the logical record being read.
        chunk: u64,
        /// Byte offset of the start of that chunk (or dmlc record part) in the file.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },

    /// A trainer reported a dataset that differs from the one the master already holds
    /// (the first reported dataset wins; reporting the same one again is fine).
    #[error("dataset mismatch: {0}")]
    DatasetMismatch(String),

    /// A file of a durable store is damaged: a log record with a bad checksum or length in
    /// the middle of the log, a gap in the change sequence, or an unreadable snapshot.
    /// A torn record at the very end of the log (an interrupted write) is not an error.
    #[error("store file {} is corrupt at byte offset {offset}: {reason}", path.display())]
    StoreCorrupt {
        /// The damaged file.
        path: std::path::PathBuf,
        /// Byte offset in that file where the damage starts.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },

    /// A logged master change does not fit the state it is replayed onto (wrong sequence
    /// number, task in the wrong queue, ...): the snapshot and log do not belong together.
    #[error("change {seq} cannot be applied: {reason}")]
    InvalidChange {
        /// Sequence number of the offending change.
        seq: u64,
        /// Why it does not fit.
        reason: String,
    },

    /// A durable store failed earlier (a write or fsync error) and refuses further work, because
    /// the in-memory state may now be ahead of the disk. Restart so the state is reloaded.
    #[error("store failed earlier and is unusable until restart: {0}")]
    StoreFailed(String),

    /// The data master answered a request with an error that fits none of the variants
    /// above, or a master connection failed in a way that retrying did not fix. The message
    /// names the master's address.
    #[error("master: {0}")]
    Master(String),
}

impl Error {
    /// Wraps an I/O error with what Warren was doing when it happened.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// Whether running the worker again cannot succeed: a broken contract (collective calls
    /// that differ between ranks, another dataset than the job's), a bad setting, or a job
    /// that cannot be recovered. Runners stop the job on such an error instead of re-running
    /// the worker (`warren run` exits; Spark fails the job without retries).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Error::Mismatch(_)
                | Error::RecoveryImpossible { .. }
                | Error::Config(_)
                | Error::DatasetMismatch(_)
                | Error::JobFailed(_)
        )
    }
}

fn timeout_text(what: &str, after: &Duration) -> String {
    if after.is_zero() {
        format!("timed out waiting for {what}: its deadline had already passed")
    } else {
        format!("timed out after {after:.1?} waiting for {what}")
    }
}

fn task_suffix(task: &Option<String>) -> String {
    task.as_ref().map(|t| format!(" (task id {t})")).unwrap_or_default()
}

fn aborter(rank: usize) -> String {
    if rank == NO_RANK { "a worker that had not joined yet".into() } else { format!("rank {rank}") }
}

fn lost_suffix(lost: &[String]) -> String {
    if lost.is_empty() { String::new() } else { format!(" (lost task ids: {})", lost.join(", ")) }
}

/// What one rank declared about a collective call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// The rank.
    pub rank: usize,
    /// The call it declared: collective, position, size in bytes, type, operator, root.
    pub call: String,
    /// The same, field by field (`None` where only the description is known). Boxed: it is
    /// rarely there, and [`Error`] stays small on the success path of every call.
    #[serde(default)]
    pub args: Option<Box<CallArgs>>,
}

impl Declaration {
    /// A declaration known only by its description.
    pub fn described(rank: usize, call: impl Into<String>) -> Declaration {
        Declaration { rank, call: call.into(), args: None }
    }
}

/// The arguments of a declared collective call, field by field, for programs that act on a
/// mismatch (what [`Declaration::call`] describes).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallArgs {
    /// The collective, with its algorithm where it has one: `allreduce(tree)`, `broadcast`, ...
    pub collective: String,
    /// The call's position: the call number (in robust mode the checkpoint version in the high
    /// 32 bits and the call number since it in the low ones; a bootstrap call's key hash).
    pub seq: u64,
    /// Size in bytes; `None` where the rank did not know it (a broadcast receiver).
    pub bytes: Option<u64>,
    /// Element type: `u8`, `i32`, `f32`, `f64`, ...
    pub dtype: String,
    /// Reduction operator: `sum`, `max`, ..., `user` (`none` for calls that do not reduce).
    pub op: String,
    /// The root of a broadcast.
    pub root: Option<u32>,
    /// The call's tag (`CallOptions::tag`): set for a user-defined reducer and for a call
    /// with a non-zero tag.
    pub tag: Option<u32>,
    /// The bootstrap key of a bootstrap call, where known.
    pub key: Option<String>,
}

/// Two ranks that declared different calls where they had to make the same one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallMismatch {
    /// One declaration.
    pub first: Declaration,
    /// The declaration that disagrees with it.
    pub second: Declaration,
    /// Where the disagreement was found (empty if nowhere in particular): "detected by rank
    /// 3", "replaying call #2 of version 5 after a recovery", ...
    pub context: String,
}

impl CallMismatch {
    /// The mismatch of `first` and `second`, found in `context`.
    pub fn new(first: Declaration, second: Declaration, context: impl Into<String>) -> CallMismatch {
        CallMismatch { first, second, context: context.into() }
    }
}

impl std::fmt::Display for CallMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = (&self.first, &self.second);
        write!(f, "rank {} called {} but rank {} called {}", a.rank, a.call, b.rank, b.call)?;
        if !self.context.is_empty() {
            write!(f, " ({})", self.context)?;
        }
        let checkpoint = |d: &Declaration| d.args.as_ref().is_some_and(|c| c.collective.starts_with("checkpoint"));
        if checkpoint(a) && checkpoint(b) {
            write!(
                f,
                ": the global state given to checkpoint must be the same bytes on every worker (state of one \
                 worker's own belongs in its local model: checkpoint(global, local))"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_mismatch_states_the_contract_of_the_global_state() {
        let args = |tag: u32| CallArgs { collective: "checkpoint".into(), tag: Some(tag), ..CallArgs::default() };
        let decl = |rank: usize, tag: u32| Declaration {
            rank,
            call: format!("checkpoint #1 of version 0, 24 bytes u8 sum of global state checksum {tag:08x}"),
            args: Some(Box::new(args(tag))),
        };
        let e = Error::Mismatch(CallMismatch::new(decl(0, 1), decl(1, 2), "")).to_string();
        assert!(e.contains("must be the same bytes on every worker"), "{e}");
        assert!(e.contains("checkpoint(global, local)"), "{e}");
        let other =
            CallMismatch::new(Declaration::described(0, "allreduce"), Declaration::described(1, "allreduce"), "");
        assert!(!other.to_string().contains("global state"));
    }

    #[test]
    fn structured_errors_display_both_declarations_and_the_lost_tasks() {
        let m = CallMismatch::new(
            Declaration::described(1, "allreduce(tree) #3 of 40 bytes f32 sum"),
            Declaration::described(2, "allreduce(tree) #3 of 44 bytes f32 sum"),
            "detected by rank 1",
        );
        assert_eq!(
            Error::Mismatch(m).to_string(),
            "collective call mismatch: rank 1 called allreduce(tree) #3 of 40 bytes f32 sum but rank 2 called \
             allreduce(tree) #3 of 44 bytes f32 sum (detected by rank 1)"
        );
        let e = Error::RecoveryImpossible { lost: vec!["4".into(), "5".into()], reason: "no copy left".into() };
        assert_eq!(e.to_string(), "recovery impossible: no copy left (lost task ids: 4, 5)");
        let e = Error::RecoveryImpossible { lost: vec![], reason: "no copy left".into() };
        assert_eq!(e.to_string(), "recovery impossible: no copy left");
        let e = Error::PeerLost { rank: 2, task: Some("7".into()), reason: "reset".into() };
        assert_eq!(e.to_string(), "link to peer rank 2 (task id 7) lost: reset");
        let e = Error::PeerLost { rank: 2, task: None, reason: "reset".into() };
        assert_eq!(e.to_string(), "link to peer rank 2 lost: reset");
    }
}

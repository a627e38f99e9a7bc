//! The changes a [`Queue`](super::Queue) emits: the unit of its write-ahead log.
//!
//! A change records a *decision*, not a request: "task 7, epoch 3, was requeued after its
//! 2nd failure", "pass 4 starts with this todo order". Replaying changes therefore never
//! consults the [`QueueSettings`](super::QueueSettings) or a clock, so a master restarted
//! with different settings still rebuilds exactly the state it had.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::task::{ChunkRef, Millis, TaskId};

/// One state change of the task queue, numbered.
///
/// `seq` starts at 1 for the first change of a queue and grows by exactly one per change;
/// [`Queue::apply`](super::Queue::apply) refuses a change whose `seq` is not the next one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Position in the queue's history (1-based, no gaps).
    pub seq: u64,
    /// What changed.
    pub kind: ChangeKind,
}

/// What a [`Change`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChangeKind {
    /// The dataset was set and split into tasks; pass 0 starts with `todo` in this order.
    DatasetSet {
        /// Every chunk of the dataset, in dataset order.
        chunks: Vec<ChunkRef>,
        /// Consecutive chunks per task (the last task may have fewer).
        chunks_per_task: u32,
        /// The shuffled todo order of pass 0 (a permutation of all task ids).
        todo: Vec<TaskId>,
    },
    /// The task at the front of the todo queue was handed out.
    Dispatched {
        /// The task.
        task: TaskId,
        /// Its new epoch (previous epoch + 1).
        epoch: u64,
        /// When it was handed out.
        dispatched_ms: Millis,
        /// When it times out unless finished or failed before.
        deadline_ms: Millis,
    },
    /// The live dispatch of a task finished; the task moves to done.
    Finished {
        /// The task.
        task: TaskId,
        /// The epoch that finished.
        epoch: u64,
        /// The moving average of completion durations after this completion.
        avg_duration_ms: Millis,
    },
    /// The live dispatch of a task failed or timed out and the task goes back to the end of
    /// the todo queue.
    Requeued {
        /// The task.
        task: TaskId,
        /// The epoch that failed.
        epoch: u64,
        /// The task's failure count in this pass, this failure included.
        failures: u32,
        /// Why.
        reason: FailReason,
    },
    /// The live dispatch of a task failed or timed out once too often; the task moves to
    /// the failed set.
    Discarded {
        /// The task.
        task: TaskId,
        /// The epoch that failed.
        epoch: u64,
        /// The task's failure count in this pass, this failure included.
        failures: u32,
        /// Why the last attempt failed.
        reason: FailReason,
    },
    /// Todo and pending were empty: a new pass starts with `todo` in this order (the done
    /// tasks of the previous pass, plus the failed ones if the settings retry them).
    PassStarted {
        /// The new pass number (previous + 1).
        pass: u64,
        /// The shuffled todo order of the new pass.
        todo: Vec<TaskId>,
    },
    /// Every pending deadline earlier than `min_deadline_ms` was moved to it (after a
    /// restart, so that the master's downtime does not count against trainers).
    DeadlinesExtended {
        /// The earliest deadline any pending task now has.
        min_deadline_ms: Millis,
    },
}

/// Why a dispatch of a task failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The trainer reported a failure with this message.
    Reported(String),
    /// The trainer neither finished nor failed the task before its deadline.
    TimedOut {
        /// The deadline that passed.
        deadline_ms: Millis,
    },
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::Reported(msg) => write!(f, "trainer reported: {msg}"),
            FailReason::TimedOut { deadline_ms } => {
                write!(f, "timed out (deadline {deadline_ms} ms)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape_is_readable_and_round_trips() {
        let c = Change {
            seq: 3,
            kind: ChangeKind::Requeued {
                task: TaskId(7),
                epoch: 2,
                failures: 1,
                reason: FailReason::TimedOut { deadline_ms: 99 },
            },
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"seq":3,"kind":{"type":"requeued","task":7,"epoch":2,"failures":1,"reason":{"timed_out":{"deadline_ms":99}}}}"#
        );
        let back: Change = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn reasons_display() {
        assert_eq!(FailReason::Reported("oom".into()).to_string(), "trainer reported: oom");
        assert_eq!(FailReason::TimedOut { deadline_ms: 5 }.to_string(), "timed out (deadline 5 ms)");
    }
}

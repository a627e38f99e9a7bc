//! The data master's durable core: the task queue and its persistence.
//!
//! - [`Queue`] (in `queue.rs`): todo / pending / done / failed task queues, epochs,
//!   timeouts, retry counts and passes, as a pure state machine. Every state change comes
//!   out as a [`Change`]; [`Queue::apply`] replays changes onto a [`Snapshot`].
//! - [`DurableQueue`] (in `durable.rs`): a `Queue` behind a mutex whose changes go through a
//!   [`Store`](crate::store::Store) before a call returns, with group commit across
//!   threads. The network service is built on it.
//!
//! The design follows PaddlePaddle's master (see `shared/seeds`), with decisions recorded
//! in the [`queue`] module documentation where the seed is silent or dated.

mod change;
mod durable;
pub mod queue;
mod shuffle;

#[cfg(test)]
mod queue_props;

pub use change::{Change, ChangeKind, FailReason};
pub use durable::DurableQueue;
pub use queue::{
    Ack, ChunkRef, FailedTask, GetTask, Millis, Output, PendingTask, Queue, QueueCounts, QueueSettings, Snapshot, Task,
    TaskId,
};

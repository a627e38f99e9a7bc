//! The data master's durable core: the task queue and its persistence.
//!
//! - [`Queue`] (in `queue.rs`): todo / pending / done / failed task queues, epochs,
//!   timeouts, retry counts and passes, as a pure state machine. Every state change comes
//!   out as a [`Change`]; [`Queue::apply`] replays changes onto a [`Snapshot`].
//! - [`DurableQueue`] (in `durable.rs`): a `Queue` behind a mutex whose changes go through a
//!   [`Store`](warren_store::Store) before a call returns, with group commit across
//!   threads. The network service is built on it. [`QueueCodec`] tells the generic stores
//!   what the queue logs ([`Change`]s) and snapshots ([`Snapshot`]s).
//! - [`proto`]: the wire protocol (requests, replies, errors), pure.
//! - [`MasterService`] (in `service.rs`): the tokio network service: authentication,
//!   requests answered once durable (hand-outs at once unless configured otherwise),
//!   timeouts driven by its clock, progress in its log.
//! - [`MasterClient`] (in `client.rs`): the blocking, reconnecting client.
//! - [`TaskReader`] (in `reader.rs`): a worker's iterator over the records of its tasks.
//! - `dataset.rs`: glob patterns to the chunks of the dataset.
//!
//! The design follows PaddlePaddle's master (see `shared/seeds`), with decisions recorded
//! in the [`queue`] module documentation where the seed is silent or dated.
#![deny(missing_docs)]

mod change;
mod client;
pub mod dataset;
mod durable;
pub mod proto;
pub mod queue;
mod reader;
mod service;
mod shuffle;
mod task;

#[cfg(test)]
mod queue_props;

pub use change::{Change, ChangeKind, FailReason};
pub use client::{ClientOptions, MasterClient};
pub use durable::{DurableQueue, QueueCodec};
pub use proto::MasterStatus;
pub use queue::{
    Ack, ChunkRef, FailedTask, GetTask, Millis, Output, PendingTask, Queue, QueueCounts, QueueSettings, Snapshot, Task,
    TaskId,
};
pub use reader::{ReaderOptions, TaskReader, read_task};
pub use service::{MasterConfig, MasterService, now_ms};

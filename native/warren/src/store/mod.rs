//! Durable storage of the master's task queue: a snapshot plus a log of changes.
//!
//! - [`Store`]: the interface the master writes through. Changes are *submitted* in queue
//!   order (cheap, under the queue's lock) and then *waited for* (outside the lock) until
//!   they are durable; many threads waiting at once share one fsync (group commit).
//! - [`FileStore`]: the embedded default, a directory holding a write-ahead log of
//!   checksummed records and a gzip-compressed snapshot replaced atomically on compaction.
//! - [`EtcdStore`]: the queue in etcd, with a leader lock (one master per dataset at a
//!   time; a second master waits and takes over when the first dies).
//! - [`SnapshotEveryChangeStore`]: the seed design (serialize the whole queue, gzip, write
//!   it synchronously on every change), kept for benchmark comparison.
//! - [`open`] (in `spec.rs`): one of these named by a spec such as `file:DIR`.
//!
//! A store that fails a write refuses all later work ([`Error::StoreFailed`]): the
//! in-memory queue may then be ahead of the disk, and only a restart (which reloads what
//! is durable) makes the two agree again.
//!
//! [`Error::StoreFailed`]: crate::error::Error::StoreFailed

mod etcd;
mod file;
mod fsutil;
mod snapshot_every_change;
mod spec;
mod wal;

#[cfg(test)]
pub(crate) mod testdir;

use std::sync::Arc;

pub use etcd::{EtcdOptions, EtcdStore, MAX_LEASE_TTL_S, MIN_LEASE_TTL_S};
pub use file::{FileStore, FileStoreOptions, FileStoreStats};
pub use snapshot_every_change::SnapshotEveryChangeStore;
pub use spec::{DEFAULT_ETCD_PREFIX, OpenOptions, open, open_with};

use crate::error::Result;
use crate::master::{Change, Snapshot};

/// A point in a store's order of submitted changes: the sequence number of the last change
/// submitted when it was issued. Waiting for a ticket waits for everything submitted up to
/// that point, by any thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// Durable storage for a master's queue: an append-only log of [`Change`]s and an
/// occasional [`Snapshot`] that lets the log be cut.
///
/// The protocol that keeps the log in queue order while sharing fsyncs:
///
/// 1. under the queue's lock: make the change, then [`submit`](Store::submit) it;
/// 2. release the lock, then [`wait_durable`](Store::wait_durable) on the ticket;
/// 3. answer the caller.
///
/// [`DurableQueue`](crate::master::DurableQueue) does exactly this.
pub trait Store: Send + Sync {
    /// Queues `changes` (consecutive sequence numbers following the last submitted change)
    /// to be written in this order. They need not be durable yet. The ticket covers them
    /// and everything submitted before; an empty `changes` still returns such a ticket.
    /// The changes of one call are stored atomically: after a crash either all of them or
    /// none are found.
    fn submit(&self, changes: &[Change]) -> Result<Ticket>;

    /// Blocks until every change covered by `ticket` is durable.
    fn wait_durable(&self, ticket: Ticket) -> Result<()>;

    /// [`submit`](Store::submit) then [`wait_durable`](Store::wait_durable).
    fn append(&self, changes: &[Change]) -> Result<()> {
        let ticket = self.submit(changes)?;
        self.wait_durable(ticket)
    }

    /// Reads what is durable: the latest snapshot, if any, and the changes logged after
    /// it, in order. Meant for start-up, before any `submit`.
    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)>;

    /// Stores `snapshot` durably and drops the log records it covers. The snapshot must
    /// come from the queue whose changes this store receives (its `seq` not beyond the
    /// last submitted change).
    fn compact(&self, snapshot: &Snapshot) -> Result<()>;

    /// Whether the log has grown enough that a [`compact`](Store::compact) is advisable.
    fn wants_compaction(&self) -> bool {
        false
    }

    /// Whether [`submit`](Store::submit) may block for long (write to disk): then callers
    /// that must not block (an async task) hand it to a thread. False by default: a store
    /// only queues in `submit` and writes in `wait_durable`.
    fn submit_blocks(&self) -> bool {
        false
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn submit(&self, changes: &[Change]) -> Result<Ticket> {
        (**self).submit(changes)
    }
    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        (**self).wait_durable(ticket)
    }
    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)> {
        (**self).load()
    }
    fn compact(&self, snapshot: &Snapshot) -> Result<()> {
        (**self).compact(snapshot)
    }
    fn wants_compaction(&self) -> bool {
        (**self).wants_compaction()
    }
    fn submit_blocks(&self) -> bool {
        (**self).submit_blocks()
    }
}

impl<S: Store + ?Sized> Store for Arc<S> {
    fn submit(&self, changes: &[Change]) -> Result<Ticket> {
        (**self).submit(changes)
    }
    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        (**self).wait_durable(ticket)
    }
    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)> {
        (**self).load()
    }
    fn compact(&self, snapshot: &Snapshot) -> Result<()> {
        (**self).compact(snapshot)
    }
    fn wants_compaction(&self) -> bool {
        (**self).wants_compaction()
    }
    fn submit_blocks(&self) -> bool {
        (**self).submit_blocks()
    }
}

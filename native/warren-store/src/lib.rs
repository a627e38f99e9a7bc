//! Durable storage for services: a log of numbered records plus an occasional snapshot,
//! for any record and snapshot types.
//!
//! - [`Store`]: the interface a service writes through. Records are *submitted* in order
//!   (cheap, under the service's state lock) and then *waited for* (outside the lock) until
//!   they are durable; many threads waiting at once share one fsync or one etcd
//!   transaction (group commit).
//! - [`FileStore`]: the embedded default, a directory holding a write-ahead log of
//!   checksummed records and a gzip-compressed snapshot replaced atomically on compaction.
//! - [`EtcdStore`] (Cargo feature `etcd`): the log in etcd, each flush in one transaction,
//!   with a leader lock (one writer per key prefix at a time; a second one waits and takes
//!   over when the first dies).
//! - [`SnapshotEveryChangeStore`]: the seed design (serialize the whole state, gzip, write
//!   it synchronously on every change), kept for benchmark comparison.
//! - [`open`] (in `spec.rs`): one of these named by a spec such as `file:DIR`.
//! - [`Codec`] and [`Replay`] (in `codec.rs`): what a service tells the stores about its
//!   records and state.
//!
//! A store that fails a write refuses all later work ([`Error::StoreFailed`]): the
//! in-memory state may then be ahead of the disk, and only a restart (which reloads what
//! is durable) makes the two agree again.
//!
//! # Typed records with a codec, bytes inside
//!
//! The stores are generic over a [`Codec`]: `FileStore<C>` takes and returns `C::Record`s
//! and `C::Snapshot`s, not bytes. The alternative, a store of byte strings with the
//! encoding left to each service, would make every service repeat what the stores do now
//! once for all: check that records are numbered without gaps when they are submitted and
//! when they are read back (a store of bytes cannot see the numbers), cut the log at a
//! snapshot's number, and name the damaged record in an error. Typed records also make it
//! impossible to hand the master's store a parameter server's records: the compiler says
//! so. Inside, the stores only move bytes (framing, checksums, compression, group commit,
//! etcd transactions); the codec is called once per submit to encode and once per record at
//! load. Every store records the codec's [`Codec::FORMAT`] name next to the data and
//! refuses to open data of another format, so two services given the same directory or
//! etcd prefix fail at once with an error naming both formats instead of misreading each
//! other's records.
//!
//! No store type imports a service's types: the master is one user (`master::QueueCodec`:
//! its `Change`s and queue `Snapshot`s), the parameter server's metadata the next.
//!
//! # Plugging in a new service
//!
//! Give the store a codec: the record and snapshot types (serde), their sequence numbers
//! and a format name. JSON is the default encoding; override the `encode_*`/`decode_*`
//! methods for another one.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use warren_store::{Codec, FileStore, Store};
//!
//! #[derive(Serialize, Deserialize)]
//! struct ServerJoined { seq: u64, index: u32, addr: String }
//! #[derive(Serialize, Deserialize)]
//! struct Servers { seq: u64, addrs: Vec<String> }
//!
//! struct PsMeta;
//! impl Codec for PsMeta {
//!     type Record = ServerJoined;
//!     type Snapshot = Servers;
//!     const FORMAT: &'static str = "warren.ps.meta/1";
//!     fn seq(r: &ServerJoined) -> u64 { r.seq }
//!     fn snapshot_seq(s: &Servers) -> u64 { s.seq }
//! }
//!
//! # fn main() -> warren_base::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("warren-store-doc-{}", std::process::id()));
//! let store = FileStore::<PsMeta>::open(&dir)?;
//! store.append(&[ServerJoined { seq: 1, index: 0, addr: "10.0.0.5:7164".into() }])?;
//! let (snapshot, records) = store.load()?; // at start-up: the state to rebuild
//! assert!(snapshot.is_none() && records.len() == 1);
//! # drop(store); std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(()) }
//! ```
//!
//! To open stores named by a spec string ([`open`]: `file:`, `etcd:`, `snapshot:`), also
//! implement [`Replay`] (restore a state from a snapshot, apply a record, snapshot a
//! state), which a service restarting from its store needs anyway. Then follow the
//! protocol of [`Store`] (number and submit under the state's lock, wait outside it), as
//! `master::DurableQueue` does, and call [`Store::compact`] when [`Store::wants_compaction`].
//!
//! [`Error::StoreFailed`]: warren_base::error::Error::StoreFailed
#![deny(missing_docs)]

mod codec;
#[cfg(feature = "etcd")]
pub mod etcd;
mod etcd_limits;
#[cfg(feature = "etcd")]
mod etcd_options;
mod file;
mod fsutil;
mod snapshot_every_change;
mod spec;
mod stored_gz;
mod wal;

#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testdir;
#[cfg(test)]
pub(crate) mod testkit;

use std::sync::Arc;

pub use codec::{Codec, DecodeError, Replay};
#[cfg(feature = "etcd")]
pub use etcd::{COMPRESS_LOG_BYTES, EtcdOptions, EtcdStore};
pub use etcd_limits::{DEFAULT_ETCD_PREFIX, DEFAULT_FLUSHES_IN_FLIGHT, MAX_LEASE_TTL_S, MIN_LEASE_TTL_S};
pub use file::{FileStore, FileStoreOptions, FileStoreStats, LogSync};
pub use snapshot_every_change::SnapshotEveryChangeStore;
pub use spec::{OpenOptions, open, open_with, parse_etcd_spec};

use warren_base::error::Result;

/// What [`Store::load`] returns: the latest snapshot, if any, and the records logged after
/// it, in order.
pub type Loaded<C> = (Option<<C as Codec>::Snapshot>, Vec<<C as Codec>::Record>);

/// A point in a store's order of submitted records: the sequence number of the last record
/// submitted when it was issued. Waiting for a ticket waits for everything submitted up to
/// that point, by any thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// Durable storage for one service's state: an append-only log of `C::Record`s and an
/// occasional `C::Snapshot` that lets the log be cut (see [`Codec`]).
///
/// The protocol that keeps the log in the state's order while sharing fsyncs:
///
/// 1. under the state's lock: make the change, then [`submit`](Store::submit) its records;
/// 2. release the lock, then [`wait_durable`](Store::wait_durable) on the ticket;
/// 3. answer the caller.
///
/// The master's `DurableQueue` does exactly this.
pub trait Store<C: Codec>: Send + Sync {
    /// Queues `records` (consecutive sequence numbers following the last submitted record)
    /// to be written in this order. They need not be durable yet. The ticket covers them
    /// and everything submitted before; an empty `records` still returns such a ticket.
    /// The records of one call are stored atomically: after a crash either all of them or
    /// none are found.
    fn submit(&self, records: &[C::Record]) -> Result<Ticket>;

    /// Blocks until every record covered by `ticket` is durable.
    fn wait_durable(&self, ticket: Ticket) -> Result<()>;

    /// [`submit`](Store::submit) then [`wait_durable`](Store::wait_durable).
    fn append(&self, records: &[C::Record]) -> Result<()> {
        let ticket = self.submit(records)?;
        self.wait_durable(ticket)
    }

    /// Reads what is durable: the latest snapshot, if any, and the records logged after
    /// it, in order. Meant for start-up, before any `submit`.
    fn load(&self) -> Result<Loaded<C>>;

    /// Stores `snapshot` durably and drops the log records it covers. The snapshot must
    /// come from the state whose records this store receives (its sequence number not
    /// beyond the last submitted record).
    fn compact(&self, snapshot: &C::Snapshot) -> Result<()>;

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

impl<C: Codec, S: Store<C> + ?Sized> Store<C> for Box<S> {
    fn submit(&self, records: &[C::Record]) -> Result<Ticket> {
        (**self).submit(records)
    }
    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        (**self).wait_durable(ticket)
    }
    fn load(&self) -> Result<Loaded<C>> {
        (**self).load()
    }
    fn compact(&self, snapshot: &C::Snapshot) -> Result<()> {
        (**self).compact(snapshot)
    }
    fn wants_compaction(&self) -> bool {
        (**self).wants_compaction()
    }
    fn submit_blocks(&self) -> bool {
        (**self).submit_blocks()
    }
}

impl<C: Codec, S: Store<C> + ?Sized> Store<C> for Arc<S> {
    fn submit(&self, records: &[C::Record]) -> Result<Ticket> {
        (**self).submit(records)
    }
    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        (**self).wait_durable(ticket)
    }
    fn load(&self) -> Result<Loaded<C>> {
        (**self).load()
    }
    fn compact(&self, snapshot: &C::Snapshot) -> Result<()> {
        (**self).compact(snapshot)
    }
    fn wants_compaction(&self) -> bool {
        (**self).wants_compaction()
    }
    fn submit_blocks(&self) -> bool {
        (**self).submit_blocks()
    }
}

//! # Warren: a fault-tolerant collective runtime
//!
//! Layout (dependencies point downwards):
//!
//! - [`engine`]: the public API, [`Communicator`]: init / allreduce / broadcast /
//!   allgather / barrier / checkpoint / print / finalize; it carries out what `robust` plans.
//! - [`robust`]: retry-one recovery: what each worker keeps, and the pure planning of a
//!   recovery from every worker's proposal (who sends what to whom).
//! - [`collective`]: tree and ring algorithms over a set of links (no fault tolerance), and
//!   the call header every rank declares ([`collective::header`]).
//! - [`cancel`]: [`CancelHandle`], which cancels a communicator's calls from another thread
//!   (wakes its waits, shuts its tracker socket).
//! - [`liveness`]: beyond crashes: stall reports, and the heartbeats by which the tracker
//!   fences a paused, frozen or cut-off worker; [`pause`]: the time a process did not run
//!   itself, which every liveness watch (worker, tracker, master, parameter server) discounts.
//! - [`transport`]: the peer links between workers: set-up, non-blocking TCP links, and the
//!   readiness loop that drives them.
//! - [`tracker`]: rendezvous, membership views, topology brokering, job log (async, tokio);
//!   its messages in [`tracker::proto`].
//! - [`membership`]: views `(epoch, members by task id)` and the placement of recovery data
//!   derived from them (pure).
//! - [`master`]: the data master's task queue (pure state machine), its durable wrapper,
//!   service and client; its messages in [`master::proto`].
//! - [`ps`]: the parameter server: sharded dense and sparse tables, server-side optimizers,
//!   sync / async / SSP consistency (a pure state machine), its service and trainer client.
//! - [`wire`]: what every service connection shares (tracker, master, parameter server): preamble, frames, the HMAC handshake, deadline-bound reads and writes,
//!   authenticated accepts.
//! - [`topology`]: tree and ring, pure; [`hosts`]: ranks grouped by host for hierarchical
//!   allreduce, pure.
//! - [`reduce`]: element types, reduction operators and their vectorizable kernels.
//! - [`store`]: durable storage for any service (the master today): a log of typed records
//!   with group commit and snapshots, in a directory or in etcd (Cargo feature `etcd`).
//! - [`config`]: worker settings from the environment or given explicitly; [`mock`]: the
//!   failure-injection points they can name.
//! - [`recordio`]: PaddlePaddle RecordIO files (chunked, checksummed, compressed) and dmlc
//!   `.rec` files: writer, header-only index, readers.
//! - [`error`]: the crate's single error type.
#![deny(missing_docs)]

pub mod cancel;
pub mod collective;
pub mod config;
pub mod engine;
pub mod error;
pub mod hosts;
pub mod liveness;
pub mod master;
pub mod membership;
pub mod pause;
pub mod ps;
pub mod recordio;
pub mod reduce;
pub mod robust;
pub mod store;
pub mod topology;
pub mod tracker;
pub mod transport;
pub mod wire;

pub use cancel::CancelHandle;
pub use config::{Config, mock};
pub use engine::{BroadcastBuf, CallOptions, CallStats, Checkpoint, Communicator, Lent, ViewChange};
pub use error::{CallArgs, CallMismatch, Declaration, Error, Result};
pub use reduce::{DataType, Element, Op};
pub use tracker::{Tracker, TrackerConfig};

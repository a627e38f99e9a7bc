//! # Warren: a fault-tolerant collective runtime
//!
//! This crate is the collective runtime with retry-one recovery, and the facade of the
//! crates below it, re-exported under the names users know (`warren::ps`, `warren::store`,
//! ...). Each layer is a crate, so Cargo lets a crate use only the ones below it: the services
//! (data master, parameter server) cannot reach into the runtime.
//!
//! The runtime (dependencies point downwards):
//!
//! - [`engine`]: the public API, [`Communicator`]: init / allreduce / broadcast /
//!   allgather / barrier / checkpoint / print / finalize; it carries out what `robust` plans.
//! - [`robust`]: retry-one recovery: what each worker keeps, and the pure planning of a
//!   recovery from every worker's proposal (who sends what to whom).
//! - [`collective`]: tree and ring algorithms over a set of links (no fault tolerance), and
//!   the call header every rank declares ([`collective::header`]).
//! - [`liveness`]: beyond crashes: stall reports, and the heartbeats by which the tracker
//!   fences a paused, frozen or cut-off worker.
//! - [`transport`]: the peer links between workers: set-up, non-blocking TCP links, and the
//!   readiness loop that drives them.
//! - [`tracker`]: rendezvous, membership views, topology brokering, job log (async, tokio);
//!   its messages in [`tracker::proto`].
//! - [`membership`]: views `(epoch, members by task id)` and the placement of recovery data
//!   derived from them (pure).
//! - [`topology`]: tree and ring, pure; [`hosts`]: ranks grouped by host for hierarchical
//!   allreduce, pure.
//! - [`reduce`]: element types, reduction operators and their vectorizable kernels.
//!
//! The crates below (re-exported here):
//!
//! - [`ps`] (`warren-ps`): the parameter server: sharded dense and sparse tables, server-side
//!   optimizers, sync / async / SSP consistency (a pure state machine), its service and
//!   trainer client.
//! - [`master`] (`warren-master`): the data master's task queue (pure state machine), its
//!   durable wrapper, service and client.
//! - [`recordio`] (`warren-recordio`): PaddlePaddle RecordIO files (chunked, checksummed,
//!   compressed) and dmlc `.rec` files: writer, header-only index, readers.
//! - [`store`] (`warren-store`): durable storage for any service: a log of typed records with
//!   group commit and snapshots, in a directory or in etcd (Cargo feature `etcd`).
//! - [`wire`] (`warren-wire`): what every service connection shares (tracker, master,
//!   parameter server): preamble, frames, the HMAC handshake, deadline-bound reads and
//!   writes, authenticated accepts, TLS.
//! - [`error`], [`cancel`], [`pause`], [`config`] (`warren-base`): the single error type of
//!   every crate; [`CancelHandle`], which cancels a communicator's calls from another thread;
//!   the time a process did not run itself, which every liveness watch discounts; worker
//!   settings from the environment or given explicitly, and [`mock`], the failure-injection
//!   points they can name.
#![deny(missing_docs)]

pub mod collective;
pub mod engine;
pub mod hosts;
pub mod liveness;
pub mod membership;
pub mod reduce;
pub mod robust;
pub mod topology;
pub mod tracker;
pub mod transport;

pub use warren_base::{cancel, config, error, pause};
pub use warren_master as master;
pub use warren_ps as ps;
pub use warren_recordio as recordio;
pub use warren_store as store;
pub use warren_wire as wire;

pub use cancel::CancelHandle;
pub use config::{Config, mock};
pub use engine::{BroadcastBuf, CallOptions, CallStats, Checkpoint, Communicator, Lent, ViewChange};
pub use error::{CallArgs, CallMismatch, Declaration, Error, Result};
pub use reduce::{DataType, Element, Op};
pub use tracker::{Tracker, TrackerConfig};

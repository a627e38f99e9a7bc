//! The parameter server: sharded tables, server-side optimizers, and sync / async /
//! bounded-staleness training, following PaddlePaddle's cluster design (see `shared/seeds`).
//!
//! Pure parts, tested without sockets:
//! - `table.rs`: [`TableSpec`]s (dense `f32` arrays split into ranges across the servers,
//!   sparse `u64 -> [f32; width]` rows spread by a hash of the key), and the deterministic
//!   initializer a sparse row is created with on first pull.
//! - `optim.rs`: [`Optimizer`] (SGD, momentum, Adagrad, Adam) and the state it keeps per
//!   element, part of the shard.
//! - `shard.rs`: [`Shard`], one server's share of every table: pulls, checks of pushed
//!   [`Grad`]ients, and batches of pushes summed in the order given and applied once;
//!   `rows.rs`: a sparse table's rows in one arena, and their flat per-batch sums;
//!   `bags.rs`: bags of keys, pulled and pushed as sums of rows (an embedding bag);
//!   `key_index.rs`: their index, key to row, looked up a batch at a time.
//! - `consistency.rs`: [`Clocks`], the state machine deciding when pushes are applied and
//!   pulls answered ([`Mode`]: sync, async, SSP(k)), with property tests; pushes are
//!   two-phase (staged, then committed), so that a trainer that dies half-way through a push
//!   is replaced by one that completes or undoes it.
//! - [`failpoint`]: `WARREN_PS_MOCK`, trainers killing themselves at given points (tests).
//! - [`proto`]: the messages.
//! - `registry.rs`: the etcd keys of a job's servers and trainers, which index a server
//!   claims, the roster of addresses read back.
//! - `checkpoint.rs`: [`Checkpoint`]s of a shard in a generic [`FileStore`](warren_store::FileStore)
//!   (atomic snapshots), and the [`CheckpointPolicy`] (every `K` steps or `T` seconds).
//!
//! I/O:
//! - [`PsServer`] (in `service.rs`): one server as a tokio service (threads of a host
//!   process, or a process of its own: `warren ps`).
//! - [`PsClient`] (in `client/`): the trainer's blocking client, one connection per server,
//!   requests split per server and pipelined; `link.rs`: its link to one server, which pauses
//!   a call while the server is down and resynchronizes with it once it is back.
//! - [`EtcdRegistry`] (in `registry_etcd.rs`, Cargo feature `etcd`): registration in a real
//!   etcd as in the seed design (servers claim `/ps/<index>`, trainers set
//!   `/trainer/<id>` with a lease and wait for every server).
#![deny(missing_docs)]

mod arena;
mod bags;
mod checkpoint;
mod client;
mod consistency;
pub mod failpoint;
mod floats;
mod huge;
mod key_index;
mod link;
mod optim;
pub mod proto;
// Its pure logic serves the etcd registry only: without `etcd`, only its tests use it.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
mod registry;
#[cfg(feature = "etcd")]
mod registry_etcd;
mod rows;
mod service;
mod shard;
mod table;

pub use checkpoint::{
    Checkpoint, CheckpointCodec, CheckpointPolicy, DEFAULT_LOG_SYNC, LOG_SYNC_EVERY, LogRecord, parse_log_sync,
};
pub use client::{PsClient, PsClientOptions, Pull};
pub use consistency::{Batch, Clocks, Mode};
pub use failpoint::{FailPoint, PsMock};
pub use link::Resolver;
pub use optim::Optimizer;
pub use proto::Grad;
pub use proto::{JobSpec, PullPiece, ServerStatus};
pub use registry::{DEFAULT_PS_PREFIX, RegistryKeys};
#[cfg(feature = "etcd")]
pub use registry_etcd::EtcdRegistry;
pub use service::{DEFAULT_THREADS, PsConfig, PsServer};
pub use shard::Shard;
pub use table::{
    Init, KeySpread, MAX_EXPECTED_SHARE, TableKind, TableSpec, dense_range, dense_server, expected_share, initial, mix,
    sparse_server,
};
pub use warren_store::LogSync;

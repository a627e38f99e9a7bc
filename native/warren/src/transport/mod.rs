//! Links between workers: authenticated TCP set-up, non-blocking reads and writes that name
//! the peer on failure, and the readiness loop ([`Waiter`]) that spins briefly and then blocks.
//! The handshake's pieces (preamble, proof of the job secret) come from [`crate::wire`].
//! Peers on the same host move their data through shared memory (`shm`) behind the same
//! [`Link`], unless `WARREN_TRANSPORT=tcp`; the TCP socket stays as the liveness channel.
//! Workers that are threads of one process can link through its memory instead ([`mem`],
//! `WARREN_TRANSPORT=mem`): no socket between them, the same protocol above.

mod link;
pub mod mem;
mod setup;
mod shm;
mod tls_link;
mod waiter;

pub use link::{LEND_MIN, Link, Transport};
pub use setup::{LinkSetup, PeerListener, ShmSetup, connect_peers};
pub use waiter::Waiter;

pub use crate::config::{MAX_SHM_RING, MIN_SHM_RING};

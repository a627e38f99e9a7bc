//! TCP links between workers: authenticated set-up, non-blocking reads and writes that name the
//! peer on failure, and the readiness loop ([`Waiter`]) that spins briefly and then blocks.
//! The handshake's pieces (preamble, proof of the job secret) come from [`crate::wire`].

mod link;
mod setup;
mod waiter;

pub use link::Link;
pub use setup::{LinkSetup, PeerListener, connect_peers};
pub use waiter::Waiter;

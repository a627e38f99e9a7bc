//! Retry-one recovery: what lets a job survive the loss of a worker without restarting.
//!
//! In robust mode every collective call has a position `(version, seq)`: `version` counts
//! checkpoints, `seq` the calls since the last one. Each worker keeps the results of the calls
//! since the last checkpoint ([`ResultBuffer`]), the last checkpoint itself, and (opt-in) the
//! results of *bootstrap* calls made before the first checkpoint ([`BootstrapCache`]).
//!
//! When a link breaks, every worker learns it (a worker that sees a broken link closes all of
//! its own, so the news spreads through the links), re-links through the tracker, and enters
//! *consensus mode*: before each call it proposes what it wants (run the call at its position,
//! load the checkpoint, a bootstrap result by key), all proposals are gathered on every worker,
//! and [`decide`] — a pure function, so every worker reaches the same decision — picks what
//! happens next: serve a checkpoint, a bootstrap result or a buffered result to the workers
//! that are behind, commit a checkpoint that some workers had already committed, or run the
//! call for real once everyone is at the same position. Outside of recovery no consensus round
//! runs: the header agreement every call already has checks that all positions are equal.

mod bootstrap;
mod consensus;
mod results;

pub use bootstrap::{BootstrapCache, BootstrapKey};
pub use consensus::{
    BootstrapDecision, Decision, MAX_LOOKUP_KEYS, PROPOSAL_WORDS, Proposal, Want, decide, decide_bootstrap,
};
pub use results::{ResultBuffer, StoredResult};

/// A position in the call sequence: `(checkpoint version, calls since it)`.
pub type Point = (u32, u32);

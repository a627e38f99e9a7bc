//! Retry-one recovery: what lets a job survive the loss of a worker without restarting.
//!
//! In robust mode every collective call has a position `(version, seq)`: `version` counts
//! checkpoints, `seq` the calls since the last one. Each worker keeps ([`RecoveryState`]) the
//! results of the calls since the last checkpoint ([`ResultBuffer`], spread over the workers
//! as the [`crate::membership::Placement`] says), the last checkpoint itself with replicas of
//! its ring predecessors' local models, and the results of *bootstrap* calls made before the
//! first checkpoint ([`BootstrapCache`]).
//!
//! When a link breaks, every worker learns it (a worker that sees a broken link closes all of
//! its own, so the news spreads through the links), re-links through the tracker, and enters
//! *consensus mode*: before each call it proposes what it wants ([`Proposal`]: run the call at
//! its position, load the checkpoint, a bootstrap result by key; and whether it lacks replicas
//! it should keep), all proposals are gathered on every worker, and [`plan()`] — a pure
//! function, so every worker reaches the same plan — says what happens next: transfers of
//! checkpoints, local models, bootstrap or buffered results to the workers that need them, a
//! commit of a checkpoint that some workers had already committed, or running the call for
//! real once everyone is at the same position and holds what it should. Outside of recovery no
//! consensus round runs: the header agreement every call already has checks that all positions
//! are equal.

mod bootstrap;
mod plan;
#[cfg(test)]
mod plan_props;
mod proposal;
mod results;
mod state;

pub use bootstrap::{BootstrapCache, BootstrapKey};
pub use plan::{Failure, Holdings, Item, Plan, Transfer, answer, plan};
pub use proposal::{PROPOSAL_WORDS, Proposal, Want};
pub use results::{ResultBuffer, StoredResult};
pub use state::{Prepared, RecoveryState, Replicas, Taken, check_served};

/// A position in the call sequence: `(checkpoint version, calls since it)`.
pub type Point = (u32, u32);

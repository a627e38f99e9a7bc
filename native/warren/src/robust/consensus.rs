//! Consensus after a re-link: what each worker wants ([`Proposal`]) and what happens next
//! ([`decide`]). Pure: every worker runs [`decide`] on the same gathered proposals and reaches
//! the same [`Decision`], so the data transfers that follow line up without more messages.
//!
//! Priorities (as in Rabit's action summary): first serve the checkpoint to workers loading it,
//! then bootstrap results by key, then commit a checkpoint some workers already committed, then
//! buffered results to the workers furthest behind; when every worker is at the same call,
//! run it.

use super::Point;
use crate::error::{CallMismatch, Declaration};
use crate::membership::{Placed, Placement};
use crate::proto::{COUNT_UNKNOWN, CallHeader};
use crate::topology::tree_distance;

/// Among `candidates`, the one nearest on the tree to the first of `to` (lowest rank on a tie).
fn nearest(candidates: impl Iterator<Item = usize>, to: &[usize]) -> Option<usize> {
    let target = to.first().copied().unwrap_or(0);
    candidates.min_by_key(|&c| (tree_distance(c, target), c))
}

/// What a worker wants to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Run (or be served) the call at its position.
    Execute,
    /// Run a checkpoint call at its position (the prepare or the ack phase).
    Checkpoint,
    /// Load the latest checkpoint (a restarted worker).
    LoadCheckpoint,
    /// Run (or be served) the bootstrap call with this key.
    Bootstrap,
}

/// One worker's proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// Its position.
    pub point: Point,
    /// What it wants.
    pub want: Want,
    /// Bootstrap key hash (0 when not a bootstrap call).
    pub key: u64,
    /// Hash of the call's identity (kind, type, op, root, tag), to check a replaying caller
    /// asks for the call that was made.
    pub call: u64,
    /// Payload length in bytes, or [`COUNT_UNKNOWN`].
    pub count: u64,
}

/// Number of `u64` words of an encoded proposal.
pub const PROPOSAL_WORDS: usize = 5;

impl Want {
    fn label(self) -> &'static str {
        match self {
            Want::Execute => "",
            Want::Checkpoint => "checkpoint ",
            Want::LoadCheckpoint => "load-checkpoint ",
            Want::Bootstrap => "bootstrap ",
        }
    }
}

impl Proposal {
    /// The identity hash of a call header (its position and size excluded).
    pub fn call_hash(h: &CallHeader) -> u64 {
        let mut x: u64 = 0xcbf2_9ce4_8422_2325;
        for v in [h.kind as u64, h.dtype as u64, h.op as u64, h.root as u64, h.tag as u64, h.elem_size as u64] {
            x ^= v;
            x = x.wrapping_mul(0x0100_0000_01b3);
        }
        x
    }

    /// Encodes into words; the top bit of word 1 marks a filled slot.
    pub fn encode(&self) -> [u64; PROPOSAL_WORDS] {
        let want = match self.want {
            Want::Execute => 1,
            Want::Checkpoint => 2,
            Want::LoadCheckpoint => 3,
            Want::Bootstrap => 4,
        };
        [((self.point.0 as u64) << 32) | self.point.1 as u64, (1 << 63) | want, self.key, self.call, self.count]
    }

    /// Decodes a slot; `None` if it was not filled or is malformed.
    pub fn decode(w: &[u64]) -> Option<Proposal> {
        if w.len() != PROPOSAL_WORDS || w[1] >> 63 != 1 {
            return None;
        }
        let want = match w[1] & 0xff {
            1 => Want::Execute,
            2 => Want::Checkpoint,
            3 => Want::LoadCheckpoint,
            4 => Want::Bootstrap,
            _ => return None,
        };
        Some(Proposal { point: ((w[0] >> 32) as u32, w[0] as u32), want, key: w[2], call: w[3], count: w[4] })
    }
}

/// What happens next, the same on every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Everyone is at the same call: run it.
    Execute,
    /// `server` sends checkpoint `version` to `to` (no transfer when `server` is `None`:
    /// nobody has a checkpoint, `to` start fresh).
    ServeCheckpoint {
        /// The worker with the latest checkpoint (lowest rank among equals).
        server: Option<usize>,
        /// Its version.
        version: u32,
        /// The workers loading.
        to: Vec<usize>,
    },
    /// Look up who holds which of the requested bootstrap `keys` (sorted, distinct, at most
    /// [`MAX_LOOKUP_KEYS`]), then [`decide_bootstrap`].
    LookupBootstrap {
        /// The requested keys.
        keys: Vec<u64>,
    },
    /// `to` are inside a checkpoint that others already committed: they commit too.
    CommitCheckpoint {
        /// The workers that commit.
        to: Vec<usize>,
    },
    /// `server` sends the buffered result of the call at `point` to `to`.
    ServeResult {
        /// The call.
        point: Point,
        /// A worker past that call (lowest rank).
        server: usize,
        /// The workers at that call.
        to: Vec<usize>,
    },
    /// The workers cannot agree on a call: a programming error, reported on every worker.
    Mismatch(CallMismatch),
    /// The data needed to recover is gone.
    Impossible {
        /// The ranks whose loss made it so.
        lost: Vec<usize>,
        /// What is gone.
        reason: String,
    },
}

fn ranks_where(props: &[Proposal], f: impl Fn(&Proposal) -> bool) -> Vec<usize> {
    props.iter().enumerate().filter(|(_, p)| f(p)).map(|(r, _)| r).collect()
}

/// Decides the next step from every worker's proposal (indexed by rank). Each call's result
/// is kept where `placement` puts it; data is served by the holder nearest on the tree to the
/// workers that need it.
pub fn decide(props: &[Proposal], placement: &Placement) -> Decision {
    use Decision::*;
    // Workers inside a checkpoint that others already committed commit first: until then their
    // replicas of the local models are the previous version's, and a loader must not get those.
    let running = |p: &Proposal| matches!(p.want, Want::Execute | Want::Checkpoint);
    let top = props.iter().filter(|p| running(p)).map(|p| p.point.0).max();
    if let Some(top) = top {
        let behind = ranks_where(props, |p| running(p) && p.point.0 + 1 == top && p.want == Want::Checkpoint);
        if !behind.is_empty() {
            return CommitCheckpoint { to: behind };
        }
    }
    let loaders = ranks_where(props, |p| p.want == Want::LoadCheckpoint);
    if !loaders.is_empty() {
        let version = props.iter().filter(|p| p.want != Want::LoadCheckpoint).map(|p| p.point.0).max().unwrap_or(0);
        if version == 0 {
            return ServeCheckpoint { server: None, version: 0, to: loaders };
        }
        let holders =
            (0..props.len()).filter(|&r| props[r].want != Want::LoadCheckpoint && props[r].point.0 == version);
        return ServeCheckpoint { server: nearest(holders, &loaders), version, to: loaders };
    }
    let mut keys: Vec<u64> = props.iter().filter(|p| p.want == Want::Bootstrap).map(|p| p.key).collect();
    keys.sort_unstable();
    keys.dedup();
    if !keys.is_empty() {
        keys.truncate(MAX_LOOKUP_KEYS);
        return LookupBootstrap { keys };
    }
    let minv = props.iter().map(|p| p.point.0).min().unwrap_or(0);
    let maxv = props.iter().map(|p| p.point.0).max().unwrap_or(0);
    if minv < maxv {
        let behind = ranks_where(props, |p| p.point.0 == minv);
        if maxv == minv + 1 && behind.iter().all(|&r| props[r].want == Want::Checkpoint) {
            return CommitCheckpoint { to: behind };
        }
        let r = behind[0];
        let reason = format!(
            "rank {r} replays call #{} of checkpoint version {minv}, but other workers are at version {maxv} and \
             results from before a checkpoint are gone (mark calls made before the first checkpoint as bootstrap \
             calls and enable the bootstrap cache)",
            props[r].point.1
        );
        return Impossible { lost: behind, reason };
    }
    let mins = props.iter().map(|p| p.point.1).min().unwrap_or(0);
    let maxs = props.iter().map(|p| p.point.1).max().unwrap_or(0);
    if mins < maxs {
        let to = ranks_where(props, |p| p.point.1 == mins);
        let keepers = placement.holders(Placed::Result(mins));
        let holders = keepers.iter().copied().filter(|&r| props[r].point.1 > mins);
        return match nearest(holders, &to) {
            Some(server) => ServeResult { point: (minv, mins), server, to },
            None => Impossible {
                reason: format!(
                    "the result of call #{mins} of version {minv} was kept only by ranks {keepers:?}, none of which \
                     has it now (raise WARREN_RESULT_REPLICAS, or 0 to keep every result on every worker)"
                ),
                lost: keepers,
            },
        };
    }
    let first = props[0];
    for (r, p) in props.iter().enumerate().skip(1) {
        let counts_agree = p.count == first.count || p.count == COUNT_UNKNOWN || first.count == COUNT_UNKNOWN;
        if p.want != first.want || p.call != first.call || !counts_agree {
            let declared = |rank: usize, p: &Proposal| Declaration {
                rank,
                call: format!("{}call {:#x} of {} bytes", p.want.label(), p.call, p.count),
            };
            let context = format!("after a recovery, at call #{} of version {}", first.point.1, first.point.0);
            return Mismatch(CallMismatch::new(declared(0, &first), declared(r, p), context));
        }
    }
    Execute
}

/// Most bootstrap keys looked up in one round (one bit each in a holder's answer).
pub const MAX_LOOKUP_KEYS: usize = 64;

/// What to do about the requested bootstrap keys once every worker said which it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapDecision {
    /// `server` sends its cached result for `key` to `to`.
    Serve {
        /// The key.
        key: u64,
        /// The lowest-ranked holder.
        server: usize,
        /// The requesters of that key.
        to: Vec<usize>,
    },
    /// Nobody has any of the keys and everyone is at the same bootstrap call: run it.
    Execute,
    /// Nobody has what is asked and the workers are at different calls.
    Impossible {
        /// The ranks waiting for results nobody has.
        lost: Vec<usize>,
        /// What is missing.
        reason: String,
    },
}

/// Decides how to go on with the requested bootstrap `keys`: `holds[r]` has bit `i` set if
/// rank `r` cached `keys[i]`. The first key someone holds is served (whoever asks for it);
/// if none is held and all workers are at the same bootstrap call, it runs.
pub fn decide_bootstrap(props: &[Proposal], keys: &[u64], holds: &[u64]) -> BootstrapDecision {
    for (i, &key) in keys.iter().enumerate() {
        let to = ranks_where(props, |p| p.want == Want::Bootstrap && p.key == key);
        if let Some(server) = nearest((0..holds.len()).filter(|&r| holds[r] >> i & 1 == 1), &to) {
            return BootstrapDecision::Serve { key, server, to };
        }
    }
    let first = &props[0];
    if props.iter().all(|p| p.want == Want::Bootstrap && p.key == first.key) {
        return BootstrapDecision::Execute;
    }
    let waiting: Vec<usize> = ranks_where(props, |p| p.want == Want::Bootstrap);
    let elsewhere: Vec<usize> = ranks_where(props, |p| p.want != Want::Bootstrap || p.key != props[waiting[0]].key);
    let reason = format!(
        "bootstrap calls requested by ranks {waiting:?} are cached by no worker, and ranks {elsewhere:?} are at other \
         calls (bootstrap calls must be made before the first checkpoint, by every worker, in an order that does not \
         depend on the worker)"
    );
    BootstrapDecision::Impossible { lost: waiting, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide_t(props: &[Proposal]) -> Decision {
        decide(props, &Placement::new(props.len(), 0, 2))
    }

    fn p(v: u32, s: u32, want: Want) -> Proposal {
        Proposal { point: (v, s), want, key: 0, call: 7, count: 16 }
    }

    fn boot(key: u64) -> Proposal {
        Proposal { point: (0, 0), want: Want::Bootstrap, key, call: 9, count: 8 }
    }

    #[test]
    fn encoding_round_trips_and_empty_slots_are_rejected() {
        for want in [Want::Execute, Want::Checkpoint, Want::LoadCheckpoint, Want::Bootstrap] {
            let x = Proposal { point: (3, 77), want, key: 12, call: 99, count: COUNT_UNKNOWN };
            assert_eq!(Proposal::decode(&x.encode()), Some(x));
        }
        assert_eq!(Proposal::decode(&[0; PROPOSAL_WORDS]), None);
    }

    #[test]
    fn everyone_at_the_same_call_executes() {
        assert_eq!(decide_t(&[p(2, 5, Want::Execute); 4]), Decision::Execute);
        assert_eq!(decide_t(&[p(2, 5, Want::Checkpoint); 3]), Decision::Execute);
    }

    #[test]
    fn loaders_are_served_the_latest_checkpoint_by_the_lowest_rank() {
        let props =
            [p(3, 4, Want::Execute), p(0, 0, Want::LoadCheckpoint), p(4, 0, Want::Execute), p(4, 0, Want::Execute)];
        // Ranks 2 and 3 have version 4; rank 3 is rank 1's child, so it serves.
        assert_eq!(decide_t(&props), Decision::ServeCheckpoint { server: Some(3), version: 4, to: vec![1] });
        let fresh = [p(0, 3, Want::Execute), p(0, 0, Want::LoadCheckpoint)];
        assert_eq!(decide_t(&fresh), Decision::ServeCheckpoint { server: None, version: 0, to: vec![1] });
    }

    #[test]
    fn workers_behind_are_served_buffered_results_in_order() {
        let props = [p(1, 7, Want::Execute), p(1, 2, Want::Execute), p(1, 8, Want::Execute), p(1, 2, Want::Execute)];
        assert_eq!(decide_t(&props), Decision::ServeResult { point: (1, 2), server: 0, to: vec![1, 3] });
    }

    #[test]
    fn the_nearest_holder_serves() {
        // 7 workers; rank 6 is behind; ranks 0..6 hold the result; rank 2 (its parent) is nearest.
        let mut props = vec![p(1, 5, Want::Execute); 7];
        props[6] = p(1, 4, Want::Execute);
        assert_eq!(decide_t(&props), Decision::ServeResult { point: (1, 4), server: 2, to: vec![6] });
        // With 2 replicas per result, call #4 is kept by ranks 4 and 0 (4 + 7/2 = 7 = 0 mod 7).
        assert_eq!(
            decide(&props, &Placement::new(7, 2, 2)),
            Decision::ServeResult { point: (1, 4), server: 0, to: vec![6] }
        );
        // Both keepers behind too: impossible, said so.
        props[0] = p(1, 4, Want::Execute);
        props[4] = p(1, 4, Want::Execute);
        assert!(
            matches!(decide(&props, &Placement::new(7, 2, 2)), Decision::Impossible { reason: m, lost } if m.contains("[0, 4]") && lost == vec![0, 4])
        );
    }

    #[test]
    fn a_checkpoint_committed_by_some_is_committed_by_all() {
        let props = [p(5, 0, Want::Execute), p(4, 9, Want::Checkpoint), p(5, 0, Want::Execute)];
        assert_eq!(decide_t(&props), Decision::CommitCheckpoint { to: vec![1] });
    }

    /// A worker still inside checkpoint 4 (committed by others as version 5) commits before a
    /// restarted worker is served version 5, so it never serves a version-4 replica.
    #[test]
    fn pending_checkpoints_commit_before_loaders_are_served() {
        let props = [p(5, 0, Want::Execute), p(0, 0, Want::LoadCheckpoint), p(4, 9, Want::Checkpoint)];
        assert_eq!(decide_t(&props), Decision::CommitCheckpoint { to: vec![2] });
        let after = [p(5, 0, Want::Execute), p(0, 0, Want::LoadCheckpoint), p(5, 0, Want::Execute)];
        assert!(matches!(decide_t(&after), Decision::ServeCheckpoint { version: 5, .. }));
    }

    #[test]
    fn replaying_a_call_from_before_the_checkpoint_is_impossible() {
        let props = [p(5, 0, Want::Execute), p(0, 1, Want::Execute)];
        assert!(
            matches!(decide_t(&props), Decision::Impossible { reason: m, lost } if m.contains("rank 1") && m.contains("bootstrap") && lost == vec![1])
        );
        let far = [p(7, 0, Want::Execute), p(5, 3, Want::Checkpoint)];
        assert!(matches!(decide_t(&far), Decision::Impossible { .. }));
    }

    #[test]
    fn different_calls_at_the_same_position_are_a_mismatch() {
        let mut b = p(1, 1, Want::Execute);
        b.call = 8;
        assert!(matches!(decide_t(&[p(1, 1, Want::Execute), b]), Decision::Mismatch(_)));
        let mut c = p(1, 1, Want::Execute);
        c.count = COUNT_UNKNOWN;
        assert_eq!(decide_t(&[p(1, 1, Want::Execute), c]), Decision::Execute);
    }

    #[test]
    fn bootstrap_requests_are_looked_up_together() {
        let props = [p(2, 3, Want::Execute), boot(50), boot(40), boot(40)];
        assert_eq!(decide_t(&props), Decision::LookupBootstrap { keys: vec![40, 50] });
        // Loading the checkpoint comes first.
        let props = [boot(40), p(0, 0, Want::LoadCheckpoint)];
        assert!(matches!(decide_t(&props), Decision::ServeCheckpoint { .. }));
    }

    #[test]
    fn bootstrap_lookup_outcomes() {
        let props = [p(2, 3, Want::Execute), boot(40), p(2, 3, Want::Execute)];
        assert_eq!(
            decide_bootstrap(&props, &[40], &[1, 0, 1]),
            BootstrapDecision::Serve { key: 40, server: 0, to: vec![1] }
        );
        assert!(matches!(decide_bootstrap(&props, &[40], &[0, 0, 0]), BootstrapDecision::Impossible { .. }));
        let all = [boot(40), boot(40)];
        assert_eq!(decide_bootstrap(&all, &[40], &[0, 0]), BootstrapDecision::Execute);
    }

    /// Survivors stuck in bootstrap call 30 (nobody finished it) while a restarted worker asks
    /// for call 50, which they finished: 50 is served first, then all run 30 together.
    #[test]
    fn a_held_key_is_served_before_one_nobody_has() {
        let props = [boot(30), boot(30), boot(50)];
        assert_eq!(decide_t(&props), Decision::LookupBootstrap { keys: vec![30, 50] });
        assert_eq!(
            decide_bootstrap(&props, &[30, 50], &[0b10, 0b10, 0]),
            BootstrapDecision::Serve { key: 50, server: 0, to: vec![2] }
        );
        let later = [boot(30), boot(30), boot(30)];
        assert_eq!(decide_bootstrap(&later, &[30], &[0, 0, 0]), BootstrapDecision::Execute);
    }
}

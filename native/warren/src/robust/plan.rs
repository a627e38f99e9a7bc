//! Recovery planning: from every worker's [`Proposal`] (and, when the plan depends on it,
//! what each worker holds) to a [`Plan`]: run the call, commit a checkpoint, move recovery data
//! (who sends what to whom), or fail on every worker. Pure: every worker plans from the same
//! gathered data and reaches the same plan, so the transfers that follow line up without more
//! messages. The engine only carries plans out.
//!
//! Priorities (as in Rabit's action summary):
//! 1. workers inside a checkpoint that others already committed commit it;
//! 2. restarted workers load the latest checkpoint: its global model, their own local model,
//!    and the replicas of their ring predecessors' local models they are to keep;
//! 3. bootstrap results, by key;
//! 4. buffered results, to the workers furthest behind;
//! 5. members serving joiners ([`Want::Serve`]) first give out missing replicas, then are
//!    released (the others propose again, at their call);
//! 6. with everyone at the same call, the calls must agree;
//! 7. workers lacking replicas they are to keep get them (a worker served a checkpoint's
//!    prepare phase instead of running it, say), so replication is whole before the job
//!    goes on;
//! 8. everyone runs the call.

use super::{Point, Proposal, Want};
use crate::error::CallMismatch;
use crate::membership::{Placed, Placement};
use crate::topology::tree_distance;

/// A piece of recovery data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// The global model of checkpoint `version`.
    Checkpoint {
        /// The version.
        version: u32,
    },
    /// The local model of `owner` at checkpoint `version` (the owner's copy or a replica).
    LocalModel {
        /// The owner's rank.
        owner: usize,
        /// The checkpoint version.
        version: u32,
    },
    /// The buffered result of the call at `point`.
    Result {
        /// The call's position.
        point: Point,
    },
    /// The cached result of the bootstrap call with this key.
    Bootstrap {
        /// The key's hash.
        key: u64,
    },
}

/// One step of a plan: `from` sends `item` to `to` (every worker takes part in agreeing on
/// its size; a call's result then goes to every worker, a checkpoint or a local model only
/// along the tree paths from `from` to `to`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// What moves.
    pub item: Item,
    /// A worker that holds it.
    pub from: usize,
    /// The workers that need it.
    pub to: Vec<usize>,
}

/// Why recovery fails on every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Two workers at the same call declared different calls (a programming error).
    Mismatch(CallMismatch),
    /// What some worker needs is held by no live worker.
    Impossible {
        /// The ranks whose loss made it so.
        lost: Vec<usize>,
        /// What is missing.
        reason: String,
    },
}

/// What happens next, the same on every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Everyone is at the same call and holds what it should: run the call.
    Execute,
    /// `to` are inside a checkpoint that others already committed: they commit it too.
    Commit {
        /// The workers that commit.
        to: Vec<usize>,
    },
    /// Nobody has a checkpoint yet: the loaders `to` start fresh.
    StartFresh {
        /// The workers loading.
        to: Vec<usize>,
    },
    /// Carry out these transfers in order, then propose again (a worker whose current call a
    /// transfer answered returns from it).
    Move(Vec<Transfer>),
    /// Nobody needs anything more: the workers serving ([`Want::Serve`]) go on; the others
    /// propose again, at their call.
    Release,
    /// The plan depends on who holds these items: gather every worker's [`answer`], then plan
    /// again with them.
    Ask(Vec<Item>),
    /// Fail on every worker.
    Fail(Failure),
}

/// Every worker's answer to the question which of `asked` it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    asked: Vec<Item>,
    /// Per worker, a bit set over `asked` (see [`answer`]).
    answers: Vec<Vec<u64>>,
}

impl Holdings {
    /// No answers yet.
    pub fn none() -> Holdings {
        Holdings::default()
    }

    /// The answers of every worker (indexed by rank) to `asked`.
    pub fn new(asked: Vec<Item>, answers: Vec<Vec<u64>>) -> Holdings {
        Holdings { asked, answers }
    }

    fn covers(&self, items: &[Item]) -> bool {
        self.asked == items
    }

    fn holds(&self, worker: usize, i: usize) -> bool {
        self.answers[worker].get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn holders(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.answers.len()).filter(move |&w| self.holds(w, i))
    }
}

/// One worker's answer to [`Plan::Ask`]: bit `i` set if it holds `asked[i]`.
pub fn answer(asked: &[Item], holds: impl Fn(&Item) -> bool) -> Vec<u64> {
    let mut words = vec![0u64; asked.len().div_ceil(64).max(1)];
    for (i, item) in asked.iter().enumerate() {
        if holds(item) {
            words[i / 64] |= 1 << (i % 64);
        }
    }
    words
}

/// Plans the next step from every worker's proposal (indexed by rank) and the holdings
/// gathered so far ([`Holdings::none`] at first). Data is served by the holder nearest on the
/// tree to the workers that need it; buffered results are looked for where `placement` keeps
/// them.
pub fn plan(props: &[Proposal], held: &Holdings, placement: &Placement) -> Plan {
    if let Some(to) = inside_committed_checkpoint(props) {
        return Plan::Commit { to };
    }
    if let Some(p) = load(props, held, placement) {
        return p;
    }
    if let Some(p) = bootstrap(props, held) {
        return p;
    }
    if let Some(p) = replay(props, placement) {
        return p;
    }
    if props.iter().any(|p| p.want == Want::Serve) {
        return match repair(props, held, placement) {
            None | Some(Plan::Execute) => Plan::Release,
            Some(p) => p,
        };
    }
    if let Some(m) = disagreement(props) {
        return Plan::Fail(Failure::Mismatch(m));
    }
    repair(props, held, placement).unwrap_or(Plan::Execute)
}

fn ranks_where(props: &[Proposal], f: impl Fn(&Proposal) -> bool) -> Vec<usize> {
    props.iter().enumerate().filter(|(_, p)| f(p)).map(|(r, _)| r).collect()
}

/// Among `candidates`, the one nearest on the tree to the first of `to` (lowest rank on a tie).
fn nearest(candidates: impl Iterator<Item = usize>, to: &[usize]) -> Option<usize> {
    let target = to.first().copied().unwrap_or(0);
    candidates.min_by_key(|&c| (tree_distance(c, target), c))
}

/// Workers inside a checkpoint that others already committed. They commit first: until then
/// what they hold is a version behind, and loaders are served the newest version.
fn inside_committed_checkpoint(props: &[Proposal]) -> Option<Vec<usize>> {
    let running = |p: &Proposal| matches!(p.want, Want::Execute | Want::Checkpoint);
    let top = props.iter().filter(|p| running(p)).map(|p| p.point.0).max()?;
    let behind = ranks_where(props, |p| running(p) && p.point.0 + 1 == top && p.want == Want::Checkpoint);
    (!behind.is_empty()).then_some(behind)
}

/// Items and the workers that need each, in the order first needed.
#[derive(Default)]
struct Needs(Vec<(Item, Vec<usize>)>);

impl Needs {
    fn add(&mut self, item: Item, worker: usize) {
        match self.0.iter_mut().find(|(i, _)| *i == item) {
            Some((_, to)) if to.contains(&worker) => {}
            Some((_, to)) => to.push(worker),
            None => self.0.push((item, vec![worker])),
        }
    }

    /// The local models `worker` keeps replicas of, at `version`.
    fn add_replicas(&mut self, worker: usize, version: u32, placement: &Placement) {
        for owner in placement.local_models_kept_by(worker) {
            self.add(Item::LocalModel { owner, version }, worker);
        }
    }

    /// One transfer per item from its nearest holder to the workers that lack it, once the
    /// holdings are known (else the question to ask).
    fn transfers(self, held: &Holdings, placement: &Placement) -> Result<Vec<Transfer>, Plan> {
        let items: Vec<Item> = self.0.iter().map(|(i, _)| *i).collect();
        if !held.covers(&items) {
            return Err(Plan::Ask(items));
        }
        let mut transfers = Vec::new();
        for (i, (item, mut to)) in self.0.into_iter().enumerate() {
            to.retain(|&w| !held.holds(w, i));
            if to.is_empty() {
                continue;
            }
            let from = nearest(held.holders(i), &to).ok_or_else(|| Plan::Fail(lost(item, placement)))?;
            transfers.push(Transfer { item, from, to });
        }
        Ok(transfers)
    }
}

/// The failure of an item nobody holds.
fn lost(item: Item, placement: &Placement) -> Failure {
    let Item::LocalModel { owner, version } = item else {
        return Failure::Impossible { lost: vec![], reason: format!("no live worker holds {item:?}") };
    };
    let replicas = placement.holders(Placed::LocalModel(owner));
    let reason = format!(
        "no live worker holds the local model of rank {owner} at version {version} (replicated on ranks {replicas:?}; \
         raise WARREN_LOCAL_REPLICAS to survive more simultaneous losses)"
    );
    Failure::Impossible { lost: std::iter::once(owner).chain(replicas).collect(), reason }
}

/// Restarted workers load the latest checkpoint, their local model and their replicas.
fn load(props: &[Proposal], held: &Holdings, placement: &Placement) -> Option<Plan> {
    let loaders = ranks_where(props, |p| p.want == Want::LoadCheckpoint);
    if loaders.is_empty() {
        return None;
    }
    let others = || (0..props.len()).filter(|&r| props[r].want != Want::LoadCheckpoint);
    let version = others().map(|r| props[r].point.0).max().unwrap_or(0);
    if version == 0 {
        return Some(Plan::StartFresh { to: loaders });
    }
    let server = nearest(others().filter(|&r| props[r].point.0 == version), &loaders).expect("someone has it");
    let mut needs = Needs::default();
    for &l in &loaders {
        needs.add(Item::LocalModel { owner: l, version }, l);
        needs.add_replicas(l, version, placement);
    }
    let checkpoint = Transfer { item: Item::Checkpoint { version }, from: server, to: loaders };
    Some(match needs.transfers(held, placement) {
        Ok(models) => Plan::Move(std::iter::once(checkpoint).chain(models).collect()),
        Err(plan) => plan,
    })
}

/// Bootstrap results by key: every requested key someone holds is served; if nobody holds any
/// and everyone is at the same bootstrap call, it is planned like any other call.
fn bootstrap(props: &[Proposal], held: &Holdings) -> Option<Plan> {
    let mut keys: Vec<u64> = props.iter().filter(|p| p.want == Want::Bootstrap).map(|p| p.key).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() {
        return None;
    }
    let items: Vec<Item> = keys.iter().map(|&key| Item::Bootstrap { key }).collect();
    if !held.covers(&items) {
        return Some(Plan::Ask(items));
    }
    let mut transfers = Vec::new();
    for (i, &key) in keys.iter().enumerate() {
        let to = ranks_where(props, |p| p.want == Want::Bootstrap && p.key == key);
        if let Some(from) = nearest(held.holders(i), &to) {
            transfers.push(Transfer { item: Item::Bootstrap { key }, from, to });
        }
    }
    if !transfers.is_empty() {
        return Some(Plan::Move(transfers));
    }
    let first = &props[0];
    if props.iter().all(|p| p.want == Want::Bootstrap && p.key == first.key) {
        return None; // everyone at the same bootstrap call: the same checks as any call, then run it
    }
    let waiting = ranks_where(props, |p| p.want == Want::Bootstrap);
    let elsewhere = ranks_where(props, |p| p.want != Want::Bootstrap || p.key != props[waiting[0]].key);
    let reason = format!(
        "bootstrap calls requested by ranks {waiting:?} are cached by no worker, and ranks {elsewhere:?} are at other \
         calls (bootstrap calls must be made before the first checkpoint, by every worker, in an order that does not \
         depend on the worker)"
    );
    Some(Plan::Fail(Failure::Impossible { lost: waiting, reason }))
}

/// Buffered results to the workers furthest behind.
fn replay(props: &[Proposal], placement: &Placement) -> Option<Plan> {
    let minv = props.iter().map(|p| p.point.0).min()?;
    let maxv = props.iter().map(|p| p.point.0).max()?;
    if minv < maxv {
        let behind = ranks_where(props, |p| p.point.0 == minv);
        let r = behind[0];
        let call = props[r].point.1;
        // At version 0 the usual cause is a restarted worker that started over instead of
        // loading the checkpoint its peers hold.
        let reason = if minv == 0 {
            format!(
                "rank {r} makes call #{call} from the start (checkpoint version 0), but the other workers are past \
                 checkpoint version {maxv}: a restarted worker must call load_checkpoint() (loadCheckpoint() on the \
                 JVM) before its calls and go on from the version it returns; calls it makes before that, the same \
                 on every run, must be bootstrap calls (the bootstrap cache keeps them unless \
                 WARREN_BOOTSTRAP_CACHE=0)"
            )
        } else {
            format!(
                "rank {r} replays call #{call} of checkpoint version {minv}, but other workers are at version {maxv} \
                 and results from before a checkpoint are gone (mark calls made before the first checkpoint as \
                 bootstrap calls; the bootstrap cache keeps them unless WARREN_BOOTSTRAP_CACHE=0)"
            )
        };
        return Some(Plan::Fail(Failure::Impossible { lost: behind, reason }));
    }
    let mins = props.iter().map(|p| p.point.1).min()?;
    if props.iter().all(|p| p.point.1 == mins) {
        return None;
    }
    let to = ranks_where(props, |p| p.point.1 == mins);
    let keepers = placement.holders(Placed::Result(mins));
    let holders = keepers.iter().copied().filter(|&r| props[r].point.1 > mins);
    Some(match nearest(holders, &to) {
        Some(from) => Plan::Move(vec![Transfer { item: Item::Result { point: (minv, mins) }, from, to }]),
        None => {
            let reason = format!(
                "the result of call #{mins} of version {minv} was kept only by ranks {keepers:?}, none of which has it \
                 now (raise WARREN_RESULT_REPLICAS, or 0 to keep every result on every worker)"
            );
            Plan::Fail(Failure::Impossible { lost: keepers, reason })
        }
    })
}

/// Workers at the same position that declared different calls.
fn disagreement(props: &[Proposal]) -> Option<CallMismatch> {
    let first = &props[0];
    let (r, other) = props
        .iter()
        .enumerate()
        .skip(1)
        .find(|(r, p)| p.want != first.want || p.key != first.key || first.call.merge(&p.call, 0, *r).is_err())?;
    let declared = |rank: usize, p: &Proposal| p.call.declaration(rank, None);
    let context = format!("after a recovery, at call #{} of version {}", first.point.1, first.point.0);
    Some(CallMismatch::new(declared(0, first), declared(r, other), context))
}

/// Workers lacking replicas they are to keep get them from the holders.
fn repair(props: &[Proposal], held: &Holdings, placement: &Placement) -> Option<Plan> {
    let mut needs = Needs::default();
    for (w, p) in props.iter().enumerate() {
        if let Some(version) = p.owed {
            needs.add_replicas(w, version, placement);
        }
    }
    if needs.0.is_empty() {
        return None;
    }
    Some(match needs.transfers(held, placement) {
        Ok(transfers) if transfers.is_empty() => Plan::Execute,
        Ok(transfers) => Plan::Move(transfers),
        Err(plan) => plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::header::{COUNT_UNKNOWN, CallHeader, CallKind, Numbering};
    use crate::reduce::{DataType, Op};

    fn call(v: u32, s: u32, kind: CallKind, count: u64) -> CallHeader {
        let seq = ((v as u64) << 32) | s as u64;
        CallHeader {
            seq,
            numbering: Numbering::Checkpointed,
            kind,
            dtype: DataType::F32,
            op: Op::Sum,
            elem_size: 4,
            root: 0,
            count,
            tag: 0,
        }
    }

    fn p(v: u32, s: u32, want: Want) -> Proposal {
        let kind = if want == Want::Checkpoint { CallKind::Checkpoint } else { CallKind::AllreduceTree };
        Proposal { point: (v, s), want, key: 0, call: call(v, s, kind, 16), owed: None }
    }

    fn boot(key: u64) -> Proposal {
        let mut c = call(0, 0, CallKind::Broadcast, 8);
        c.seq = key;
        Proposal { point: (0, 0), want: Want::Bootstrap, key, call: c, owed: None }
    }

    fn plan_t(props: &[Proposal]) -> Plan {
        plan(props, &Holdings::none(), &Placement::new(props.len(), 0, 2))
    }

    /// Plans with every worker answering by `holds(worker, item)`.
    fn plan_with(props: &[Proposal], placement: &Placement, holds: impl Fn(usize, &Item) -> bool) -> Plan {
        match plan(props, &Holdings::none(), placement) {
            Plan::Ask(items) => {
                let answers = (0..props.len()).map(|w| answer(&items, |i| holds(w, i))).collect();
                plan(props, &Holdings::new(items, answers), placement)
            }
            other => other,
        }
    }

    #[test]
    fn members_serving_joiners_load_them_then_are_released() {
        // After the commit of version 6: ranks 0-3 serve, rank 4 joined.
        let serve = p(6, 0, Want::Serve);
        let placement = Placement::new(5, 0, 1);
        let holds = |w: usize, i: &Item| w < 4 && matches!(i, Item::LocalModel { version: 6, .. });
        let props = [serve, serve, serve, serve, p(0, 0, Want::LoadCheckpoint)];
        let Plan::Move(t) = plan_with(&props, &placement, holds) else { panic!("the joiner is served") };
        // Rank 1, the joiner's tree parent, serves the checkpoint.
        assert_eq!(t[0], Transfer { item: Item::Checkpoint { version: 6 }, from: 1, to: vec![4] });
        // Loaded, the joiner is at its first call: the servers go on, it proposes again.
        let props = [serve, serve, serve, serve, p(6, 0, Want::Execute)];
        assert_eq!(plan_with(&props, &placement, holds), Plan::Release);
        assert_eq!(plan_t(&[serve; 3]), Plan::Release);
        // A server lacking replicas of its new ring predecessor gets them first.
        let mut owing = serve;
        owing.owed = Some(6);
        let props = [owing, serve, serve, serve, p(6, 0, Want::Execute)];
        let holds = |w: usize, i: &Item| w != 0 && matches!(i, Item::LocalModel { version: 6, .. });
        assert!(matches!(plan_with(&props, &placement, holds), Plan::Move(t) if t.iter().all(|t| t.to == vec![0])));
    }

    #[test]
    fn everyone_at_the_same_call_executes() {
        assert_eq!(plan_t(&[p(2, 5, Want::Execute); 4]), Plan::Execute);
        assert_eq!(plan_t(&[p(2, 5, Want::Checkpoint); 3]), Plan::Execute);
    }

    #[test]
    fn loaders_get_the_latest_checkpoint_their_model_and_their_replicas() {
        let props =
            [p(3, 4, Want::Execute), p(0, 0, Want::LoadCheckpoint), p(4, 0, Want::Execute), p(4, 0, Want::Execute)];
        let placement = Placement::new(4, 0, 2);
        assert!(matches!(plan(&props, &Holdings::none(), &placement), Plan::Ask(_)));
        // Holdings at version 4: ranks 2 and 3 (the others hold nothing of it).
        let holds = |w: usize, i: &Item| matches!(i, Item::LocalModel { version: 4, .. }) && w >= 2;
        let Plan::Move(t) = plan_with(&props, &placement, holds) else { panic!() };
        // Ranks 2 and 3 have version 4; rank 3 is rank 1's child, so it serves the checkpoint.
        assert_eq!(t[0], Transfer { item: Item::Checkpoint { version: 4 }, from: 3, to: vec![1] });
        let models: Vec<(usize, usize)> = t[1..]
            .iter()
            .map(|t| match t.item {
                Item::LocalModel { owner, version: 4 } => (owner, t.from),
                _ => panic!("{t:?}"),
            })
            .collect();
        // Its own model, then those of its predecessors 0 and 3 (rank 1 keeps them).
        assert_eq!(models, vec![(1, 3), (0, 3), (3, 3)]);
        let fresh = [p(0, 3, Want::Execute), p(0, 0, Want::LoadCheckpoint)];
        assert_eq!(plan_t(&fresh), Plan::StartFresh { to: vec![1] });
    }

    /// Two neighbours restarted together: the later one's replica of the earlier one's model
    /// comes from another holder, not from its owner (a loader itself).
    #[test]
    fn adjacent_loaders_get_each_others_replicas_from_other_holders() {
        let mut props = vec![p(2, 1, Want::Execute); 6];
        props[1] = p(0, 0, Want::LoadCheckpoint);
        props[2] = p(0, 0, Want::LoadCheckpoint);
        let placement = Placement::new(6, 0, 2);
        let holds = |w: usize, i: &Item| {
            let Item::LocalModel { owner, .. } = *i else { return false };
            w != 1 && w != 2 && (w == owner || placement.holders(Placed::LocalModel(owner)).contains(&w))
        };
        let Plan::Move(t) = plan_with(&props, &placement, holds) else { panic!() };
        let of_1 = t.iter().find(|t| t.item == Item::LocalModel { owner: 1, version: 2 }).unwrap();
        assert_eq!((of_1.from, of_1.to.clone()), (3, vec![1, 2]), "rank 3 holds rank 1's model; 1 and 2 need it");
        let of_2 = t.iter().find(|t| t.item == Item::LocalModel { owner: 2, version: 2 }).unwrap();
        assert_eq!(of_2.to, vec![2]);
    }

    #[test]
    fn a_model_nobody_holds_is_lost_naming_its_holders() {
        let mut props = vec![p(2, 1, Want::Execute); 5];
        props[4] = p(0, 0, Want::LoadCheckpoint);
        let placement = Placement::new(5, 0, 1);
        let Plan::Fail(Failure::Impossible { lost, reason }) = plan_with(&props, &placement, |_, _| false) else {
            panic!()
        };
        assert_eq!(lost, vec![4, 0]);
        assert!(reason.contains("local model of rank 4") && reason.contains("[0]"), "{reason}");
    }

    #[test]
    fn workers_behind_are_served_buffered_results_in_order() {
        let props = [p(1, 7, Want::Execute), p(1, 2, Want::Execute), p(1, 8, Want::Execute), p(1, 2, Want::Execute)];
        let want = Transfer { item: Item::Result { point: (1, 2) }, from: 0, to: vec![1, 3] };
        assert_eq!(plan_t(&props), Plan::Move(vec![want]));
    }

    #[test]
    fn the_nearest_result_holder_serves() {
        // 7 workers; rank 6 is behind; ranks 0..6 hold the result; rank 2 (its parent) is nearest.
        let mut props = vec![p(1, 5, Want::Execute); 7];
        props[6] = p(1, 4, Want::Execute);
        let served_by = |plan: Plan| match plan {
            Plan::Move(t) => t[0].from,
            other => panic!("{other:?}"),
        };
        assert_eq!(served_by(plan_t(&props)), 2);
        // With 2 replicas per result, call #4 is kept by ranks 4 and 0 (4 + 7/2 = 7 = 0 mod 7).
        let spread = Placement::new(7, 2, 2);
        assert_eq!(served_by(plan(&props, &Holdings::none(), &spread)), 0);
        // Both keepers behind too: impossible, said so.
        props[0] = p(1, 4, Want::Execute);
        props[4] = p(1, 4, Want::Execute);
        let Plan::Fail(Failure::Impossible { lost, reason }) = plan(&props, &Holdings::none(), &spread) else {
            panic!()
        };
        assert_eq!(lost, vec![0, 4]);
        assert!(reason.contains("[0, 4]"), "{reason}");
    }

    #[test]
    fn a_checkpoint_committed_by_some_is_committed_by_all_first() {
        let props = [p(5, 0, Want::Execute), p(4, 9, Want::Checkpoint), p(5, 0, Want::Execute)];
        assert_eq!(plan_t(&props), Plan::Commit { to: vec![1] });
        // Before a restarted worker is served version 5.
        let props = [p(5, 0, Want::Execute), p(0, 0, Want::LoadCheckpoint), p(4, 9, Want::Checkpoint)];
        assert_eq!(plan_t(&props), Plan::Commit { to: vec![2] });
    }

    #[test]
    fn replaying_a_call_from_before_the_checkpoint_is_impossible() {
        let props = [p(5, 0, Want::Execute), p(0, 1, Want::Execute)];
        let Plan::Fail(Failure::Impossible { lost, reason }) = plan_t(&props) else { panic!() };
        assert_eq!(lost, vec![1]);
        assert!(reason.contains("rank 1") && reason.contains("call load_checkpoint()"), "{reason}");
        let replaying = [p(7, 0, Want::Execute), p(5, 1, Want::Execute)];
        let Plan::Fail(Failure::Impossible { reason, .. }) = plan_t(&replaying) else { panic!() };
        assert!(reason.contains("version 5") && reason.contains("bootstrap calls"), "{reason}");
        let far = [p(7, 0, Want::Execute), p(5, 3, Want::Checkpoint)];
        assert!(matches!(plan_t(&far), Plan::Fail(Failure::Impossible { .. })));
    }

    #[test]
    fn different_calls_at_the_same_position_are_a_mismatch_naming_both() {
        let mut b = p(1, 1, Want::Execute);
        b.call.count = 20;
        let Plan::Fail(Failure::Mismatch(m)) = plan_t(&[p(1, 1, Want::Execute), b]) else { panic!() };
        assert_eq!((m.first.rank, m.second.rank), (0, 1));
        assert!(m.first.call.contains("16 bytes") && m.second.call.contains("20 bytes"), "{m}");
        let mut c = p(1, 1, Want::Execute);
        c.call.count = COUNT_UNKNOWN;
        assert_eq!(plan_t(&[p(1, 1, Want::Execute), c]), Plan::Execute);
    }

    #[test]
    fn bootstrap_requests_are_looked_up_together_and_held_keys_served() {
        let props = [p(2, 3, Want::Execute), boot(50), boot(40), boot(40)];
        let asked = vec![Item::Bootstrap { key: 40 }, Item::Bootstrap { key: 50 }];
        assert_eq!(plan_t(&props), Plan::Ask(asked));
        let placement = Placement::new(4, 0, 2);
        let Plan::Move(t) = plan_with(&props, &placement, |w, _| w == 0) else { panic!() };
        assert_eq!(
            t.iter().map(|t| (t.item, t.to.clone())).collect::<Vec<_>>(),
            vec![(Item::Bootstrap { key: 40 }, vec![2, 3]), (Item::Bootstrap { key: 50 }, vec![1])]
        );
        // Loading the checkpoint comes first.
        let props = [boot(40), p(0, 0, Want::LoadCheckpoint)];
        assert!(matches!(plan_t(&props), Plan::StartFresh { .. }));
    }

    /// Survivors stuck in bootstrap call 30 (nobody finished it) while a restarted worker asks
    /// for call 50, which they finished: 50 is served first, then all run 30 together.
    #[test]
    fn a_held_key_is_served_before_one_nobody_has() {
        let props = [boot(30), boot(30), boot(50)];
        let placement = Placement::new(3, 0, 2);
        let Plan::Move(t) = plan_with(&props, &placement, |w, i| w < 2 && *i == Item::Bootstrap { key: 50 }) else {
            panic!()
        };
        assert_eq!(t, vec![Transfer { item: Item::Bootstrap { key: 50 }, from: 0, to: vec![2] }]);
        assert_eq!(plan_with(&[boot(30); 3], &placement, |_, _| false), Plan::Execute);
        let stuck = [boot(30), p(0, 2, Want::Execute)];
        let Plan::Fail(Failure::Impossible { lost, .. }) = plan_with(&stuck, &placement, |_, _| false) else {
            panic!()
        };
        assert_eq!(lost, vec![0]);
    }

    /// A worker that was served a checkpoint's prepare phase lacks that checkpoint's replicas:
    /// it gets them from the owners (or other holders) before the call runs.
    #[test]
    fn a_worker_owing_replicas_gets_them_before_the_call_runs() {
        let mut props = vec![p(3, 5, Want::Checkpoint); 5];
        props[2].owed = Some(4);
        let placement = Placement::new(5, 0, 2);
        let holds = |w: usize, i: &Item| w != 2 && matches!(*i, Item::LocalModel { owner, version: 4 } if owner == w);
        let Plan::Move(t) = plan_with(&props, &placement, holds) else { panic!() };
        let expect = |owner| Transfer { item: Item::LocalModel { owner, version: 4 }, from: owner, to: vec![2] };
        assert_eq!(t, vec![expect(1), expect(0)]);
        // Nobody holds one of them: impossible, naming the owner and its replicas.
        let Plan::Fail(Failure::Impossible { lost, .. }) = plan_with(&props, &placement, |_, _| false) else {
            panic!()
        };
        assert_eq!(lost, vec![1, 2, 3]);
    }
}

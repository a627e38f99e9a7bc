//! Property tests of elastic membership, without sockets.
//!
//! [`Roster`]: random control requests (add, remove, restart, give up, registrations) between
//! decisions at increasing checkpoint versions, some versions asked about again. Checked: a
//! decision, asked again later, answers the same view; epochs go up by one per change; every
//! decided view lies within the limits; a removed task is in no view changed after its
//! removal until it is restarted; so a task that leaves and comes back does so in a later
//! epoch, and no task id takes part in one epoch twice.
//!
//! [`Roster`] against a reference model: random requests and registrations (before and after
//! the requests, joiners going away before they join), then a launcher that starts every
//! joining task and decisions until nothing is pending. Checked: each request is accepted
//! exactly when the reference (the target membership, the stopped and lost tasks, the limits)
//! says so; the roster always settles, with no request left waiting and no registered joiner
//! left outside the view, on the reference's membership. So nothing waits for a worker that
//! will never come, whatever the order of requests and registrations.
//!
//! [`Transition`]: random old and new views with sparse ids. Checked: members derive the same
//! transition from views read back from the wire in any order; new ranks are `0..n` once each;
//! each stayer's model goes to distinct new holders, never itself, as many as the placement
//! says; joiners never own a move.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Request(u8, u8, Option<u8>),
    Arrive(u8),
    Depart(u8),
    Decide,
    AskAgain(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, 0u8..8, proptest::option::of(0u8..4)).prop_map(|(c, t, at)| Op::Request(c, t, at)),
        (0u8..8).prop_map(Op::Arrive),
        (0u8..8).prop_map(Op::Depart),
        Just(Op::Decide),
        (0u8..32).prop_map(Op::AskAgain),
    ]
}

const CHANGES: [Change; 4] = [Change::Add, Change::Remove, Change::Restart, Change::GiveUp];

/// The ids of a view, as a `View` made from a possibly shuffled, serialised copy.
fn via_wire(v: &View, rotate: usize) -> View {
    let mut members = v.members().to_vec();
    let len = members.len().max(1);
    members.rotate_left(rotate % len);
    let json = serde_json::json!({ "epoch": v.epoch(), "members": members }).to_string();
    serde_json::from_str(&json).unwrap()
}

proptest! {
    #[test]
    fn roster_decisions_are_memoised_and_within_the_limits(
        start in 1usize..5, min in 1usize..4, extra in 0usize..3, ops in proptest::collection::vec(op(), 1..80),
    ) {
        let limits = Limits::new(min.min(start), start + extra);
        let ids: Vec<String> = (0..start).map(|i| i.to_string()).collect();
        let mut r = Roster::new(View::new(0, ids), limits).unwrap();
        let mut decided: BTreeMap<u32, View> = BTreeMap::new();
        // Task -> the version its removal is due at.
        let mut removed: BTreeMap<String, u32> = BTreeMap::new();
        // Task -> the latest version any of its accepted requests names: a task's requests
        // take effect in order, so none before an earlier one's version.
        let mut latest: BTreeMap<String, u32> = BTreeMap::new();
        let mut version = 0u32;
        let mut last = r.view().clone();
        for op in ops {
            match op {
                Op::Request(c, t, at) => {
                    let at = at.map(|a| version + u32::from(a));
                    let ok = r.request(CHANGES[c as usize], &t.to_string(), at).is_ok();
                    let due = if ok {
                        let l = latest.entry(t.to_string()).or_insert(0);
                        *l = (*l).max(at.unwrap_or(0));
                        *l
                    } else {
                        0
                    };
                    match CHANGES[c as usize] {
                        Change::Remove if ok => { removed.insert(t.to_string(), due); }
                        Change::Restart if ok => { removed.remove(&t.to_string()); }
                        _ => {}
                    }
                }
                Op::Arrive(t) => { let _ = r.arrived(&t.to_string()); }
                Op::Depart(t) => r.departed(&t.to_string()),
                Op::Decide => {
                    version += 1;
                    let v = r.decide(version);
                    prop_assert!(v.world() >= limits.min && v.world() <= limits.max, "{v:?} outside {limits:?}");
                    if v != last {
                        prop_assert_eq!(v.epoch(), last.epoch() + 1, "one epoch per change");
                    }
                    // A change leaves out every task whose removal is due, unless that task
                    // joins at this boundary (it leaves at a later one) or the view is at its
                    // minimum (the removal waits for a joiner).
                    if v != last {
                        for t in v.members() {
                            let due = removed.get(t).is_some_and(|&at| at <= version);
                            let excused = last.rank_of(t).is_none() || v.world() == limits.min;
                            prop_assert!(!due || excused, "removed task {} in {:?} at version {}", t, v, version);
                        }
                    }
                    decided.insert(version, v.clone());
                    last = v;
                }
                Op::AskAgain(back) => {
                    let v = version.saturating_sub(u32::from(back));
                    if let Some(first) = decided.get(&v) {
                        prop_assert_eq!(&r.decide(v), first, "version {} answered differently", v);
                    }
                }
            }
        }
        // Epochs of the decided views never go back: a task that leaves and comes back is in a
        // later epoch, never twice in one.
        let epochs: Vec<u64> = decided.values().map(View::epoch).collect();
        prop_assert!(epochs.windows(2).all(|w| w[0] <= w[1]));
        let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
        let mut by_epoch: BTreeMap<u64, &View> = BTreeMap::new();
        for v in decided.values() {
            if let Some(prev) = by_epoch.insert(v.epoch(), v) {
                prop_assert_eq!(prev, v, "one epoch, one membership");
            }
        }
        for v in by_epoch.values() {
            for t in v.members() {
                prop_assert!(seen.insert((t.clone(), v.epoch())));
            }
        }
    }

    #[test]
    fn roster_settles_on_the_requested_membership_in_any_interleaving(
        start in 1usize..5, min in 1usize..4, extra in 0usize..3, ops in proptest::collection::vec(op(), 1..60),
    ) {
        let limits = Limits::new(min.min(start), start + extra);
        let ids: Vec<String> = (0..start).map(|i| i.to_string()).collect();
        let mut r = Roster::new(View::new(0, ids.clone()), limits).unwrap();
        // The reference: who should be a member once everything asked has applied, and who
        // was removed or lost (only a restart brings those back).
        let mut target: BTreeSet<String> = ids.into_iter().collect();
        let (mut stopped, mut lost) = (BTreeSet::<String>::new(), BTreeSet::<String>::new());
        let mut version = 0u32;
        for op in ops {
            match op {
                Op::Request(c, t, at) => {
                    let (change, t) = (CHANGES[c as usize], t.to_string());
                    let at = at.map(|a| version + u32::from(a));
                    let in_past = at.is_some_and(|a| r.decided_version().is_some_and(|d| a <= d));
                    let known = stopped.contains(&t) || lost.contains(&t);
                    let expect = !in_past && match change {
                        Change::Add => !target.contains(&t) && !known && target.len() < limits.max,
                        Change::Restart => !target.contains(&t) && known && target.len() < limits.max,
                        Change::Remove => target.contains(&t) && target.len() > limits.min,
                        Change::GiveUp => target.contains(&t) && target.len() > limits.min
                            && r.view().rank_of(&t).is_some(),
                    };
                    let got = r.request(change, &t, at);
                    prop_assert_eq!(got.is_ok(), expect, "{:?} {} at {:?}: {:?}", change, t, at, got);
                    if expect {
                        stopped.remove(&t);
                        lost.remove(&t);
                        match change {
                            Change::Add | Change::Restart => { target.insert(t); }
                            Change::Remove => { target.remove(&t); stopped.insert(t); }
                            Change::GiveUp => { target.remove(&t); lost.insert(t); }
                        }
                    }
                }
                Op::Arrive(t) => {
                    let t = t.to_string();
                    // A lost task registering again is restarted, if there is room.
                    let comes_back = lost.contains(&t) && target.len() < limits.max && r.view().rank_of(&t).is_none();
                    let ok = r.arrived(&t).is_ok();
                    if comes_back {
                        prop_assert!(ok, "lost task {} registering again is refused", t);
                        lost.remove(&t);
                        target.insert(t);
                    }
                }
                Op::Depart(t) => r.departed(&t.to_string()),
                Op::Decide | Op::AskAgain(_) => {
                    version += 1;
                    r.decide(version);
                    // A dismissed joiner is one the reference has stopped or lost.
                    for t in r.take_dismissed() {
                        prop_assert!(!target.contains(&t), "member {} dismissed", t);
                    }
                }
            }
        }
        // The launcher starts every joining task, which registers; the workers go on from
        // checkpoint to checkpoint. Each boundary applies at least one pending request.
        for _ in 0..40 {
            for (t, state, _) in r.list() {
                if state == TaskState::Joining {
                    prop_assert!(r.arrived(&t).is_ok(), "joining task {} refused", t);
                }
            }
            version += 1;
            r.decide(version);
            // A dismissed joiner is one the reference has stopped or lost.
            for t in r.take_dismissed() {
                prop_assert!(!target.contains(&t), "member {} dismissed", t);
            }
        }
        prop_assert!(r.awaited_joiners(version + 1).is_empty(), "joiners still awaited: {:?}", r.list());
        let members: BTreeSet<String> = r.view().members().iter().cloned().collect();
        prop_assert_eq!(&members, &target, "settled on another membership: {:?}", r.list());
        for (t, state, _) in r.list() {
            let expected = if target.contains(&t) { TaskState::Running }
                else if lost.contains(&t) { TaskState::Lost } else { TaskState::Stopped };
            prop_assert_eq!(state, expected, "task {}", t);
        }
        // No registered joiner is left waiting outside the view.
        for t in 0u8..8 {
            let t = t.to_string();
            if r.view().rank_of(&t).is_none() {
                prop_assert!(r.state_of(&t) != Some(TaskState::Joining), "task {} still joining", t);
            }
        }
    }

    #[test]
    fn every_member_derives_the_same_transition(
        old in proptest::collection::btree_set(0u32..12, 1..8),
        new in proptest::collection::btree_set(0u32..12, 1..8),
        keep in 0u32..12, copies in 0usize..4, rotate in 0usize..8, per_host in 1u32..4,
    ) {
        let mut new = new;
        let keep = *old.iter().nth(keep as usize % old.len()).unwrap();
        new.insert(keep);
        let from = View::new(3, old.iter().map(u32::to_string));
        let to = View::new(4, new.iter().map(u32::to_string));
        let t = Transition::new(from.clone(), to.clone()).unwrap();
        let again = Transition::new(via_wire(&from, rotate), via_wire(&to, rotate + 1)).unwrap();
        prop_assert_eq!(&again, &t);
        // The new view's members on hosts of `per_host` consecutive task ids, as the tracker
        // fixes them for the view: the replicas follow the replica ring over those hosts.
        let hosts: Vec<String> = to.members().iter().map(|t| format!("h{}", t.parse::<u32>().unwrap() / per_host)).collect();
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let placement = Placement::on_hosts(&hosts, 0, copies);
        prop_assert_eq!(again.replica_moves(&placement), t.replica_moves(&placement));

        let mut new_ranks: Vec<usize> = Vec::new();
        for task in from.members().iter().chain(to.members()) {
            match t.role(task) {
                Role::Stays { old_rank, new_rank } => {
                    prop_assert_eq!(from.rank_of(task), Some(old_rank));
                    new_ranks.push(new_rank);
                }
                Role::Joins { new_rank } => {
                    prop_assert!(from.rank_of(task).is_none());
                    new_ranks.push(new_rank);
                }
                Role::Leaves { old_rank } => prop_assert!(to.rank_of(task).is_none() && old_rank < from.world()),
                Role::Outside => prop_assert!(false, "a member of a view is outside the transition"),
            }
        }
        new_ranks.sort_unstable();
        new_ranks.dedup();
        prop_assert_eq!(new_ranks, (0..to.world()).collect::<Vec<_>>());

        let n = to.world();
        for m in t.replica_moves(&placement) {
            prop_assert!(matches!(t.role(&to.members()[m.owner]), Role::Stays { .. }), "joiners own no model");
            prop_assert_eq!(m.to.len(), copies.min(n - 1));
            prop_assert!(m.to.iter().all(|&h| h < n && h != m.owner));
            let distinct: BTreeSet<usize> = m.to.iter().copied().collect();
            prop_assert_eq!(distinct.len(), m.to.len());
        }
    }
}

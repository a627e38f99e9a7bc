//! The join hold of an elastic job (I/O around
//! [`Registry::awaited_joiners`](super::Registry::awaited_joiners)): a boundary decision that
//! would admit a task added moments ago, whose process is still starting, waits for it to
//! register, for at most the hold after its `add`.
//!
//! Without it, an add lands one checkpoint interval late whenever the new worker registers
//! just after the next boundary was decided (its process start and registration take a few
//! hundred milliseconds, about a step of a 64 MiB model at N = 4 here): the members go on,
//! and the joiner waits for the boundary after. With it, the members' requests for the view
//! after that boundary are parked (their answers are queued, the members wait in
//! `checkpoint`) until the joiner registers or its hold runs out; either way every member
//! gets the same decision, so a membership schedule still gives one model. A hold is spent
//! once per request: a joiner that has not registered when it ends joins when it does, at a
//! later boundary, and later boundaries are not held for it.

use std::time::Instant;

use log::info;
use tokio::sync::mpsc::UnboundedSender;

use super::proto::FromTracker;
use super::replies::answer_view;
use super::state::{Parked, Shared, SharedState};

/// Until when the decision after `version` waits: `None` to decide now, else the end of the
/// latest hold among the joiners it would admit that have not registered yet.
pub(crate) fn hold_until(s: &Shared, version: u32, now: Instant) -> Option<Instant> {
    if s.join_hold.is_zero() {
        return None;
    }
    s.registry
        .awaited_joiners(version)
        .iter()
        .filter_map(|t| s.join_requested.get(t).map(|at| *at + s.join_hold))
        .filter(|until| *until > now)
        .max()
}

/// Parks `task_id`'s request for the view after `version` until `until` at the latest (a
/// joiner's registration may release it sooner: [`release`]).
pub(crate) fn park(
    state: &SharedState,
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    version: u32,
    until: Instant,
) {
    if !s.parked.iter().any(|p| p.version == version) {
        let awaited = s.registry.awaited_joiners(version);
        let left = until.saturating_duration_since(Instant::now());
        info!(
            "tracker: holding the view after checkpoint version {version} up to {left:.0?} for tasks {awaited:?} \
             (added, not registered yet)"
        );
    }
    s.parked.push(Parked { task_id: task_id.to_string(), version, tx: tx.clone() });
    wake_at(state, until);
}

/// Answers the parked requests whose hold is over (their joiners registered, or the hold
/// ran out); the others stay parked, with a wake-up at their hold's end. (A refused answer
/// ends that member's connection through its writer.)
pub(crate) fn release(state: &SharedState, s: &mut Shared) {
    let now = Instant::now();
    let mut latest: Option<Instant> = None;
    for p in std::mem::take(&mut s.parked) {
        match hold_until(s, p.version, now) {
            Some(until) => {
                latest = latest.max(Some(until));
                s.parked.push(p);
            }
            None => {
                let _ = answer_view(s, &p.tx, &p.task_id, p.version);
            }
        }
    }
    if let Some(until) = latest {
        wake_at(state, until);
    }
}

/// Re-examines the parked requests at `until` (a later add may have extended a hold: the
/// wake-up then parks again).
fn wake_at(state: &SharedState, until: Instant) {
    let state = state.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(until.into()).await;
        let mut guard = state.0.lock().unwrap();
        release(&state, &mut guard);
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::membership::{Change, Limits};
    use crate::tracker::server::control;
    use crate::tracker::state::new_state;

    /// An elastic job of tasks 0 and 1 under way, with a join hold of `hold`.
    fn running(hold: Duration) -> SharedState {
        let state = new_state(2, None, Some(Limits::new(1, 4)), hold);
        {
            let s = &mut state.0.lock().unwrap().registry;
            s.register("0", "127.0.0.1", 1);
            s.register("1", "127.0.0.1", 2);
            assert!(s.assigned());
        }
        state
    }

    #[test]
    fn a_boundary_waits_for_an_added_task_until_it_registers_or_its_hold_ends() {
        let state = running(Duration::from_secs(1));
        let s = &mut *state.0.lock().unwrap();
        let t0 = Instant::now();
        assert_eq!(hold_until(s, 3, t0), None, "nothing added: decide now");
        control(s, Change::Add, "2", None).unwrap();
        let requested = s.join_requested["2"];
        assert_eq!(hold_until(s, 3, t0), Some(requested + Duration::from_secs(1)));
        assert_eq!(hold_until(s, 3, requested + Duration::from_secs(1)), None, "the hold is over");
        s.registry.register("2", "127.0.0.1", 3);
        assert_eq!(hold_until(s, 3, t0), None, "registered: decide now");
        control(s, Change::Remove, "1", None).unwrap();
        assert_eq!(hold_until(s, 4, t0), None, "a leave never holds a boundary");
    }

    #[test]
    fn a_boundary_not_due_for_the_add_or_already_decided_is_not_held() {
        let state = running(Duration::from_secs(1));
        let s = &mut *state.0.lock().unwrap();
        let now = Instant::now();
        control(s, Change::Add, "2", Some(5)).unwrap();
        assert_eq!(hold_until(s, 4, now), None, "the add applies at version 5");
        assert!(hold_until(s, 5, now).is_some());
        s.registry.decide(5).unwrap();
        assert_eq!(hold_until(s, 5, now), None, "version 5 is decided: the members get that answer");
    }

    #[test]
    fn a_zero_hold_never_waits() {
        let state = running(Duration::ZERO);
        let s = &mut *state.0.lock().unwrap();
        control(s, Change::Add, "2", None).unwrap();
        assert_eq!(hold_until(s, 1, Instant::now()), None);
    }
}

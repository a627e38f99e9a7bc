//! What the tracker sends members that changes or reflects the job's state: assignments,
//! view decisions, refusals and the roster.

use std::time::Instant;

use log::info;
use tokio::sync::mpsc::UnboundedSender;

use super::proto::{EncodedOnce, FromTracker, Peers, TaskInfo};
use super::registry::Registry;
use super::state::Shared;
use crate::membership::View;

/// Sends every member of `view` its assignment: the view, everyone's addresses, its
/// incarnation (the connection's id) and the peer timeout; heartbeats are due from then on.
pub(crate) fn assign(s: &mut Shared, view: &View) {
    s.registry.fix_placement();
    // One copy of the view and the addresses for every member, encoded once: at 1,024 workers
    // a copy each was a million addresses cloned and encoded per round.
    let peers = EncodedOnce::new(Peers(s.registry.peers()));
    let shared_view = EncodedOnce::new(view.clone());
    let round = s.registry.rounds();
    let now = Instant::now();
    let peer_timeout_ms = s.liveness.as_ref().map_or(0, |l| l.timeout().as_millis().max(1) as u64);
    let elastic = s.registry.is_elastic();
    let version = s.registry.round_version();
    for tid in view.members() {
        if let Some((incarnation, t)) = s.conns.get(tid) {
            let recovered = s.restarted.contains(tid);
            let (view, peers, incarnation) = (shared_view.clone(), peers.clone(), *incarnation);
            let _ = t.send(FromTracker::Assignment {
                view,
                peers,
                round,
                recovered,
                incarnation,
                peer_timeout_ms,
                elastic,
                version,
            });
            let attempt = s.registry.attempt_of(tid).unwrap_or_default();
            if let Some(l) = s.liveness.as_mut() {
                l.expect(tid, incarnation, attempt, now);
            }
        }
    }
}

/// Refuses with `message`: tells the worker, and ends its connection.
pub(crate) fn refuse(tx: &UnboundedSender<FromTracker>, message: String) -> Result<(), String> {
    let _ = tx.send(FromTracker::Error { message: message.clone() });
    Err(message)
}

/// Tells a worker that another worker's final error ended the job ([`FromTracker::JobFailed`]);
/// its connection ends (`Err`, as for a refusal).
pub(crate) fn job_failed(tx: &UnboundedSender<FromTracker>, failure: &str) -> Result<(), String> {
    let _ = tx.send(FromTracker::JobFailed { message: failure.to_string() });
    Err(format!("the job has failed: {failure}"))
}

/// Answers a member's view request. A change opens the new view's link round (its joiners
/// in it, to be told they recover from the others); the answer is the same for every member.
/// A refusal ends the member's connection (`Err`; its writer stops after the error).
pub(crate) fn answer_view(
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    version: u32,
) -> Result<(), String> {
    let decision = match s.registry.decide(version) {
        Ok(d) => d,
        Err(message) => return refuse(tx, message),
    };
    if decision.changed {
        let v = &decision.view;
        info!(
            "tracker: after checkpoint version {version} (asked by task {task_id}) the view becomes epoch {}: {} workers {:?} (joining: {:?})",
            v.epoch(),
            v.world(),
            v.members(),
            decision.joiners
        );
        s.restarted.extend(decision.joiners.iter().cloned());
    }
    for t in &decision.dismissed {
        let message = format!(
            "task {t} was removed before it could join (the job had its maximum of {} workers until the removal \
             came due): it stops without having taken part",
            s.registry.roster().map_or(0, |r| r.limits().max)
        );
        info!("tracker: {message}");
        if let Some((_, joiner)) = s.conns.remove(t) {
            let _ = joiner.send(FromTracker::Left { message });
        }
    }
    let _ = tx.send(FromTracker::Decided { view: decision.view });
    Ok(())
}

/// The roster of an elastic job as `warren ctl list` shows it.
pub(crate) fn roster_reply(registry: &Registry) -> FromTracker {
    let Some(roster) = registry.roster() else {
        return FromTracker::Error { message: "the job is not elastic, or has not started yet".into() };
    };
    let limits = roster.limits();
    let tasks = roster
        .list()
        .into_iter()
        .map(|(task_id, state, rank)| TaskInfo { task_id, state: state.name().into(), rank })
        .collect();
    FromTracker::Roster { epoch: roster.view().epoch(), min: limits.min, max: limits.max, tasks }
}

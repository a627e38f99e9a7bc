//! The tracker's side of liveness (I/O around the pure [`Liveness`](super::liveness)):
//! heartbeats and the stall reports they carry, and fencing a worker that fell silent.
//!
//! A worker silent for the peer timeout is fenced: it leaves the membership as a lost worker
//! would (a new link round goes on without it, waiting for its replacement), its connection is
//! told it was fenced and closed, everything its incarnation sends later is refused, and the
//! other workers are told on their heartbeat connections, which ends the call they wait in.
//! Whoever runs the workers takes the fenced workers ([`super::Tracker::take_fenced`]: task id
//! and attempt) and replaces them as dead ones (`warren run` kills and restarts the process).
//!
//! A running worker whose tracker connection ends is lost at once, and its incarnation
//! refused; it is still watched until its task registers again, and fenced after the peer
//! timeout if it sends nothing meanwhile: the tracker cannot tell a dead process from one
//! whose connections closed under it and that then stopped (paused), and the runner, told
//! which attempt, ends it only if it still runs.

use std::time::{Duration, Instant};

use log::{info, warn};
use tokio::sync::mpsc::UnboundedSender;

use super::liveness::BeatOutcome;
use super::outcome::FencedWorker;
use super::proto::{FromTracker, Stall};
use super::registry::WorkerState;
use super::replies::refuse;
use super::state::{Shared, SharedState};
use crate::pause::overslept;

/// A heartbeat from `task_id`'s incarnation `incarnation`: noted and acknowledged, its new
/// stall report logged; refused (ending the connection) if fenced or unknown.
pub(crate) fn beat(
    s: &mut Shared,
    tx: &UnboundedSender<FromTracker>,
    task_id: &str,
    incarnation: u64,
    stall: Option<Stall>,
) -> Result<(), String> {
    let Some(l) = s.liveness.as_mut() else {
        return refuse(tx, "this tracker expects no heartbeats (its peer timeout is off)".into());
    };
    match l.beat(task_id, incarnation, stall, Instant::now()) {
        BeatOutcome::Fenced => refuse_fenced(tx, task_id),
        BeatOutcome::Unknown => {
            refuse(tx, format!("task {task_id} (incarnation {incarnation}) is not a running worker of this job"))
        }
        BeatOutcome::Noted(report) => {
            s.beat_conns.insert(task_id.to_string(), tx.clone());
            let _ = tx.send(FromTracker::Ack);
            if let Some(r) = report {
                let members = silent_members(s, task_id, &r);
                log_stall(s, task_id, &r, &members);
                if !members.is_empty() {
                    let _ = tx.send(FromTracker::Silent { seq: r.seq, members });
                }
            }
            Ok(())
        }
    }
}

/// Refuses anything from a fenced incarnation of `task_id` (and ends its connection).
pub(crate) fn refuse_fenced(tx: &UnboundedSender<FromTracker>, task_id: &str) -> Result<(), String> {
    let message = format!("task {task_id} was fenced by the tracker and replaced; nothing it sends is accepted");
    let _ = tx.send(FromTracker::Fenced { message: message.clone() });
    Err(message)
}

/// The members other than `task_id` silent at the tracker since its wait `r` began and not
/// stalled themselves: what the job waits on, whichever ranks the call waits for directly
/// (a paused worker two hops away, or two paused at once), each named with its silence.
fn silent_members(s: &Shared, task_id: &str, r: &Stall) -> Vec<String> {
    let (Some(view), Some(l)) = (s.registry.view(), s.liveness.as_ref()) else { return Vec::new() };
    let now = Instant::now();
    let waited = Duration::from_millis(r.waited_ms);
    view.members()
        .iter()
        .filter(|t| t.as_str() != task_id && !l.stalled(t))
        .filter_map(|t| {
            let silent = l.silent_for(t, now).filter(|d| *d >= waited)?;
            Some(format!("{} [no heartbeat for {silent:.1?}]", s.registry.identity(t)))
        })
        .collect()
}

/// Logs a stall report, naming the workers waited for, with their last heartbeat and whether
/// they report a stall themselves; one silent since the wait began is what the job waits on,
/// and so is every other member silent since then (`silent`).
fn log_stall(s: &Shared, task_id: &str, r: &Stall, silent: &[String]) {
    let now = Instant::now();
    let Some(view) = s.registry.view() else { return };
    let waited: Vec<String> = r
        .ranks
        .iter()
        .filter_map(|&rank| view.task_of(rank))
        .map(|t| {
            let l = s.liveness.as_ref().expect("stall reports come with heartbeats");
            let silent = l.silent_for(t, now);
            let heard = match silent {
                Some(d) => format!("last heartbeat {d:.1?} ago"),
                None => "no heartbeat expected".into(),
            };
            let why = if l.stalled(t) {
                "stalled itself"
            } else if silent.is_some_and(|d| d >= Duration::from_millis(r.waited_ms)) {
                "silent since this wait began: the job waits on it"
            } else {
                "no stall reported by it"
            };
            format!("{} [{heard}; {why}]", s.registry.identity(t))
        })
        .collect();
    let waited = if waited.is_empty() { "no named peer".to_string() } else { waited.join(", ") };
    let culprits = match silent {
        [] => String::new(),
        s => format!("; silent since this wait began: {}", s.join(", ")),
    };
    warn!(
        "tracker: stall: {} has waited {:.1} s in {}; waiting for {waited}{culprits}",
        s.registry.identity(task_id),
        r.waited_ms as f64 / 1000.0,
        r.call
    );
}

/// Fences every worker silent for longer than the peer timeout, checking a few times per
/// timeout, until the runtime stops. A check much later than due means the tracker itself did
/// not run (its process was stopped or frozen): that time is excused, not blamed on the workers.
pub(crate) async fn watchdog(state: SharedState, timeout: Duration) {
    let tick = (timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
    loop {
        let due = Instant::now() + tick;
        tokio::time::sleep(tick).await;
        let mut s = state.0.lock().unwrap();
        if s.outcome.is_some() {
            return;
        }
        let now = Instant::now();
        if let (Some(stopped), Some(l)) = (overslept(due, now, tick), s.liveness.as_mut()) {
            info!("tracker: it did not run for {stopped:.1?} (stopped or frozen): no worker is blamed for that time");
            l.excuse(stopped, now);
        }
        let late = s.liveness.as_ref().map(|l| l.overdue(now)).unwrap_or_default();
        for (task, silent) in late {
            fence(&mut s, &task, silent, timeout);
        }
    }
}

/// Fences `task`: it leaves as lost, is told so, and the others are told to go on without it.
/// A worker whose tracker connection was cut ([`Liveness::cut`](super::liveness::Liveness::cut))
/// and that sent no heartbeat since is fenced too, although already lost: its process may live
/// on, paused, and only its runner can end it.
fn fence(s: &mut Shared, task: &str, silent: Duration, timeout: Duration) {
    let cut = s.liveness.as_ref().is_some_and(|l| l.is_cut(task));
    if s.registry.state_of(task) != Some(WorkerState::Running) && !cut {
        if let Some(l) = s.liveness.as_mut() {
            l.forget(task);
        }
        return;
    }
    let who = s.registry.identity(task);
    let rank = s.registry.rank_of(task).unwrap_or(usize::MAX);
    let reason = if cut {
        format!(
            "{who} lost its tracker connection, sent no heartbeat for {silent:.1?} (peer timeout {timeout:?}) and \
             did not register again: its process may live on, paused or frozen"
        )
    } else {
        format!("no heartbeat from {who} for {silent:.1?} (peer timeout {timeout:?})")
    };
    warn!("tracker: fenced {who}: {reason}; the job goes on without it and waits for its replacement");
    let mut attempt = s.registry.attempt_of(task).unwrap_or_default();
    if let Some(l) = s.liveness.as_mut() {
        attempt = l.attempt_of(task).unwrap_or(attempt);
        l.fence(task);
    }
    if let Some((_, tx)) = s.conns.remove(task) {
        let message = format!("task {task} was fenced by the tracker ({reason}) and is being replaced");
        let _ = tx.send(FromTracker::Fenced { message });
    }
    if !cut {
        // A cut worker left the membership when its connection ended.
        s.registry.lost(task);
        s.restarted.remove(task);
    }
    s.beat_conns.remove(task);
    let round = s.registry.rounds();
    for tx in s.beat_conns.values() {
        let (task_id, reason) = (task.to_string(), reason.clone());
        let _ = tx.send(FromTracker::PeerFenced { rank, task_id, reason, round });
    }
    s.fenced_tasks.push(FencedWorker { task_id: task.to_string(), attempt });
    s.last_fence = Some((Instant::now(), task.to_string()));
    info!("tracker: task {task} is to be replaced (it is lost to the job until it registers again)");
}

//! The rejoin timeout of an elastic job (I/O around [`Registry::give_up`](super::Registry::give_up)):
//! a member lost for longer than the timeout without its replacement registering is given up
//! on (time the tracker itself did not run does not count). The view changes at once, so the
//! survivors waiting in the re-link round for it are assigned the view without it and roll
//! back to their last checkpoint in it; below the minimum number of workers the job fails with
//! an error naming the missing tasks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::proto::FromTracker;
use super::replies::assign;
use super::state::{SharedState, set_outcome};
use crate::pause::{excused, overslept};

/// Watches lost members until the job has an outcome, giving up on those lost for `timeout`.
pub(crate) async fn watchdog(state: SharedState, timeout: Duration) {
    let tick = (timeout / 10).clamp(Duration::from_millis(10), Duration::from_millis(200));
    let mut since: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        let due = Instant::now() + tick;
        tokio::time::sleep(tick).await;
        let mut guard = state.0.lock().unwrap();
        let s = &mut *guard;
        if s.outcome.is_some() {
            return;
        }
        let now = Instant::now();
        // The tracker itself did not run (stopped or frozen): a replacement could not register
        // meanwhile, so that time does not count against it.
        if let Some(stopped) = overslept(due, now, tick) {
            for at in since.values_mut() {
                *at = excused(*at, stopped, now);
            }
        }
        let lost = s.registry.lost_members();
        since.retain(|t, _| lost.contains(t));
        for t in &lost {
            since.entry(t.clone()).or_insert(now);
        }
        let overdue: Vec<String> =
            since.iter().filter(|(_, at)| now.duration_since(**at) >= timeout).map(|(t, _)| t.clone()).collect();
        if overdue.is_empty() {
            continue;
        }
        let by_rank = s.registry.rank_of(&overdue[0]).unwrap_or(0);
        match s.registry.give_up(&overdue) {
            Ok(complete) => {
                let view = s.registry.view().cloned().expect("an elastic job that lost a member has a view");
                info!(
                    "tracker: no replacement for tasks {overdue:?} within the rejoin timeout ({timeout:?}): going on \
                     without them in view epoch {} of {} workers {:?}",
                    view.epoch(),
                    view.world(),
                    view.members()
                );
                match complete {
                    Some(view) => {
                        assign(s, &view);
                        s.restarted.clear();
                    }
                    // Members not in the round may be linking in a view with the given-up
                    // task (lost right after the last round completed): they would wait for
                    // it until their deadline. Told a round opened, they re-link in this one.
                    None => {
                        let waiting = s.registry.round_members();
                        for (tid, (_, tx)) in s.conns.iter().filter(|(t, _)| !waiting.contains(t)) {
                            if view.rank_of(tid).is_some() {
                                let _ = tx.send(FromTracker::RoundStarted { by_rank });
                            }
                        }
                    }
                }
                for t in &overdue {
                    since.remove(t);
                }
            }
            Err(reason) => {
                let message = format!(
                    "no replacement for tasks {overdue:?} registered within the rejoin timeout ({timeout:?}), and {reason}"
                );
                warn!("tracker: job failed: {message}");
                for (_, tx) in s.conns.values() {
                    let _ = tx.send(FromTracker::Error { message: message.clone() });
                }
                set_outcome(&state, s, Err(message));
                return;
            }
        }
    }
}

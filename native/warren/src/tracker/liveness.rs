//! Which workers are alive, as the tracker sees it: the last heartbeat of each worker's
//! current incarnation, the stall it reports, and the incarnations fenced. Pure: the server
//! feeds it heartbeats and the clock, and acts on what it returns. Time the tracker itself did
//! not run (its process stopped or frozen) is [`excused`](Liveness::excuse): a worker is
//! fenced for its own silence, never for the tracker's.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::proto::Stall;
use crate::pause::excused;

/// What a heartbeat leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeatOutcome {
    /// From the current incarnation: noted. Carries its stall report when it is a new one
    /// (to be logged once).
    Noted(Option<Stall>),
    /// From a fenced incarnation: refuse it, and everything else it sends.
    Fenced,
    /// From no incarnation this tracker expects (not assigned yet, finished, or lost).
    Unknown,
}

#[derive(Debug, Clone)]
struct Pulse {
    incarnation: u64,
    /// The task attempt this incarnation registered as.
    attempt: u32,
    last: Instant,
    /// The stall of its last heartbeat, if any.
    stall: Option<Stall>,
    /// Its tracker connection ended while it ran ([`Liveness::cut`]): refused, still watched.
    cut: bool,
}

/// Heartbeat bookkeeping for a tracker with peer timeout `timeout`.
#[derive(Debug, Clone)]
pub struct Liveness {
    timeout: Duration,
    pulses: HashMap<String, Pulse>,
    fenced: HashSet<u64>,
}

impl Liveness {
    /// Fences a worker after `timeout` without a heartbeat.
    pub fn new(timeout: Duration) -> Liveness {
        Liveness { timeout, pulses: HashMap::new(), fenced: HashSet::new() }
    }

    /// The peer timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `task`'s incarnation `incarnation` (registered as attempt `attempt`) was told its
    /// assignment at `now`: heartbeats are due from it from now on (a re-assignment of the same
    /// incarnation restarts the clock).
    pub fn expect(&mut self, task: &str, incarnation: u64, attempt: u32, now: Instant) {
        let same = self.pulses.get(task).filter(|p| p.incarnation == incarnation);
        let stall = same.and_then(|p| p.stall.clone());
        self.pulses.insert(task.to_string(), Pulse { incarnation, attempt, last: now, stall, cut: false });
    }

    /// A heartbeat from `task`'s incarnation `incarnation` at `now`.
    pub fn beat(&mut self, task: &str, incarnation: u64, stall: Option<Stall>, now: Instant) -> BeatOutcome {
        if self.fenced.contains(&incarnation) {
            return BeatOutcome::Fenced;
        }
        let Some(p) = self.pulses.get_mut(task).filter(|p| p.incarnation == incarnation) else {
            return BeatOutcome::Unknown;
        };
        p.last = now;
        let new = stall.as_ref().filter(|s| p.stall.as_ref().is_none_or(|old| old.seq != s.seq)).cloned();
        p.stall = stall;
        BeatOutcome::Noted(new)
    }

    /// Whether `incarnation` was fenced.
    pub fn is_fenced(&self, incarnation: u64) -> bool {
        self.fenced.contains(&incarnation)
    }

    /// No more heartbeats are expected from `task` (it finished, or its connection closed).
    pub fn forget(&mut self, task: &str) {
        self.pulses.remove(task);
    }

    /// Fences `task`'s current incarnation: it is forgotten, and anything it sends from now on
    /// is refused. Returns the incarnation fenced.
    pub fn fence(&mut self, task: &str) -> Option<u64> {
        let p = self.pulses.remove(task)?;
        self.fenced.insert(p.incarnation);
        Some(p.incarnation)
    }

    /// `task`'s tracker connection ended while it was running. Its incarnation is refused from
    /// now on (a process that lives on stops at its next heartbeat), but it stays watched until
    /// the task registers again ([`gone`](Self::gone)): the tracker cannot tell a process
    /// that died from one whose connections closed under it and that then stopped (paused or
    /// frozen), so one that sends nothing for the timeout is [`overdue`](Self::overdue) like
    /// any silent worker, and fenced: its runner ends that attempt if it still runs.
    pub fn cut(&mut self, task: &str) {
        let Some(p) = self.pulses.get_mut(task) else { return };
        self.fenced.insert(p.incarnation);
        p.cut = true;
    }

    /// Whether `task`'s incarnation is [`cut`](Self::cut) and still watched.
    pub fn is_cut(&self, task: &str) -> bool {
        self.pulses.get(task).is_some_and(|p| p.cut)
    }

    /// The task of a cut incarnation registered again: the earlier incarnation is no longer
    /// watched. Does nothing to an incarnation that is not cut.
    pub fn gone(&mut self, task: &str) {
        if self.is_cut(task) {
            self.pulses.remove(task);
        }
    }

    /// The attempt `task`'s watched incarnation registered as.
    pub fn attempt_of(&self, task: &str) -> Option<u32> {
        self.pulses.get(task).map(|p| p.attempt)
    }

    /// The tracker did not run for `stopped` before `now` (its watchdog woke that much later
    /// than it asked): that time does not count as any worker's silence. Every watched worker's
    /// last heartbeat moves `stopped` later (never past `now`), so that heartbeats sent while
    /// the tracker was stopped, still to be read, are not late.
    pub fn excuse(&mut self, stopped: Duration, now: Instant) {
        for p in self.pulses.values_mut() {
            p.last = excused(p.last, stopped, now);
        }
    }

    /// Workers silent for longer than the timeout at `now`, with how long, longest first.
    pub fn overdue(&self, now: Instant) -> Vec<(String, Duration)> {
        let mut late: Vec<(String, Duration)> = self
            .pulses
            .iter()
            .map(|(t, p)| (t.clone(), now.saturating_duration_since(p.last)))
            .filter(|(_, silent)| *silent > self.timeout)
            .collect();
        late.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        late
    }

    /// How long `task` has been silent at `now` (`None` if no heartbeat is expected from it).
    pub fn silent_for(&self, task: &str, now: Instant) -> Option<Duration> {
        self.pulses.get(task).map(|p| now.saturating_duration_since(p.last))
    }

    /// Whether `task`'s last heartbeat reported a stall (it waits for others itself).
    pub fn stalled(&self, task: &str) -> bool {
        self.pulses.get(task).is_some_and(|p| p.stall.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(seq: u64) -> Stall {
        Stall { seq, call: "allreduce #1 on rank 0: child rank 1".into(), waited_ms: 10_000, ranks: vec![1] }
    }

    #[test]
    fn a_silent_worker_is_overdue_after_the_timeout() {
        let t0 = Instant::now();
        let mut l = Liveness::new(Duration::from_secs(3));
        l.expect("0", 1, 0, t0);
        l.expect("1", 2, 0, t0);
        assert_eq!(l.beat("0", 1, None, t0 + Duration::from_secs(2)), BeatOutcome::Noted(None));
        assert!(l.overdue(t0 + Duration::from_secs(3)).is_empty());
        let late = l.overdue(t0 + Duration::from_millis(4500));
        assert_eq!(late, vec![("1".to_string(), Duration::from_millis(4500))]);
        assert_eq!(l.silent_for("0", t0 + Duration::from_secs(4)), Some(Duration::from_secs(2)));
    }

    #[test]
    fn time_the_tracker_did_not_run_is_no_worker_s_silence() {
        let t0 = Instant::now();
        let mut l = Liveness::new(Duration::from_secs(4));
        l.expect("0", 1, 0, t0);
        l.expect("1", 2, 0, t0);
        assert_eq!(l.beat("1", 2, None, t0 + Duration::from_secs(3)), BeatOutcome::Noted(None));
        // The tracker stops 1 s after task 0's last heartbeat and runs again 12 s later.
        let woke = t0 + Duration::from_secs(13);
        assert_eq!(l.overdue(woke).len(), 2, "without the discount both would be fenced");
        l.excuse(Duration::from_secs(12), woke);
        assert!(l.overdue(woke).is_empty(), "{:?}", l.overdue(woke));
        assert_eq!(l.silent_for("0", woke), Some(Duration::from_secs(1)));
        assert_eq!(l.silent_for("1", woke), Some(Duration::ZERO), "never later than now");
        // Silence after the tracker runs again counts as before.
        let later = woke + Duration::from_millis(3500);
        assert_eq!(l.overdue(later), vec![("0".to_string(), Duration::from_millis(4500))]);
        assert_eq!(l.beat("1", 2, None, later), BeatOutcome::Noted(None));
    }

    #[test]
    fn a_fenced_incarnation_is_refused_and_its_replacement_is_not() {
        let t0 = Instant::now();
        let mut l = Liveness::new(Duration::from_secs(3));
        l.expect("1", 2, 0, t0);
        assert_eq!(l.fence("1"), Some(2));
        assert!(l.is_fenced(2));
        assert_eq!(l.beat("1", 2, None, t0), BeatOutcome::Fenced);
        assert!(l.overdue(t0 + Duration::from_secs(60)).is_empty(), "a fenced worker is not fenced twice");
        assert_eq!(l.beat("1", 7, None, t0), BeatOutcome::Unknown, "not expected before its assignment");
        l.expect("1", 7, 0, t0);
        assert_eq!(l.beat("1", 7, None, t0), BeatOutcome::Noted(None));
        l.forget("1");
        assert_eq!(l.beat("1", 7, None, t0), BeatOutcome::Unknown);
    }

    #[test]
    fn each_stall_report_is_new_once() {
        let t0 = Instant::now();
        let mut l = Liveness::new(Duration::from_secs(30));
        l.expect("0", 1, 0, t0);
        assert_eq!(l.beat("0", 1, Some(stall(1)), t0), BeatOutcome::Noted(Some(stall(1))));
        assert!(l.stalled("0"));
        assert_eq!(l.beat("0", 1, Some(stall(1)), t0), BeatOutcome::Noted(None));
        assert_eq!(l.beat("0", 1, Some(stall(2)), t0), BeatOutcome::Noted(Some(stall(2))));
        assert_eq!(l.beat("0", 1, None, t0), BeatOutcome::Noted(None));
        assert!(!l.stalled("0"));
    }

    #[test]
    fn a_cut_worker_is_refused_and_overdue_when_silent_until_its_task_registers_again() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(3);
        let mut l = Liveness::new(timeout);
        // Task 1's tracker connection ends: refused, but watched (a paused process, or one
        // whose connections closed under it and that stopped later, looks just like this).
        l.expect("1", 11, 2, t0);
        assert_eq!(l.beat("1", 11, None, t0), BeatOutcome::Noted(None));
        l.cut("1");
        assert!(l.is_cut("1") && l.is_fenced(11));
        assert_eq!(l.beat("1", 11, None, t0 + Duration::from_secs(1)), BeatOutcome::Fenced);
        assert_eq!(l.attempt_of("1"), Some(2), "the attempt of the incarnation cut");
        let late = l.overdue(t0 + Duration::from_secs(4));
        assert_eq!(late, vec![("1".to_string(), Duration::from_secs(4))], "a refused beat is no sign of life");
        assert_eq!(l.fence("1"), Some(11));
        assert!(!l.is_cut("1") && l.overdue(t0 + Duration::from_secs(60)).is_empty(), "fenced once");

        // Task 3 is cut, then registers again: the old incarnation is no longer watched.
        l.expect("3", 13, 0, t0);
        l.cut("3");
        l.gone("3");
        assert!(!l.is_cut("3") && l.overdue(t0 + Duration::from_secs(60)).is_empty());
        assert!(l.is_fenced(13), "the old incarnation stays refused");

        // `gone` leaves a worker that is not cut alone.
        l.expect("4", 14, 0, t0);
        l.gone("4");
        assert_eq!(l.beat("4", 14, None, t0), BeatOutcome::Noted(None));
    }
}

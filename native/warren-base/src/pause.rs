//! Time a process did not run itself, pure: every liveness watch (a worker's heartbeat thread,
//! the tracker's watchdog, the master's clock, a parameter server's waits) wakes at times it
//! chose, and a wake much later than asked means the whole process was stopped (SIGSTOP, a
//! frozen VM) or starved. Silence from others during that time is not theirs to answer for.

use std::time::{Duration, Instant};

/// How much later than `due` a wait woke at `now`, if by more than `slack` (the process was
/// stopped meanwhile); `None` for a wake on time, early, or late by no more than `slack`.
/// A watch that gets `Some(late)` discounts `late` from the silence it blames on others.
pub fn overslept(due: Instant, now: Instant, slack: Duration) -> Option<Duration> {
    let late = now.saturating_duration_since(due);
    (late > slack).then_some(late)
}

/// When a silence that began at `since` began, as a watch counts it once it learns that it did
/// not run itself for `stopped` before `now`: that much later, but never later than `now`.
pub fn excused(since: Instant, stopped: Duration, now: Instant) -> Instant {
    since.checked_add(stopped).map_or(now, |t| t.min(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wake_later_than_the_slack_counts_as_a_pause() {
        let t0 = Instant::now();
        let slack = Duration::from_millis(100);
        assert_eq!(overslept(t0, t0, slack), None);
        assert_eq!(overslept(t0 + Duration::from_secs(1), t0, slack), None, "early");
        assert_eq!(overslept(t0, t0 + slack, slack), None, "late by the slack");
        let stopped = Duration::from_secs(8);
        assert_eq!(overslept(t0, t0 + stopped, slack), Some(stopped));
    }

    #[test]
    fn a_silence_excused_starts_later_but_not_after_now() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(excused(t0, s(8), t0 + s(9)), t0 + s(8));
        assert_eq!(excused(t0 + s(5), s(8), t0 + s(9)), t0 + s(9), "heard from during the pause");
    }
}

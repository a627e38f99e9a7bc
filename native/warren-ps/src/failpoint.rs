//! Failure injection for tests and demos: `WARREN_PS_MOCK` names the points of a trainer's
//! pushes and pulls where it kills itself with SIGKILL (a real crash, nothing runs after it).
//!
//! `WARREN_PS_MOCK=entry[;entry...]`, each entry `trainer,step,point,attempt`: trainer
//! `trainer`, in attempt `attempt` of its task (0: the first run; a replacement started by
//! `warren run` is attempt 1), dies at `point` of its step `step`, one of
//! - `before-push`: at the start of the push (nothing of it sent);
//! - `staged`: the push staged at every server, committed at none (async and SSP pushes
//!   count on arrival: there it is counted at every server);
//! - `half-committed`: the push committed at server 0 only (staged at the others; async and
//!   SSP: sent to server 0 only);
//! - `after-push`: the push committed everywhere, before the next call;
//! - `mid-pull`: a pull sent to the servers, its replies not read.

use warren_base::error::{Error, Result};

/// A point of a trainer's step where it can be made to die (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailPoint {
    /// The start of a push.
    BeforePush,
    /// The push staged at every server, committed at none.
    Staged,
    /// The push committed at server 0 only.
    HalfCommitted,
    /// The push committed at every server.
    AfterPush,
    /// A pull sent, its replies not read.
    MidPull,
}

const NAMES: [(&str, FailPoint); 5] = [
    ("before-push", FailPoint::BeforePush),
    ("staged", FailPoint::Staged),
    ("half-committed", FailPoint::HalfCommitted),
    ("after-push", FailPoint::AfterPush),
    ("mid-pull", FailPoint::MidPull),
];

impl FailPoint {
    /// Every point, in the order of a step.
    pub const ALL: [FailPoint; 5] =
        [FailPoint::MidPull, FailPoint::BeforePush, FailPoint::Staged, FailPoint::HalfCommitted, FailPoint::AfterPush];

    /// The point's name in `WARREN_PS_MOCK`.
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every point is named")
    }
}

/// One injected failure: `trainer` dies at `point` of step `step` in attempt `attempt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PsMock {
    /// The trainer id.
    pub trainer: u32,
    /// The trainer's step.
    pub step: u64,
    /// Where in the step.
    pub point: FailPoint,
    /// Which attempt of the trainer's task dies.
    pub attempt: u32,
}

impl std::fmt::Display for PsMock {
    /// The entry as written in `WARREN_PS_MOCK`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{},{}", self.trainer, self.step, self.point.name(), self.attempt)
    }
}

/// Parses a `WARREN_PS_MOCK` value (see the module documentation).
pub fn parse(spec: &str) -> Result<Vec<PsMock>> {
    spec.split(';').map(str::trim).filter(|e| !e.is_empty()).map(parse_entry).collect()
}

fn parse_entry(entry: &str) -> Result<PsMock> {
    let names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
    let bad = || {
        Error::Config(format!(
            "WARREN_PS_MOCK: {entry:?} is not trainer,step,point,attempt (point one of {})",
            names.join(", ")
        ))
    };
    let parts: Vec<&str> = entry.split(',').map(str::trim).collect();
    let [trainer, step, point, attempt] = parts[..] else { return Err(bad()) };
    let point = NAMES.iter().find(|(n, _)| *n == point).map(|(_, p)| *p).ok_or_else(bad)?;
    Ok(PsMock {
        trainer: trainer.parse().map_err(|_| bad())?,
        step: step.parse().map_err(|_| bad())?,
        point,
        attempt: attempt.parse().map_err(|_| bad())?,
    })
}

/// Kills this process with SIGKILL, saying where first (on stderr).
pub(crate) fn die(trainer: Option<u32>, step: u64, point: FailPoint) -> ! {
    eprintln!("WARREN_PS_MOCK: trainer {trainer:?} dies at step {step}, {}", point.name());
    // SAFETY: kill(2) on our own pid with SIGKILL; nothing runs after it.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    unreachable!("SIGKILL is not delivered late to the process sending it to itself")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_print_back() {
        let m = parse("1,7,half-committed,0; 3,0,mid-pull,1").unwrap();
        assert_eq!(m[0], PsMock { trainer: 1, step: 7, point: FailPoint::HalfCommitted, attempt: 0 });
        assert_eq!(m.iter().map(ToString::to_string).collect::<Vec<_>>(), ["1,7,half-committed,0", "3,0,mid-pull,1"]);
        for bad in ["1,7,sideways,0", "1,7,staged", "x,7,staged,0"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("WARREN_PS_MOCK") && e.contains("before-push, staged"), "{bad}: {e}");
        }
    }
}

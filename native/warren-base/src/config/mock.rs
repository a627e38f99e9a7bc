//! Failure injection for tests and demos: `WARREN_MOCK` names the points where a worker exits
//! abruptly (`_exit`, like a crash), or is cut off from the tracker, by rank, point and attempt.
//!
//! `WARREN_MOCK=entry[;entry...]`, each entry one of
//! - `rank,version,seq,attempt`: at the start of ordinary call `seq` (counted from 0 after
//!   each checkpoint; a checkpoint is two calls, its prepare and its ack) after checkpoint
//!   `version`;
//! - `rank,version,seq,attempt,ring`: in the middle of that call, a ring allreduce: the
//!   worker forwards only half of each range of final values and exits once it has received
//!   half of the first one (no worker completes the call, each holds part of the result, and
//!   the retry resumes from those parts);
//! - `rank,bootstrap:n,attempt`: at the start of the worker's `n`-th bootstrap call (from 0);
//! - `rank,linking,attempt`: after registering with the tracker, before linking to the peers;
//! - `rank,finalize,attempt`: at the start of `finalize`, its last calls done, before the
//!   final barrier where the members wait for each other;
//! - `rank,shutdown,attempt`: in `finalize`, past the final barrier, before the worker tells
//!   the tracker it finished;
//! - `rank,resize,attempt`: in an elastic job, when the tracker has answered a change of view
//!   at a checkpoint boundary, before this member enters the new view's link round;
//! - `rank,rollback,attempt`: in an elastic job, when a re-link round was assigned a view
//!   without a member given up on, before the survivors agree on the checkpoint to go on from;
//!
//! each optionally followed by `,cut`: instead of exiting, the worker is cut off from the
//! tracker from that point on, as behind a link that drops every packet: its heartbeats stop
//! (the tracker fences it after the peer timeout) and it hears nothing from the tracker (it
//! fences itself after the peer timeout), while the process and its peer links go on.

use crate::error::{Error, Result};

/// A point in a worker's life where it can be made to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The start of ordinary call `seq` after checkpoint `version`.
    Call {
        /// Checkpoints committed before the call.
        version: u32,
        /// Calls since the last checkpoint.
        seq: u32,
    },
    /// The middle of ordinary call `seq` after checkpoint `version`, a ring allreduce.
    InRing {
        /// Checkpoints committed before the call.
        version: u32,
        /// Calls since the last checkpoint.
        seq: u32,
    },
    /// The start of the worker's `n`-th bootstrap call (from 0).
    Bootstrap(u32),
    /// Registered with the tracker, not yet linked to the peers.
    Linking,
    /// The start of `finalize`: every call made, the final barrier not yet entered.
    Finalize,
    /// In `finalize`, past the final barrier: the tracker not yet told this worker finished.
    Shutdown,
    /// Elastic: a change of view decided at a checkpoint boundary, not yet entered.
    Resize,
    /// Elastic: a view without a member given up on assigned, the roll-back not yet agreed.
    RollBack,
}

/// What an injected failure does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Action {
    /// The process exits at once (`_exit`), like a crash.
    #[default]
    Exit,
    /// The worker is cut off from the tracker: no heartbeat leaves, no answer is read.
    Cut,
}

/// One injected failure: the worker of `rank` fails at `point` in attempt `attempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mock {
    /// Rank of the worker.
    pub rank: usize,
    /// Where it fails.
    pub point: Point,
    /// Which attempt of its task fails (0: the first run).
    pub attempt: u32,
    /// How it fails.
    pub action: Action,
}

impl Mock {
    /// Whether this entry names the worker of `rank` in `attempt` at `point`.
    pub fn matches(&self, rank: usize, point: Point, attempt: u32) -> bool {
        (self.rank, self.point, self.attempt) == (rank, point, attempt)
    }
}

impl std::fmt::Display for Mock {
    /// The entry as written in `WARREN_MOCK`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Mock { rank, point, attempt, action } = self;
        match point {
            Point::Call { version, seq } => write!(f, "{rank},{version},{seq},{attempt}")?,
            Point::InRing { version, seq } => write!(f, "{rank},{version},{seq},{attempt},ring")?,
            Point::Bootstrap(n) => write!(f, "{rank},bootstrap:{n},{attempt}")?,
            Point::Linking => write!(f, "{rank},linking,{attempt}")?,
            Point::Finalize => write!(f, "{rank},finalize,{attempt}")?,
            Point::Shutdown => write!(f, "{rank},shutdown,{attempt}")?,
            Point::Resize => write!(f, "{rank},resize,{attempt}")?,
            Point::RollBack => write!(f, "{rank},rollback,{attempt}")?,
        }
        match action {
            Action::Exit => Ok(()),
            Action::Cut => write!(f, ",cut"),
        }
    }
}

/// Parses a `WARREN_MOCK` value (see the module documentation).
pub fn parse(spec: &str) -> Result<Vec<Mock>> {
    spec.split(';').map(str::trim).filter(|e| !e.is_empty()).map(parse_entry).collect()
}

fn parse_entry(entry: &str) -> Result<Mock> {
    let bad = || {
        Error::Config(format!(
            "{}: {entry:?} is none of rank,version,seq,attempt[,ring] / rank,bootstrap:n,attempt / rank,linking,attempt \\
             / rank,finalize,attempt / rank,shutdown,attempt / rank,resize,attempt / rank,rollback,attempt (each optionally followed by ,cut)",
            crate::config::keys::MOCK
        ))
    };
    let mut f: Vec<&str> = entry.split(',').map(str::trim).collect();
    let action = if f.len() > 3 && f.last() == Some(&"cut") {
        f.pop();
        Action::Cut
    } else {
        Action::Exit
    };
    let num = |s: &str| s.parse::<u32>().map_err(|_| bad());
    let (rank, point, attempt) = match f.as_slice() {
        [rank, version, seq, attempt] => (rank, Point::Call { version: num(version)?, seq: num(seq)? }, attempt),
        [rank, version, seq, attempt, "ring"] => {
            (rank, Point::InRing { version: num(version)?, seq: num(seq)? }, attempt)
        }
        [rank, "linking", attempt] => (rank, Point::Linking, attempt),
        [rank, "finalize", attempt] => (rank, Point::Finalize, attempt),
        [rank, "shutdown", attempt] => (rank, Point::Shutdown, attempt),
        [rank, "resize", attempt] => (rank, Point::Resize, attempt),
        [rank, "rollback", attempt] => (rank, Point::RollBack, attempt),
        [rank, boot, attempt] => {
            let n = boot.strip_prefix("bootstrap:").ok_or_else(bad)?;
            (rank, Point::Bootstrap(num(n.trim())?), attempt)
        }
        _ => return Err(bad()),
    };
    if matches!(point, Point::InRing { .. }) && action == Action::Cut {
        return Err(bad());
    }
    Ok(Mock { rank: rank.parse().map_err(|_| bad())?, point, attempt: num(attempt)?, action })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_entry_parses_and_prints_back() {
        let spec = "0,1,2,0; 4,bootstrap:1,0 ;1,linking,1;2,5,0,0,cut; 3,linking,0, cut;1,resize,0;2,rollback,1;3,2,1,0,ring;0,finalize,2;1,shutdown,0";
        let m = parse(spec).unwrap();
        let exit = Action::Exit;
        assert_eq!(
            m,
            vec![
                Mock { rank: 0, point: Point::Call { version: 1, seq: 2 }, attempt: 0, action: exit },
                Mock { rank: 4, point: Point::Bootstrap(1), attempt: 0, action: exit },
                Mock { rank: 1, point: Point::Linking, attempt: 1, action: exit },
                Mock { rank: 2, point: Point::Call { version: 5, seq: 0 }, attempt: 0, action: Action::Cut },
                Mock { rank: 3, point: Point::Linking, attempt: 0, action: Action::Cut },
                Mock { rank: 1, point: Point::Resize, attempt: 0, action: exit },
                Mock { rank: 2, point: Point::RollBack, attempt: 1, action: exit },
                Mock { rank: 3, point: Point::InRing { version: 2, seq: 1 }, attempt: 0, action: exit },
                Mock { rank: 0, point: Point::Finalize, attempt: 2, action: exit },
                Mock { rank: 1, point: Point::Shutdown, attempt: 0, action: exit },
            ]
        );
        let printed: Vec<String> = m.iter().map(Mock::to_string).collect();
        assert_eq!(
            printed.join(";"),
            "0,1,2,0;4,bootstrap:1,0;1,linking,1;2,5,0,0,cut;3,linking,0,cut;1,resize,0;2,rollback,1;3,2,1,0,ring;0,finalize,2;1,shutdown,0"
        );
        assert!(m[3].matches(2, Point::Call { version: 5, seq: 0 }, 0));
        assert!(!m[3].matches(2, Point::Call { version: 5, seq: 0 }, 1));
        assert_eq!(parse("").unwrap(), vec![]);
    }

    #[test]
    fn malformed_entries_name_the_syntax() {
        for bad in [
            "1,2,3",
            "1,boot:2,0",
            "x,1,2,0",
            "1,linking",
            "1,bootstrap:-1,0",
            "1,2,3,4,5",
            "1,linking,cut",
            "1,2,3,0,hang",
            "1,2,3,0,ring,cut",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("WARREN_MOCK") && e.contains("rank,bootstrap:n,attempt"), "{bad}: {e}");
        }
    }
}

//! What a tracker reports: how a finished job went, and the workers it fenced.

use std::time::Duration;

/// How a finished job went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobReport {
    /// Number of workers.
    pub world: usize,
    /// Registrations of a task id that already had a rank.
    pub recoveries: u64,
    /// Time from tracker start to the last shutdown.
    pub elapsed: Duration,
}

/// A worker the tracker fenced ([`super::Tracker::take_fenced`]): which task, and which attempt of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedWorker {
    /// Its task id.
    pub task_id: String,
    /// The attempt number it registered with (`WARREN_ATTEMPT`); only that attempt is to be
    /// ended.
    pub attempt: u32,
}

/// `Ok` when every worker shut down cleanly, `Err` with the reason the job failed.
pub type JobOutcome = std::result::Result<JobReport, String>;

//! `warren ctl --tracker URI add|remove|restart TASK [--at-version V]` and `warren ctl
//! --tracker URI list`: changes the membership of an elastic job through its tracker, over a
//! connection authenticated with the job secret (`WARREN_JOB_SECRET` or
//! `WARREN_JOB_SECRET_FILE`).

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use warren::Error;
use warren::config::keys;
use warren::tracker::TrackerClient;
use warren::tracker::proto::{ControlChange, FromTracker, ToTracker};

/// Arguments of `warren ctl`.
#[derive(Args)]
pub struct CtlArgs {
    /// The job's tracker, `host:port` (default: WARREN_TRACKER_URI).
    #[arg(long)]
    tracker: Option<String>,
    /// What to do.
    #[command(subcommand)]
    cmd: CtlCmd,
}

/// The control commands.
#[derive(Subcommand)]
enum CtlCmd {
    /// Admit a new task id: it joins at the next checkpoint boundary once its worker has
    /// registered (refused above --max-workers).
    Add(TaskArgs),
    /// Let a worker finish the current checkpoint interval, then stop (refused below
    /// --min-workers).
    Remove(TaskArgs),
    /// Bring a stopped task id back: it joins once its worker registers again.
    Restart(TaskArgs),
    /// List the job's tasks: state (running, joining, leaving, stopped, lost) and rank.
    List,
}

/// A task id and when the change applies.
#[derive(Args)]
struct TaskArgs {
    /// The task id.
    task: String,
    /// The checkpoint version the change applies at, at the earliest (default: the next
    /// one); the same versions give the same membership schedule on every run.
    #[arg(long)]
    at_version: Option<u32>,
}

/// Sends the request and prints the job's roster.
pub fn run(a: CtlArgs) -> warren::Result<u8> {
    let uri = match a.tracker.or_else(|| std::env::var(keys::TRACKER_URI).ok()) {
        Some(u) => u,
        None => return Err(Error::Config(format!("no tracker given (--tracker or {})", keys::TRACKER_URI))),
    };
    if std::env::var_os(keys::JOB_SECRET).is_none() && std::env::var_os(keys::JOB_SECRET_FILE).is_none() {
        return Err(Error::Config(format!(
            "warren ctl needs the job secret ({} or {})",
            keys::JOB_SECRET,
            keys::JOB_SECRET_FILE
        )));
    }
    let request = match a.cmd {
        CtlCmd::Add(t) => control(ControlChange::Add, t)?,
        CtlCmd::Remove(t) => control(ControlChange::Remove, t)?,
        CtlCmd::Restart(t) => control(ControlChange::Restart, t)?,
        CtlCmd::List => ToTracker::List,
    };
    let secret = super::launcher::job_secret(false)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut client = TrackerClient::connect_now(&uri, secret.as_bytes(), super::launcher::tls()?.as_ref(), deadline)?;
    match client.request(&request, deadline)? {
        FromTracker::Roster { epoch, min, max, tasks } => {
            println!("view epoch {epoch}; workers {min}..={max}");
            println!("{:<12} {:<8} RANK", "TASK", "STATE");
            for t in tasks {
                let rank = t.rank.map_or_else(|| "-".to_string(), |r| r.to_string());
                println!("{:<12} {:<8} {rank}", t.task_id, t.state);
            }
            Ok(0)
        }
        other => Err(Error::Protocol(format!("the tracker answered {other:?}"))),
    }
}

/// The request, once its task id is checked: a task id is what the job's workers get as
/// `WARREN_TASK_ID` (a partition or subtask index, a `warren run` task number).
fn control(change: ControlChange, t: TaskArgs) -> warren::Result<ToTracker> {
    check_task_id(&t.task)?;
    Ok(ToTracker::Control { change, task_id: t.task, at: t.at_version })
}

/// A task id is what the job's workers get as `WARREN_TASK_ID`: not empty, no spaces or
/// control characters (a `warren run`, Spark or Flink job numbers its tasks; its tracker
/// refuses other ids).
fn check_task_id(task: &str) -> warren::Result<()> {
    if !task.is_empty() && !task.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "task id {task:?} cannot be a task id (empty, or with spaces): give the task as `warren ctl list` shows it"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_checked_before_sending() {
        assert!(check_task_id("0").is_ok() && check_task_id("17").is_ok() && check_task_id("w-1").is_ok());
        for bad in ["", " 2", "2 ", "a\tb"] {
            let e = check_task_id(bad).unwrap_err().to_string();
            assert!(e.contains("cannot be a task id"), "{bad:?}: {e}");
        }
    }
}

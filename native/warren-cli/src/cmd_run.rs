//! `warren run -n N -- CMD ARGS...`: a local job, like `torchrun`.

use std::time::Duration;

use clap::Args;
use warren::config::keys;
use warren::membership::Limits;

use super::cmd_ps::{PS_URIS, start_servers};
use super::launcher::{LaunchSpec, launch};
use warren::ps::PsConfig;

/// Arguments of `warren run`.
#[derive(Args)]
pub struct RunArgs {
    /// Number of worker processes (an elastic job: --min-workers instead).
    #[arg(short = 'n', long = "workers", required_unless_present = "min_workers", allow_negative_numbers = true,
          value_parser = worker_count)]
    workers: Option<usize>,
    /// An elastic job: start with this many workers (task ids 0..A); never fewer (`warren ctl
    /// remove` below it is refused).
    #[arg(long, requires = "max_workers", conflicts_with = "workers", allow_negative_numbers = true,
          value_parser = worker_count)]
    min_workers: Option<usize>,
    /// An elastic job: admit up to this many workers (`warren ctl add TASK`; the launcher
    /// starts the worker of every task added or restarted).
    #[arg(long, requires = "min_workers", allow_negative_numbers = true, value_parser = worker_count)]
    max_workers: Option<usize>,
    /// An elastic job: seconds a failed worker's replacement has to register before the job
    /// goes on without it (the others roll back to the last checkpoint in a view without it;
    /// never below --min-workers: the job fails then, naming the missing tasks); it rejoins at
    /// a later checkpoint when it comes back. Default: wait for it (up to the workers'
    /// WARREN_CONNECT_TIMEOUT_S).
    #[arg(long, requires = "min_workers")]
    rejoin_timeout: Option<f64>,
    /// An elastic job: seconds a checkpoint boundary may wait, after `warren ctl add` or
    /// `restart`, for that task's worker to register, so it joins at the first boundary after
    /// the request (the others wait in `checkpoint` meanwhile; once per request; 0: never
    /// wait).
    #[arg(long, requires = "min_workers", default_value_t = warren::tracker::DEFAULT_JOIN_HOLD.as_secs_f64())]
    join_hold: f64,
    /// Restarts allowed over the whole job; a worker that exits non-zero is re-run alone
    /// (retry-one) with WARREN_ATTEMPT incremented.
    #[arg(long, default_value_t = 3)]
    max_restarts: u32,
    /// What a failed worker costs: `retry-one` re-runs only it (the others wait and serve it);
    /// `fail-all` restarts every worker from the last durable checkpoint
    /// (WARREN_CHECKPOINT_DIR, a temporary directory if unset).
    #[arg(long, default_value = "retry-one", value_parser = ["retry-one", "fail-all"])]
    recovery: String,
    /// Seconds the workers have to arrive at the tracker (default 120; with --ps-servers or
    /// WARREN_PS_URIS, whose trainers need not join the tracker, no deadline unless given).
    #[arg(long)]
    rendezvous_timeout: Option<f64>,
    /// Also run S parameter servers in this process (threads) and give every worker their
    /// addresses in WARREN_PS_URIS (for trainers such as `warren example ps-train`).
    #[arg(long, default_value_t = 0)]
    ps_servers: usize,
    /// The worker command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// A number of workers: a whole number of at least 1.
fn worker_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a number of workers of at least 1, not {s:?}")),
    }
}

/// How long the workers have to arrive at the tracker: `given` seconds, else 120, or, for
/// the trainers of a parameter-server job (servers run here, or given in WARREN_PS_URIS),
/// which may never join the tracker, no deadline (a year).
fn rendezvous_deadline(given: Option<f64>, ps_job: bool) -> Duration {
    match (given, ps_job) {
        (Some(s), _) => Duration::from_secs_f64(s),
        (None, false) => Duration::from_secs(120),
        (None, true) => Duration::from_secs(365 * 86_400),
    }
}

/// Runs the job and prints the `WARREN_RUN_SUMMARY` line.
pub fn run(a: RunArgs) -> warren::Result<u8> {
    let fail_all = a.recovery == "fail-all";
    // The launcher starts the worker of an added task by its number.
    let elastic =
        a.min_workers.zip(a.max_workers).map(|(min, max)| Limits { numbered_tasks: true, ..Limits::new(min, max) });
    let workers = a.workers.or(a.min_workers).unwrap_or_default();
    if elastic.is_some() && fail_all {
        return Err(warren::Error::Config("an elastic job recovers with retry-one, not fail-all".into()));
    }
    let mut env = Vec::new();
    let mut temp_dir = None;
    if fail_all && std::env::var_os(keys::CHECKPOINT_DIR).is_none() {
        let dir = std::env::temp_dir().join(format!("warren-ckpt-{}", std::process::id()));
        env.push((keys::CHECKPOINT_DIR.to_string(), dir.display().to_string()));
        temp_dir = Some(dir);
    }
    // The tracker, the parameter servers and the workers share one secret. Where `warren
    // ctl` finds it is printed: the file given, or one made for this job (removed at the end);
    // an exported WARREN_JOB_SECRET is already known to the user.
    let given = std::env::var_os(keys::JOB_SECRET).is_some();
    let made = !given && std::env::var_os(keys::JOB_SECRET_FILE).is_none();
    let secret = super::launcher::job_secret(true)?;
    if let (false, Some(path)) = (given, std::env::var_os(keys::JOB_SECRET_FILE)) {
        println!("{}={}", keys::JOB_SECRET_FILE, path.to_string_lossy());
    }
    let ps = if a.ps_servers > 0 {
        let servers = start_servers(&PsConfig::new(secret.clone(), 0, a.ps_servers), 0..a.ps_servers)?;
        let uris: Vec<&str> = servers.iter().map(|s| s.uri()).collect();
        env.push((PS_URIS.to_string(), uris.join(",")));
        servers
    } else {
        Vec::new()
    };
    let ps_job = !ps.is_empty() || std::env::var_os(PS_URIS).is_some();
    let rendezvous = rendezvous_deadline(a.rendezvous_timeout, ps_job);
    let outcome = launch(&LaunchSpec {
        workers,
        elastic,
        rejoin_timeout: a.rejoin_timeout.map(Duration::from_secs_f64),
        join_hold: Duration::try_from_secs_f64(a.join_hold).map_err(|_| {
            warren::Error::Config(format!("--join-hold must be a number of seconds >= 0, not {}", a.join_hold))
        })?,
        max_restarts: a.max_restarts,
        command: a.command,
        env,
        rendezvous_timeout: rendezvous,
        capture_stdout: false,
        fail_all,
        secret: Some(secret),
        announce: true,
    });
    drop(ps);
    if made {
        let _ = std::fs::remove_file(super::launcher::made_secret_file());
    }
    if let Some(d) = temp_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let outcome = outcome?;
    let status = if outcome.ok { "ok" } else { "failed" };
    println!(
        "WARREN_RUN_SUMMARY {{\"workers\":{},\"restarts\":{},\"status\":\"{status}\",\"elapsed_s\":{:.3}}}",
        workers,
        outcome.restarts,
        outcome.elapsed.as_secs_f64()
    );
    Ok(if outcome.interrupted {
        130
    } else if outcome.ok {
        0
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_counts_are_whole_numbers_of_at_least_one() {
        assert_eq!(worker_count("3"), Ok(3));
        for bad in ["-3", "0", "abc", "2.5"] {
            assert!(worker_count(bad).unwrap_err().contains("at least 1"), "{bad}");
        }
    }

    #[test]
    fn parameter_server_trainers_have_no_rendezvous_deadline_unless_given() {
        assert_eq!(rendezvous_deadline(None, false), Duration::from_secs(120));
        assert!(rendezvous_deadline(None, true) >= Duration::from_secs(86_400 * 365));
        assert_eq!(rendezvous_deadline(Some(5.0), true), Duration::from_secs(5));
    }
}

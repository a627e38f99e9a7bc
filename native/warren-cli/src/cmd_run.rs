//! `warren run -n N -- CMD ARGS...`: a local job, like `torchrun`.

use std::time::Duration;

use clap::Args;
use warren::config::keys;

use super::launcher::{LaunchSpec, launch};

/// Arguments of `warren run`.
#[derive(Args)]
pub struct RunArgs {
    /// Number of worker processes.
    #[arg(short = 'n', long = "workers")]
    workers: usize,
    /// Restarts allowed over the whole job; a worker that exits non-zero is re-run alone
    /// (retry-one) with WARREN_ATTEMPT incremented.
    #[arg(long, default_value_t = 3)]
    max_restarts: u32,
    /// What a failed worker costs: `retry-one` re-runs only it (the others wait and serve it);
    /// `fail-all` restarts every worker from the last durable checkpoint
    /// (WARREN_CHECKPOINT_DIR, a temporary directory if unset).
    #[arg(long, default_value = "retry-one", value_parser = ["retry-one", "fail-all"])]
    recovery: String,
    /// Seconds the workers have to arrive at the tracker.
    #[arg(long, default_value_t = 120.0)]
    rendezvous_timeout: f64,
    /// The worker command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs the job and prints the `WARREN_RUN_SUMMARY` line.
pub fn run(a: RunArgs) -> warren::Result<u8> {
    let fail_all = a.recovery == "fail-all";
    let mut env = Vec::new();
    let mut temp_dir = None;
    if fail_all && std::env::var_os(keys::CHECKPOINT_DIR).is_none() {
        let dir = std::env::temp_dir().join(format!("warren-ckpt-{}", std::process::id()));
        env.push((keys::CHECKPOINT_DIR.to_string(), dir.display().to_string()));
        temp_dir = Some(dir);
    }
    let outcome = launch(&LaunchSpec {
        workers: a.workers,
        max_restarts: a.max_restarts,
        command: a.command,
        env,
        rendezvous_timeout: Duration::from_secs_f64(a.rendezvous_timeout),
        capture_stdout: false,
        fail_all,
    });
    if let Some(d) = temp_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    let outcome = outcome?;
    let status = if outcome.ok { "ok" } else { "failed" };
    println!(
        "WARREN_RUN_SUMMARY {{\"workers\":{},\"restarts\":{},\"status\":\"{status}\",\"elapsed_s\":{:.3}}}",
        a.workers,
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

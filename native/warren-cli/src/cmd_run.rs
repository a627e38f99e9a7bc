//! `warren run -n N -- CMD ARGS...`: a local job, like `torchrun`.

use std::time::Duration;

use clap::Args;

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
    /// Seconds the workers have to arrive at the tracker.
    #[arg(long, default_value_t = 120.0)]
    rendezvous_timeout: f64,
    /// The worker command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs the job and prints the `WARREN_RUN_SUMMARY` line.
pub fn run(a: RunArgs) -> warren::Result<u8> {
    let outcome = launch(&LaunchSpec {
        workers: a.workers,
        max_restarts: a.max_restarts,
        command: a.command,
        env: Vec::new(),
        rendezvous_timeout: Duration::from_secs_f64(a.rendezvous_timeout),
        capture_stdout: false,
    })?;
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

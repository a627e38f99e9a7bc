//! `warren`: the command-line front door (tracker, local launcher, benchmarks, examples).

mod bench_loopback;
mod cmd_bench;
mod cmd_bench_ps;
mod cmd_bench_scale;
mod cmd_ctl;
mod cmd_example;
mod cmd_master;
mod cmd_ps;
mod cmd_ps_train;
mod cmd_recordio;
mod cmd_run;
mod cmd_tracker;
mod launcher;
mod logging;
mod ps_feed;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Warren: fault-tolerant collectives for distributed training.
#[derive(Parser)]
#[command(
    name = "warren",
    version,
    about = "Warren: fault-tolerant collectives for distributed training (a tracker, a local launcher, \
             elastic control, the data master, parameter servers, RecordIO tools, benchmarks and examples)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a tracker for N workers; prints WARREN_TRACKER_URI=host:port and waits for the job.
    ///
    /// A worker without a heartbeat for WARREN_PEER_TIMEOUT_S seconds (default 30; 0: off) is
    /// fenced: the job goes on without it, and whoever runs the workers must replace it.
    Tracker(cmd_tracker::TrackerArgs),
    /// Run the data master (prints WARREN_MASTER_URI=host:port); `warren master status` asks one.
    Master(cmd_master::MasterArgs),
    /// Run parameter servers (prints WARREN_PS_URIS=host:port,...); `warren ps status` asks them.
    Ps(cmd_ps::PsArgs),
    /// Run a tracker and N local worker processes, restarting a worker that fails.
    ///
    /// A worker without a heartbeat for WARREN_PEER_TIMEOUT_S seconds (default 30; 0: off;
    /// paused, frozen or cut off) is fenced by the tracker, killed and restarted like a worker
    /// that died. A worker waiting WARREN_STALL_WARN_S seconds (default 10; 0: off) in a call
    /// without progress logs a stall, and the tracker's log names the workers it waits for.
    ///
    /// Elastic: with --min-workers A --max-workers B the job starts with A workers (task ids
    /// 0..A) and may change size at checkpoint boundaries through `warren ctl`; the launcher
    /// starts the worker of every task id added or restarted.
    Run(cmd_run::RunArgs),
    /// Change an elastic job's membership: add, remove or restart a task id, or list them.
    ///
    /// Talks to the job's tracker (--tracker or WARREN_TRACKER_URI), authenticated with the
    /// job secret (WARREN_JOB_SECRET or WARREN_JOB_SECRET_FILE). Changes apply at a checkpoint
    /// boundary (--at-version V: at version V at the earliest).
    Ctl(cmd_ctl::CtlArgs),
    /// Measure collectives between local worker processes, or the master; prints one JSON line.
    #[command(subcommand)]
    Bench(cmd_bench::BenchCmd),
    /// Example jobs (run them under `warren run`).
    #[command(subcommand)]
    Example(cmd_example::ExampleCmd),
    /// RecordIO files (PaddlePaddle format; dmlc `.rec` readable too): write, cat, index, check.
    Recordio(cmd_recordio::RecordioArgs),
}

fn main() -> ExitCode {
    logging::init();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Command::Tracker(a) => cmd_tracker::run(a),
        Command::Master(a) => cmd_master::run(a),
        Command::Ps(a) => cmd_ps::run(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Ctl(a) => cmd_ctl::run(a),
        Command::Bench(c) => cmd_bench::run(c),
        Command::Example(c) => cmd_example::run(c),
        Command::Recordio(a) => cmd_recordio::run(a).map(|code| code.clamp(0, 255) as u8),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // A task that is not a member of its elastic job any more has nothing to do.
        Err(e @ warren::Error::Left(_)) => {
            let line = format!("warren: {e}: nothing to do\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            // One write: workers and the tracker share this stderr, and `eprintln!` writes its
            // pieces separately, so another process's log line could land inside this one.
            let line = format!("warren: error: {e}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            ExitCode::from(exit_code(&e))
        }
    }
}

/// Exit status of a failed command: [`FINAL_EXIT`](launcher::FINAL_EXIT) tells `warren run`
/// not to restart a worker whose error cannot succeed on retry; 1 otherwise.
fn exit_code(e: &warren::Error) -> u8 {
    if e.is_final() { launcher::FINAL_EXIT } else { 1 }
}

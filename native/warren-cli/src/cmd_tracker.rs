//! `warren tracker`: a stand-alone tracker process.

use std::time::Duration;

use clap::Args;
use warren::config::keys;
use warren::{Tracker, TrackerConfig};

/// Arguments of `warren tracker`.
#[derive(Args)]
pub struct TrackerArgs {
    /// Number of workers in the job.
    #[arg(long, short = 'n')]
    workers: usize,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seconds all workers have to arrive.
    #[arg(long, default_value_t = 600.0)]
    rendezvous_timeout: f64,
}

/// Runs the tracker until the job ends. The secret comes from `WARREN_JOB_SECRET` or
/// `WARREN_JOB_SECRET_FILE`; without either a new one is written to a private file whose path
/// is printed as `WARREN_JOB_SECRET_FILE=...`.
pub fn run(a: TrackerArgs) -> warren::Result<u8> {
    let secret = super::launcher::job_secret(true)?;
    let mut cfg = TrackerConfig::new(a.workers, secret);
    cfg.host = a.host;
    cfg.port = a.port;
    cfg.rendezvous_timeout = Duration::from_secs_f64(a.rendezvous_timeout);
    cfg.peer_timeout = warren::config::peer_timeout_from_env()?;
    cfg.tls = super::launcher::tls()?;
    let tracker = Tracker::start(cfg)?;
    println!("{}={}", keys::TRACKER_URI, tracker.uri());
    println!("{}={}", keys::NUM_WORKERS, a.workers);
    match tracker.wait(None) {
        Ok(report) => {
            println!(
                "WARREN_JOB_DONE {{\"workers\":{},\"recoveries\":{},\"elapsed_s\":{:.3}}}",
                report.world,
                report.recoveries,
                report.elapsed.as_secs_f64()
            );
            Ok(0)
        }
        Err(e) => {
            eprintln!("warren tracker: job failed: {e}");
            Ok(1)
        }
    }
}

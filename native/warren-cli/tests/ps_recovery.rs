//! Parameter servers killed with SIGKILL and restarted with the same index: a sync job loses
//! nothing (the failure-free MODEL_HASH, for kills at 10 seeded points), an async job
//! finishes and reports the updates it lost. Real processes, real signals; every test has a
//! hard time limit.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

mod support;

use support::crash::free_port;
use support::ps::{Server, WARREN, finish, model_hash, run_limited};

const SECRET: &str = "ps-recovery-test-secret";
const JOB: [&str; 10] =
    ["--steps", "60", "--batch", "64", "--buckets", "4096", "--optimizer", "adam:0.05", "--max-sleep-ms", "30"];

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("warren-ps-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Server `index` of 2 on `port`, checkpointing into `dir` every 3 steps.
fn server(index: usize, port: u16, dir: &TempDir) -> Server {
    let port = port.to_string();
    let dir = dir.0.to_str().unwrap();
    let args = ["--port", &port, "--checkpoint-dir", dir, "--checkpoint-every-steps", "3", "--pull-timeout-s", "60"];
    Server::start(index, 2, SECRET, &args)
}

fn train(mode: &str, uris: &str) -> Child {
    Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "0", "--rendezvous-timeout", "3600", "--", WARREN])
        .args(["example", "ps-train", "--mode", mode])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", uris)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run")
}

fn serial() -> String {
    let mut cmd = Command::new(WARREN);
    cmd.args(["example", "ps-train", "--serial", "--trainers", "4"]).args(JOB);
    model_hash(&run_limited(&mut cmd, Duration::from_secs(120)))
}

/// Runs a job in `mode` against two servers, SIGKILLs server `victim` after `delay` and
/// restarts it with the same index and port; returns the job's output.
fn job_with_a_kill(mode: &str, victim: usize, delay: Duration, tag: &str) -> Output {
    let dir = TempDir::new(tag);
    let ports = [free_port(), free_port()];
    let mut servers = [server(0, ports[0], &dir), server(1, ports[1], &dir)];
    let uris = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let mut job = train(mode, &uris);
    std::thread::sleep(delay);
    assert!(job.try_wait().unwrap().is_none(), "the job ended before the kill at {delay:?}: make it longer");
    servers[victim].kill();
    std::thread::sleep(Duration::from_millis(50));
    servers[victim] = server(victim, ports[victim], &dir);
    finish(job, Duration::from_secs(240))
}

#[test]
fn a_sync_job_loses_nothing_when_a_server_is_killed_at_ten_seeded_points() {
    let want = serial();
    for seed in 0..10u64 {
        // Seeded points spread over the job (pushes, pulls, checkpoint writes).
        let delay = Duration::from_millis(100 + (seed * 7919) % 650);
        let victim = (seed % 2) as usize;
        let out = job_with_a_kill("sync", victim, delay, &format!("sync-{seed}"));
        assert_eq!(model_hash(&out), want, "seed {seed}: server {victim} killed after {delay:?}");
    }
}

#[test]
fn an_async_job_finishes_after_a_server_kill_and_reports_lost_updates() {
    let out = job_with_a_kill("async", 1, Duration::from_millis(300), "async");
    model_hash(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PS_LOST_UPDATES"), "{stdout}");
}

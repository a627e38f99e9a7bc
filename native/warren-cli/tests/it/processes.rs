//! Real processes: `warren run` launching `warren` workers, workers killed with real signals,
//! the stand-alone tracker. Every test has a hard time limit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

/// Runs a command to completion, killing it if it outlives `limit`.
fn run_limited(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("hung past {limit:?}; stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn summary(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().find_map(|l| l.strip_prefix("WARREN_RUN_SUMMARY ")).expect("summary line");
    serde_json::from_str(line).unwrap()
}

fn model_hash(stdout: &str) -> String {
    stdout.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).expect("MODEL_HASH line").to_string()
}

#[test]
fn every_type_and_op_across_one_to_eight_processes() {
    for n in 1..=8 {
        let out = run_limited(
            Command::new(WARREN)
                .args(["run", "-n", &n.to_string(), "--", WARREN, "example", "check"])
                .env("WARREN_RING_THRESHOLD", if n % 2 == 0 { "4096" } else { "262144" }),
            Duration::from_secs(120),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "n={n}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.matches("CHECK_OK").count(), n, "{stdout}");
        assert_eq!(summary(&stdout)["status"], "ok");
    }
}

#[test]
fn training_gives_the_same_model_bits_on_every_run() {
    let run = |n: usize| {
        let out = run_limited(
            Command::new(WARREN).args([
                "run",
                "-n",
                &n.to_string(),
                "--",
                WARREN,
                "example",
                "train",
                "--iters",
                "20",
                "--model-bytes",
                "400000",
            ]),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        model_hash(&String::from_utf8_lossy(&out.stdout))
    };
    let first = run(3);
    assert_eq!(first.len(), 64);
    assert_eq!(run(3), first);
    assert_ne!(run(2), first, "a different world must give a different model");
}

/// Pids of the direct children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output().expect("pgrep");
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
}

fn wait_for_children(launcher: &Child, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = children(launcher.id());
        if c.len() == n {
            return c;
        }
        assert!(Instant::now() < deadline, "workers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn long_job(n: usize, extra_env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(WARREN);
    cmd.args([
        "run",
        "-n",
        &n.to_string(),
        "--max-restarts",
        "0",
        "--",
        WARREN,
        "example",
        "train",
        "--iters",
        "1000000",
        "--model-bytes",
        "4096",
        "--compute-ms",
        "2",
    ]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(mut launcher: Child, limit: Duration) -> (String, String) {
    let started = Instant::now();
    while launcher.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = Command::new("pkill").args(["-KILL", "-P", &launcher.id().to_string()]).status();
            let _ = launcher.kill();
            panic!("job hung past {limit:?} after the failure");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = launcher.wait_with_output().unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_worker_killed_mid_job_fails_the_others_promptly() {
    for victim_index in [0usize, 2] {
        let launcher = long_job(4, &[]);
        let pids = wait_for_children(&launcher, 4);
        std::thread::sleep(Duration::from_millis(700));
        let killed_at = Instant::now();
        Command::new("kill").args(["-KILL", &pids[victim_index].to_string()]).status().unwrap();
        let (stdout, stderr) = finish(launcher, Duration::from_secs(30));
        assert!(killed_at.elapsed() < Duration::from_secs(10), "took {:?}", killed_at.elapsed());
        assert_eq!(summary(&stdout)["status"], "failed");
        assert!(stderr.contains("lost"), "the tracker logs the lost worker:\n{stderr}");
    }
}

#[test]
fn a_stopped_worker_makes_the_others_time_out_naming_a_rank() {
    let launcher = long_job(3, &[("WARREN_TIMEOUT_S", "1.5")]);
    let pids = wait_for_children(&launcher, 3);
    std::thread::sleep(Duration::from_millis(500));
    Command::new("kill").args(["-STOP", &pids[1].to_string()]).status().unwrap();
    let (stdout, stderr) = finish(launcher, Duration::from_secs(30));
    let _ = Command::new("kill").args(["-KILL", &pids[1].to_string()]).status();
    assert_eq!(summary(&stdout)["status"], "failed");
    assert!(stderr.contains("timed out") && stderr.contains("rank"), "{stderr}");
}

#[test]
fn run_restarts_a_failing_worker_up_to_the_limit() {
    let out = run_limited(
        Command::new(WARREN).args([
            "run",
            "-n",
            "2",
            "--max-restarts",
            "3",
            "--",
            "sh",
            "-c",
            "[ \"$WARREN_ATTEMPT\" -ge 1 ]",
        ]),
        Duration::from_secs(30),
    );
    let s = summary(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        (s["status"].as_str(), s["restarts"].as_u64()),
        (Some("ok"), Some(2)),
        "each task fails once, then succeeds"
    );
    let out = run_limited(
        Command::new(WARREN).args(["run", "-n", "2", "--max-restarts", "2", "--", "sh", "-c", "exit 5"]),
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let s = summary(&String::from_utf8_lossy(&out.stdout));
    assert_eq!((s["status"].as_str(), s["restarts"].as_u64()), (Some("failed"), Some(2)));
}

/// A worker error that cannot succeed on retry (here a bad setting every worker reads)
/// stops the job at once: no restart is spent on it, and the error names the setting.
#[test]
fn an_error_that_cannot_succeed_on_retry_stops_the_job_without_restarts() {
    let started = Instant::now();
    let out = run_limited(
        Command::new(WARREN)
            .args(["run", "-n", "2", "--max-restarts", "3", "--", WARREN, "example", "train", "--iters", "5"])
            .env("WARREN_TIMEOUT_S", "soon"),
        Duration::from_secs(60),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("WARREN_TIMEOUT_S"), "{stderr}");
    assert!(stderr.contains("cannot succeed on retry"), "{stderr}");
    assert_eq!(summary(&stdout)["restarts"], 0, "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[test]
fn stand_alone_tracker_serves_workers_started_by_hand() {
    let mut tracker = Command::new(WARREN)
        .args(["tracker", "--workers", "2"])
        .env_remove("WARREN_JOB_SECRET")
        .env_remove("WARREN_JOB_SECRET_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(tracker.stdout.take().unwrap()).lines();
    let mut env = Vec::new();
    while env.len() < 3 {
        let line = lines.next().expect("tracker output").unwrap();
        let (k, v) = line.split_once('=').expect("KEY=value");
        env.push((k.to_string(), v.to_string()));
    }
    assert!(env.iter().any(|(k, v)| k == "WARREN_TRACKER_URI" && v.starts_with("127.0.0.1:")));
    let secret_file = env.iter().find(|(k, _)| k == "WARREN_JOB_SECRET_FILE").expect("secret file announced").1.clone();
    let workers: Vec<Child> = (0..2)
        .map(|t| {
            Command::new(WARREN)
                .args(["example", "train", "--iters", "5", "--model-bytes", "64"])
                .envs(env.iter().cloned())
                .env("WARREN_TASK_ID", t.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "a worker failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let done = lines.next().expect("job done line").unwrap();
    assert!(done.starts_with("WARREN_JOB_DONE"), "{done}");
    assert!(tracker.wait().unwrap().success());
    let _ = std::fs::remove_file(secret_file);
}

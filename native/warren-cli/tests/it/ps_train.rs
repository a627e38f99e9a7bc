//! The parameter server with real processes: `warren example ps-train` under `warren run
//! --ps-servers`, and against stand-alone `warren ps` server processes. Sync training with 4
//! trainers and 2 servers gives the same MODEL_HASH on every run, whatever the trainers'
//! random sleeps, and equals the same training done serially in one process. Every test has
//! a hard time limit.

use std::process::{Command, Output};
use std::time::Duration;

use crate::support::ps::{Server, WARREN, model_hash, run_limited};

const SECRET: &str = "ps-train-test-secret";
/// A small job: 4 trainers x 15 steps of 64 examples over 4,096 keys.
const JOB: [&str; 8] = ["--steps", "15", "--batch", "64", "--buckets", "4096", "--optimizer", "adagrad:0.5"];

fn train_args(mode: &str, sleep_ms: u64) -> Vec<String> {
    let mut v: Vec<String> = ["example", "ps-train", "--mode", mode, "--max-sleep-ms", &sleep_ms.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(JOB.iter().map(|s| s.to_string()));
    v
}

/// `warren run -n 4 --ps-servers 2` of the example.
fn under_run(mode: &str, sleep_ms: u64) -> Output {
    let mut cmd = Command::new(WARREN);
    cmd.args(["run", "-n", "4", "--max-restarts", "0", "--ps-servers", "2", "--", WARREN])
        .args(train_args(mode, sleep_ms));
    run_limited(cmd.env("WARREN_JOB_SECRET", SECRET), Duration::from_secs(180))
}

fn serial() -> String {
    let mut cmd = Command::new(WARREN);
    cmd.args(["example", "ps-train", "--serial", "--trainers", "4"]).args(JOB);
    model_hash(&run_limited(&mut cmd, Duration::from_secs(120)))
}

#[test]
fn sync_training_gives_the_serial_model_on_every_run_whatever_the_timings() {
    let want = serial();
    for sleep_ms in [0, 25] {
        assert_eq!(model_hash(&under_run("sync", sleep_ms)), want, "under warren run, sleeps up to {sleep_ms} ms");
    }
    // The same against two server processes started by hand, with the command of docs/parameter-server.md (no
    // rendezvous deadline for trainers of parameter servers).
    let servers = [Server::start(0, 2, SECRET, &[]), Server::start(1, 2, SECRET, &[])];
    let uris = format!("{},{}", servers[0].uri, servers[1].uri);
    let mut cmd = Command::new(WARREN);
    cmd.args(["run", "-n", "4", "--max-restarts", "0", "--", WARREN]).args(train_args("sync", 10));
    let out = run_limited(cmd.env("WARREN_JOB_SECRET", SECRET).env("WARREN_PS_URIS", &uris), Duration::from_secs(180));
    assert_eq!(model_hash(&out), want, "against stand-alone servers");
    // `warren ps status` reports the finished job.
    let out = run_limited(
        Command::new(WARREN).args(["ps", "status"]).env("WARREN_JOB_SECRET", SECRET).env("WARREN_PS_URIS", &uris),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    for (i, st) in lines.iter().enumerate() {
        assert_eq!(st["index"], i);
        assert_eq!(st["clocks"], serde_json::json!([15, 15, 15, 15]));
        assert_eq!(st["applied"], 15);
    }
}

#[test]
fn async_and_ssp_training_finish_with_a_model() {
    for mode in ["async", "ssp"] {
        let hash = model_hash(&under_run(mode, 5));
        assert_eq!(hash.len(), 64, "{mode}: {hash}");
    }
}

#[test]
fn a_trainer_with_a_wrong_secret_is_refused_and_says_so() {
    let server = Server::start(0, 2, SECRET, &[]);
    let out = run_limited(
        Command::new(WARREN)
            .args(["example", "ps-train", "--trainers", "1", "--uris", &server.uri])
            .env("WARREN_JOB_SECRET", "not the secret"),
        Duration::from_secs(60),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ps server 0") && stderr.contains("secret"), "{stderr}");
}

/// Trainers joining and leaving: trainer 3 joins at step 5 and trainer 2 at step 8, trainer 1
/// leaves after step 9.
const SCHEDULE: [&str; 6] = ["--join", "3:5", "--join", "2:8", "--leave", "1:10"];

/// `warren run -n 4 --ps-servers 2` of the example with the membership schedule.
fn elastic_run(mode: &str, sleep_ms: u64) -> Output {
    let mut cmd = Command::new(WARREN);
    cmd.args(["run", "-n", "4", "--max-restarts", "0", "--ps-servers", "2", "--", WARREN])
        .args(train_args(mode, sleep_ms))
        .args(SCHEDULE);
    run_limited(cmd.env("WARREN_JOB_SECRET", SECRET), Duration::from_secs(180))
}

/// Under sync a step counts the trainers taking part in it: the same join and leave steps
/// give the same model on every run, whatever the timings, equal to the serial training
/// that follows the same schedule (and not to the one without it).
#[test]
fn sync_trainers_join_and_leave_with_a_deterministic_model() {
    let mut cmd = Command::new(WARREN);
    cmd.args(["example", "ps-train", "--serial", "--trainers", "4"]).args(JOB).args(SCHEDULE);
    let want = model_hash(&run_limited(&mut cmd, Duration::from_secs(120)));
    assert_ne!(want, serial(), "the schedule changes the model");
    for sleep_ms in [0, 25] {
        let out = elastic_run("sync", sleep_ms);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("TRAINER 3 done: steps 5..15"), "{stdout}");
        assert!(stdout.contains("TRAINER 1 done: steps 0..10"), "{stdout}");
        assert_eq!(model_hash(&out), want, "sleeps up to {sleep_ms} ms");
    }
}

/// Under async the same schedule runs to the end (joiners and leavers hold nobody back).
#[test]
fn async_trainers_join_and_leave_and_the_job_finishes() {
    let out = elastic_run("async", 5);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("TRAINER 2 done: steps 8..15"), "{stdout}");
    assert_eq!(model_hash(&out).len(), 64, "{stdout}");
}

/// Every trainer leaves, then one joins: trainers 0 and 1 take part in steps 0..4 only and
/// trainer 2 joins at step 8, so no trainer takes part in steps 4..8. Under sync the servers
/// skip those steps (no update) once the joiner named its step, instead of waiting for
/// pushes that never come: the job finishes, on every run with the model of the serial
/// training of the same schedule.
#[test]
fn sync_steps_no_trainer_takes_part_in_are_skipped() {
    let schedule = ["--leave", "0:4", "--leave", "1:4", "--join", "2:8"];
    let mut cmd = Command::new(WARREN);
    cmd.args(["example", "ps-train", "--serial", "--trainers", "3"]).args(JOB).args(schedule);
    let want = model_hash(&run_limited(&mut cmd, Duration::from_secs(120)));
    for sleep_ms in [0, 25] {
        let mut cmd = Command::new(WARREN);
        cmd.args(["run", "-n", "3", "--max-restarts", "0", "--ps-servers", "2", "--", WARREN])
            .args(train_args("sync", sleep_ms))
            .args(schedule);
        let out = run_limited(cmd.env("WARREN_JOB_SECRET", SECRET), Duration::from_secs(180));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("TRAINER 2 done: steps 8..15"), "{stdout}");
        assert!(stdout.contains("TRAINER 0 done: steps 0..4"), "{stdout}");
        assert_eq!(model_hash(&out), want, "sleeps up to {sleep_ms} ms");
    }
}

//! Parameter servers killed with SIGKILL and restarted with the same index: a sync job loses
//! nothing (the failure-free MODEL_HASH, for kills at 10 seeded points), an async job
//! finishes and reports the updates it lost. Trainers killed with SIGKILL at seeded points of
//! their steps (`WARREN_PS_MOCK`: before, during and after a push, mid-pull) and replaced by
//! `warren run` with the same id: a sync job ends with the failure-free MODEL_HASH, an async
//! one finishes, counting the update its dead trainer lost. Real processes, real signals;
//! every test has a hard time limit.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

mod support;

use support::crash::free_port;
use support::ps::{JOB, Server, WARREN, finish, model_hash, run_limited};
use warren::ps::FailPoint;

const SECRET: &str = "ps-recovery-test-secret";

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

/// Runs a job in `mode` against two servers under `warren run`, which replaces a failed
/// trainer once, with `WARREN_PS_MOCK=mock`; returns the job's output.
fn job_with_a_dead_trainer(mode: &str, mock: &str) -> Output {
    let servers = [0, 1].map(|i| Server::start(i, 2, SECRET, &["--pull-timeout-s", "60"]));
    let uris = format!("{},{}", servers[0].uri, servers[1].uri);
    let job = Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "1", "--rendezvous-timeout", "3600", "--", WARREN])
        .args(["example", "ps-train", "--mode", mode])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", &uris)
        .env("WARREN_PS_MOCK", mock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run");
    finish(job, Duration::from_secs(240))
}

/// The trainer died where `mock` says, and `warren run` replaced it once.
fn assert_died_and_replaced(out: &Output, mock: &str, trainer: u64, step: u64) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let died = format!("WARREN_PS_MOCK: trainer Some({trainer}) dies at step {step}");
    assert!(stderr.contains(&died), "{mock}: no {died:?} in\n{stderr}");
    assert!(stdout.contains("\"restarts\":1,"), "{mock}: one restart expected:\n{stdout}");
}

#[test]
fn a_sync_job_ends_with_the_failure_free_model_when_a_trainer_is_killed_at_ten_seeded_points() {
    let want = serial();
    for seed in 0..10u64 {
        // Every point twice (mid-pull, before a push, staged everywhere, committed at one
        // server of two, after a push), every trainer, steps spread over the job.
        let point = FailPoint::ALL[(seed % 5) as usize];
        let (trainer, step) = (seed % 4, 3 + (seed * 13) % 55);
        let mock = format!("{trainer},{step},{},0", point.name());
        let out = job_with_a_dead_trainer("sync", &mock);
        assert_eq!(model_hash(&out), want, "trainer killed at {mock}");
        assert_died_and_replaced(&out, &mock, trainer, step);
    }
}

#[test]
fn async_and_ssp_jobs_finish_and_count_the_update_lost_when_a_trainer_dies_half_way_through_a_push() {
    for mode in ["async", "ssp"] {
        let mock = "2,20,half-committed,0";
        let out = job_with_a_dead_trainer(mode, mock);
        model_hash(&out);
        assert_died_and_replaced(&out, mock, 2, 20);
        // Its push of step 20 counted at server 0 only: the replacement skips server 1 past
        // it, and that one update is lost.
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("PS_LOST_UPDATES trainer 2: 1\n"), "{mode}: one lost update expected:\n{stdout}");
    }
}

/// Each trainer's step at server `index` (`warren ps status`), if it answers.
fn clocks_of(uris: &str, index: u64) -> Option<Vec<u64>> {
    let out = Command::new(WARREN)
        .args(["ps", "status"])
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", uris)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let st: serde_json::Value = serde_json::from_str(l).ok()?;
        (st["index"].as_u64()? == index).then(|| st["clocks"].as_array()?.iter().map(|c| c.as_u64()).collect())?
    })
}

/// The pid of the worker of `task` that `warren run` (pid `run`) started, once it runs.
fn worker_of(run: u32, task: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{run}/task/{run}/children")).ok()?;
    children.split_whitespace().filter_map(|p| p.parse::<u32>().ok()).find(|p| {
        std::fs::read(format!("/proc/{p}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == format!("WARREN_TASK_ID={task}").as_bytes()))
    })
}

/// Two faults overlapping in a sync job, which it cannot recover from yet: server 1 is
/// killed, and trainer 0 while it is down; server 1 comes back from its checkpoint, older
/// than pushes that only trainer 0 held. The replacement stops the job at once (no restart
/// burned on a failure that would repeat) with an error naming the cause, not a changed
/// checkpoint directory.
#[test]
fn a_sync_job_stops_at_once_naming_the_cause_when_a_server_and_a_trainer_fail_together() {
    let dir = TempDir::new("overlap");
    let ports = [free_port(), free_port()];
    let start = |i: usize| {
        let (port, d) = (ports[i].to_string(), dir.0.to_str().unwrap().to_string());
        let args =
            ["--port", &port, "--checkpoint-dir", &d, "--checkpoint-every-steps", "50", "--pull-timeout-s", "60"];
        Server::start(i, 2, SECRET, &args)
    };
    let mut servers = [start(0), start(1)];
    let uris = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let job = Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "3", "--", WARREN])
        .args(["example", "ps-train", "--mode", "sync"])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", &uris)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run");
    // Once every trainer has pushed a few steps to server 1 (none checkpointed yet).
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !clocks_of(&uris, 1).is_some_and(|c| c.len() == 4 && c.iter().all(|&s| s >= 5)) {
        assert!(std::time::Instant::now() < until, "the job made no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    let trainer = worker_of(job.id(), "0").expect("trainer 0 runs");
    servers[1].kill();
    std::thread::sleep(Duration::from_millis(200));
    let _ = Command::new("kill").args(["-9", &trainer.to_string()]).status();
    std::thread::sleep(Duration::from_millis(800));
    servers[1] = start(1);
    let out = finish(job, Duration::from_secs(120));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"restarts\":1,"), "one restart (the trainer's), none burned after:\n{stdout}\n{stderr}");
    assert!(stderr.contains("cannot succeed on retry (see its error above); stopping the job"), "{stderr}");
    assert!(
        stderr.contains("recovery impossible") && stderr.contains("not both before the server's next checkpoint"),
        "{stderr}"
    );
    assert!(!stderr.contains("checkpoint directory changed"), "{stderr}");
}

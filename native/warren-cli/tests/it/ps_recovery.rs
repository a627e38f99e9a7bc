//! Parameter servers killed with SIGKILL and restarted with the same index: a sync job loses
//! nothing (the failure-free MODEL_HASH, for kills at 10 seeded points), an async job loses
//! no update either. Trainers killed with SIGKILL at seeded points of their steps
//! (`WARREN_PS_MOCK`: before, during and after a push, mid-pull) and replaced by `warren run`
//! with the same id: a sync job ends with the failure-free MODEL_HASH, an async one finishes,
//! counting the update its dead trainer was pushing when it died. Both at once, overlapping
//! in seeded random schedules (either order, the server restarted after a random delay), in
//! sync, async and SSP: the failure-free MODEL_HASH (sync), every push applied once at every
//! server (async, SSP). Real processes, real signals; every test has a hard time limit.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::crash::free_port;
use crate::support::ps::{JOB, Server, WARREN, finish, model_hash, run_limited};
use warren::ps::FailPoint;

const SECRET: &str = "ps-recovery-test-secret";

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = crate::support::temp_dir(&format!("ps-{tag}"));
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
    checkpointed(index, port, dir, "3")
}

/// Server `index` of 2 on `port`, logging into `dir` and checkpointing every `every` steps.
fn checkpointed(index: usize, port: u16, dir: &TempDir, every: &str) -> Server {
    let port = port.to_string();
    let dir = dir.0.to_str().unwrap();
    let args = ["--port", &port, "--checkpoint-dir", dir, "--checkpoint-every-steps", every, "--pull-timeout-s", "60"];
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
fn an_async_job_loses_no_update_when_a_server_is_killed() {
    let out = job_with_a_kill("async", 1, Duration::from_millis(300), "async");
    model_hash(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lost: Vec<&str> = stdout.lines().filter(|l| l.starts_with("PS_LOST_UPDATES")).collect();
    assert_eq!(lost.len(), 4, "{stdout}");
    assert!(lost.iter().all(|l| l.ends_with(": 0")), "no update lost: {stdout}");
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

/// Every server's status (`warren ps status`), once every one answers.
fn statuses(uris: &str) -> Option<Vec<serde_json::Value>> {
    let out = Command::new(WARREN)
        .args(["ps", "status"])
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", uris)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let all: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    (all.len() == 2).then_some(all)
}

/// A seeded generator (splitmix64): the same seed, the same schedule.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// `warren run -n 4` of `warren example ps-train` with `args` against the servers at `uris`
/// (up to 3 restarts), its output piped.
fn spawn_trainers(uris: &str, args: &[&str]) -> std::process::Child {
    Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "3", "--", WARREN, "example", "ps-train"])
        .args(args)
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", uris)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run")
}

/// Waits (at most 60 s) until every one of the 4 trainers has pushed `steps` steps to server
/// `server` of `uris`.
fn wait_for_steps(uris: &str, server: u64, steps: u64) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !clocks_of(uris, server).is_some_and(|c| c.len() == 4 && c.iter().all(|&s| s >= steps)) {
        assert!(std::time::Instant::now() < until, "the job made no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server and a trainer SIGKILLed in one job, overlapping: once every trainer has pushed a
/// seeded number of steps to the victim server, the two are killed in the order the seed
/// says (`server_first`), a seeded gap apart; the server is restarted a seeded delay after
/// its kill, and `warren run` replaces the trainer. The servers checkpoint every 3 or every
/// 50 steps (most of the job then replayed from their logs). Returns the job's output and the
/// servers' statuses after it.
fn job_with_overlapping_faults(mode: &str, seed: u64, server_first: bool) -> (Output, Vec<serde_json::Value>) {
    let mut rng = Rng(seed);
    let (victim, trainer) = (rng.below(2) as usize, rng.below(4).to_string());
    let at = 3 + rng.below(20);
    let gap = Duration::from_millis(rng.below(400));
    let down = Duration::from_millis(200 + rng.below(2300));
    let every = ["3", "50"][rng.below(2) as usize];
    let dir = TempDir::new(&format!("overlap-{mode}-{seed}"));
    let ports = [free_port(), free_port()];
    let start = |i: usize| checkpointed(i, ports[i], &dir, every);
    let mut servers = [start(0), start(1)];
    let uris = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let job = spawn_trainers(&uris, &["--mode", mode, "--staleness", "2"]);
    wait_for_steps(&uris, victim as u64, at);
    let pid = worker_of(job.id(), &trainer).expect("the trainer runs");
    let kill_trainer = || {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    };
    let schedule = format!(
        "seed {seed}: {} first, server {victim} and trainer {trainer} {gap:?} apart after step {at}, server down \
         {down:?}, checkpoints every {every} steps",
        if server_first { "server" } else { "trainer" }
    );
    eprintln!("{mode}: {schedule}");
    if server_first {
        servers[victim].kill();
        std::thread::sleep(gap);
        kill_trainer();
        std::thread::sleep(down.saturating_sub(gap));
    } else {
        kill_trainer();
        std::thread::sleep(gap);
        servers[victim].kill();
        std::thread::sleep(down);
    }
    servers[victim] = start(victim);
    let out = finish(job, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{mode}, {schedule}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("\"restarts\":1,"), "{mode}, {schedule}: one restart (the trainer's):\n{stdout}");
    (out, statuses(&uris).expect("both servers answer"))
}

/// Sync: overlapping server and trainer kills in seeded random schedules, both orders, end
/// with the failure-free model.
#[test]
fn a_sync_job_ends_with_the_failure_free_model_when_server_and_trainer_kills_overlap() {
    let want = serial();
    for seed in 0..4u64 {
        let (out, _) = job_with_overlapping_faults("sync", seed, seed % 2 == 0);
        assert_eq!(model_hash(&out), want, "seed {seed}");
    }
}

/// Async and SSP: overlapping server and trainer kills in seeded random schedules lose no
/// update in the server's restart, and every server applies each push once: its pushes
/// applied, plus the one push the dead trainer had counted at the other server only (if it
/// died between the two), are every trainer's steps.
#[test]
fn async_and_ssp_jobs_apply_every_push_once_when_server_and_trainer_kills_overlap() {
    for (mode, seed) in [("async", 10u64), ("ssp", 11), ("async", 12), ("ssp", 13)] {
        let (out, status) = job_with_overlapping_faults(mode, seed, seed % 2 == 0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("restarted from a checkpoint:"), "{mode}, seed {seed}: an update lost:\n{stderr}");
        let steps: u64 = 4 * 60;
        let mut lost = 0;
        for st in &status {
            let (pushes, skipped) = (st["pushes"].as_u64().unwrap(), st["lost"].as_u64().unwrap());
            assert_eq!(st["clocks"], serde_json::json!([60, 60, 60, 60]), "{mode}, seed {seed}: {st}");
            assert_eq!(pushes + skipped, steps, "{mode}, seed {seed}: every push applied once: {st}");
            lost += skipped;
        }
        assert!(lost <= 1, "{mode}, seed {seed}: at most the dead trainer's push in flight is skipped: {status:?}");
        model_hash(&out);
    }
}

/// Two faults overlapping in a sync job: server 1 is killed, and trainer 0 while it is down;
/// server 1 comes back from its checkpoint (none taken yet) and its log, which holds every
/// push it acknowledged, also those of the lost trainer: the job ends with the failure-free
/// model after one restart (the trainer's).
#[test]
fn a_sync_job_ends_with_the_failure_free_model_when_a_server_and_a_trainer_fail_together() {
    let want = serial();
    let dir = TempDir::new("overlap");
    let ports = [free_port(), free_port()];
    let start = |i: usize| checkpointed(i, ports[i], &dir, "50");
    let mut servers = [start(0), start(1)];
    let uris = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let job = spawn_trainers(&uris, &["--mode", "sync"]);
    // Once every trainer has pushed a few steps to server 1 (none checkpointed yet).
    wait_for_steps(&uris, 1, 5);
    let trainer = worker_of(job.id(), "0").expect("trainer 0 runs");
    servers[1].kill();
    std::thread::sleep(Duration::from_millis(200));
    let _ = Command::new("kill").args(["-9", &trainer.to_string()]).status();
    std::thread::sleep(Duration::from_millis(800));
    servers[1] = start(1);
    let out = finish(job, Duration::from_secs(120));
    assert_eq!(model_hash(&out), want);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"restarts\":1,"), "one restart (the trainer's):\n{stdout}");
}

/// Whether process `pid` has exited (it is gone, or a zombie its parent has not reaped).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
}

/// Sends `signal` (e.g. "-STOP") to process `pid`.
fn signal(pid: u32, signal: &str) {
    assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success());
}

/// A half-committed step across a server's restart: trainer 0 dies having committed step 20
/// at server 0 only (`half-committed`); before its replacement starts (the launcher is held
/// with SIGSTOP), server 0 is SIGKILLed and restarted from its log (checkpoints every 50
/// steps). A commit reaches the log with the next push written there, so the restarted
/// server holds step 20 either committed (a later push carried the commit) or staged again:
/// the replacement completes the step at server 1 in the first case and undoes it at both
/// servers and computes it again in the second. Either way the job ends with the
/// failure-free model.
#[test]
fn a_half_committed_step_is_settled_after_the_committing_server_restarts_from_its_log() {
    let want = serial();
    let dir = TempDir::new("recommit");
    let ports = [free_port(), free_port()];
    let start = |i: usize| checkpointed(i, ports[i], &dir, "50");
    let mut servers = [start(0), start(1)];
    let uris = format!("127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1]);
    let job = Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "1", "--", WARREN, "example", "ps-train", "--mode", "sync"])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_PS_URIS", &uris)
        .env("WARREN_PS_MOCK", "0,20,half-committed,0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run");
    wait_for_steps(&uris, 1, 10);
    let trainer = worker_of(job.id(), "0").expect("trainer 0 runs");
    signal(job.id(), "-STOP");
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !exited(trainer) {
        assert!(std::time::Instant::now() < until, "trainer 0 did not die at step 20");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(clocks_of(&uris, 0).map(|c| c[0]), Some(21), "step 20 committed at server 0");
    assert_eq!(clocks_of(&uris, 1).map(|c| c[0]), Some(20), "step 20 only staged at server 1");
    servers[0].kill();
    servers[0] = start(0);
    let replayed = clocks_of(&uris, 0).map(|c| c[0]);
    signal(job.id(), "-CONT");
    let out = finish(job, Duration::from_secs(120));
    assert_eq!(model_hash(&out), want, "server 0 back at step {replayed:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let settled = match replayed {
        Some(21) => "trainer 0: completing its step 20, committed on some servers, staged on [1]",
        Some(20) => "trainer 0: undoing its step 20, staged on servers [0, 1] but committed on none",
        other => panic!("server 0 restarted at step {other:?} of trainer 0, not 20 or 21"),
    };
    eprintln!("server 0 restarted with trainer 0 at step {replayed:?}");
    assert!(stderr.contains(settled), "the replacement settles step 20 ({settled:?}):\n{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"restarts\":1,"), "one restart (the trainer's)");
}

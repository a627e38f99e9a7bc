//! Elastic membership with real processes, driven through the tracker's Rust API: `warren
//! example train --elastic` workers against an in-process elastic tracker; workers join,
//! leave and come back at checkpoint boundaries without any process restarting, and the same
//! membership schedule gives the same `MODEL_HASH`.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use warren::membership::Limits;
use warren::tracker::registry::WorkerState;
use warren::{Tracker, TrackerConfig};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");
/// Hard limit on one job.
const LIMIT: Duration = Duration::from_secs(120);
/// Iterations (one checkpoint each) of every job.
const ITERS: &str = "24";

struct Worker {
    task: String,
    child: Child,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

struct Done {
    task: String,
    ok: bool,
    stdout: String,
    stderr: String,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Starts the training worker of `task` (attempt `attempt`) against `tracker`.
fn spawn(tracker: &Tracker, task: &str, attempt: u32) -> Worker {
    spawn_with(tracker, task, attempt, &[], &[])
}

/// [`spawn`] with more environment and more arguments for the training job.
fn spawn_with(tracker: &Tracker, task: &str, attempt: u32, env: &[(&str, &str)], args: &[&str]) -> Worker {
    let mut child = Command::new(WARREN)
        .args(["example", "train", "--elastic", "--iters", ITERS, "--model-bytes", "40000", "--compute-ms", "100"])
        .args(args)
        .envs(tracker.worker_env())
        .envs(env.iter().copied())
        .env("WARREN_TASK_ID", task)
        .env("WARREN_ATTEMPT", attempt.to_string())
        .env("WARREN_CONNECT_TIMEOUT_S", "60")
        .env("WARREN_TIMEOUT_S", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (drain(child.stdout.take().unwrap()), drain(child.stderr.take().unwrap()));
    Worker { task: task.to_string(), child, stdout, stderr }
}

fn elastic_tracker(tasks: usize, min: usize, max: usize) -> Tracker {
    elastic_tracker_with(tasks, min, max, None)
}

/// [`elastic_tracker`] with a rejoin timeout.
fn elastic_tracker_with(tasks: usize, min: usize, max: usize, rejoin: Option<Duration>) -> Tracker {
    Tracker::start(elastic_config(tasks, min, max, rejoin)).unwrap()
}

fn elastic_config(tasks: usize, min: usize, max: usize, rejoin: Option<Duration>) -> TrackerConfig {
    let mut cfg = TrackerConfig::new(tasks, "elastic-test-secret");
    cfg.elastic = Some(Limits::new(min, max));
    cfg.rendezvous_timeout = Duration::from_secs(60);
    cfg.rejoin_timeout = rejoin;
    cfg
}

/// Waits (bounded) until `cond` holds on the tracker's registry.
fn wait_for(tracker: &Tracker, what: &str, cond: impl Fn(&warren::tracker::Registry) -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !cond(&tracker.registry()) {
        assert!(Instant::now() < until, "timed out waiting until {what}: {:?}", tracker.list());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for every worker to exit (bounded by [`LIMIT`]).
fn finish(workers: Vec<Worker>) -> Vec<Done> {
    let started = Instant::now();
    workers
        .into_iter()
        .map(|mut w| {
            let status = loop {
                if let Some(s) = w.child.try_wait().unwrap() {
                    break s;
                }
                if started.elapsed() > LIMIT {
                    let _ = w.child.kill();
                    break w.child.wait().unwrap();
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let (stdout, stderr) = (w.stdout.join().unwrap(), w.stderr.join().unwrap());
            Done { task: w.task, ok: status.success(), stdout, stderr }
        })
        .collect()
}

fn line<'a>(d: &'a Done, prefix: &str) -> Option<&'a str> {
    d.stdout.lines().find_map(|l| l.strip_prefix(prefix))
}

/// The `MODEL_HASH` rank 0 (the first worker started) printed.
fn model_of(done: &[Done]) -> String {
    line(&done[0], "MODEL_HASH ").expect("rank 0 prints the model hash").to_string()
}

/// Every task the tracker knows, with its state.
fn states(tracker: &Tracker) -> Vec<(String, String)> {
    tracker.list().unwrap().into_iter().map(|t| (t.task_id, t.state)).collect()
}

fn report(done: &[Done]) -> String {
    done.iter().map(|d| format!("--- task {} ok={}\n{}{}", d.task, d.ok, d.stdout, d.stderr)).collect()
}

/// 2 workers grow to 4 at checkpoint version 8 and shrink back to 2 (tasks 1 and 3 leave) at
/// version 16; returns the `MODEL_HASH` of the job.
fn grow_then_shrink() -> String {
    let tracker = elastic_tracker(2, 2, 4);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.add_worker("2", Some(8)).unwrap();
    tracker.add_worker("3", Some(8)).unwrap();
    tracker.remove_worker("1", Some(16)).unwrap();
    tracker.remove_worker("3", Some(16)).unwrap();
    workers.push(spawn(&tracker, "2", 0));
    workers.push(spawn(&tracker, "3", 0));
    wait_for(&tracker, "the joiners registered", |r| {
        r.state_of("2") == Some(WorkerState::Running) && r.state_of("3") == Some(WorkerState::Running)
    });
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    // The joiners loaded checkpoint 8 from their peers in a world of 4; 1 and 3 left after 16.
    assert_eq!(line(&done[2], "JOINED "), Some("8 4"), "{all}");
    assert_eq!(line(&done[3], "JOINED "), Some("8 4"), "{all}");
    assert_eq!(line(&done[1], "LEFT "), Some("16"), "{all}");
    assert_eq!(line(&done[3], "LEFT "), Some("16"), "{all}");
    assert_eq!(line(&done[2], "LEFT "), None, "{all}");
    let want = [("0", "running"), ("1", "stopped"), ("2", "running"), ("3", "stopped")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
    model_of(&done)
}

/// Grow 2 -> 4 and shrink 4 -> 2 while training, twice: the same schedule gives the same
/// model, bit for bit (the model depends on the world size, so it records the schedule).
#[test]
fn grow_and_shrink_during_training_twice_give_the_same_model() {
    let first = grow_then_shrink();
    let second = grow_then_shrink();
    assert_eq!(first, second, "the same membership schedule gave different models");
}

/// Sparse task ids 0, 2, 5: task 2 is removed at version 5, restarted (same task id, a new
/// process) and joins again at version 16; the job finishes with three workers.
#[test]
fn remove_then_restart_the_same_task_id_with_sparse_ids() {
    let tracker = elastic_tracker(3, 2, 3);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "2", 0), spawn(&tracker, "5", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.remove_worker("2", Some(5)).unwrap();
    let e = tracker.remove_worker("5", None).unwrap_err().to_string();
    assert!(e.contains("below the minimum of 2"), "{e}");
    let first = workers.remove(1);
    let left = finish(vec![first]);
    assert!(left[0].ok && line(&left[0], "LEFT ") == Some("5"), "{}", report(&left));
    tracker.restart("2", Some(16)).unwrap();
    workers.push(spawn(&tracker, "2", 1));
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert_eq!(line(&done[2], "JOINED "), Some("16 3"), "{all}");
    assert!(line(&done[0], "MODEL_HASH ").is_some(), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
}

/// Task 2 is added at version 10, registers, and only then is removed at version 20 (and,
/// in the same job, task 3 is added and removed for the next boundary right after it
/// registers): each joiner joins, then leaves as asked, and every process ends; none waits
/// for a join that the remove cancelled.
#[test]
fn a_joiner_removed_after_it_registered_joins_then_leaves() {
    let tracker = elastic_tracker(2, 2, 4);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.add_worker("2", Some(10)).unwrap();
    workers.push(spawn(&tracker, "2", 0));
    wait_for(&tracker, "task 2 registered", |r| r.state_of("2") == Some(WorkerState::Running));
    tracker.remove_worker("2", Some(20)).unwrap();
    tracker.add_worker("3", Some(4)).unwrap();
    workers.push(spawn(&tracker, "3", 0));
    wait_for(&tracker, "task 3 registered", |r| r.state_of("3") == Some(WorkerState::Running));
    tracker.remove_worker("3", None).unwrap();
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    assert!(line(&done[2], "JOINED ").is_some_and(|l| l.starts_with("10 ")), "{all}");
    assert_eq!(line(&done[2], "LEFT "), Some("20"), "{all}");
    let joined: u32 = line(&done[3], "JOINED ").expect("task 3 joins").split(' ').next().unwrap().parse().unwrap();
    assert_eq!(line(&done[3], "LEFT "), Some((joined + 1).to_string().as_str()), "{all}");
    let want = [("0", "running"), ("1", "running"), ("2", "stopped"), ("3", "stopped")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
}

/// Task 3 registers to join at version 14 and is removed for that same version; task 4,
/// added after it, takes the last place first (the maximum is 3): task 3 could only join to
/// leave again, so it is told it is not a member and ends cleanly, and no process or
/// decision waits for it. Started again afterwards, it is told it has left.
#[test]
fn a_joiner_removed_before_there_was_room_for_it_stops_and_nothing_waits() {
    let tracker = elastic_tracker(2, 2, 3);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.add_worker("3", Some(14)).unwrap();
    workers.push(spawn(&tracker, "3", 0));
    wait_for(&tracker, "task 3 registered", |r| r.state_of("3") == Some(WorkerState::Running));
    tracker.remove_worker("3", Some(14)).unwrap();
    tracker.add_worker("4", None).unwrap();
    workers.push(spawn(&tracker, "4", 0));
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "a task that is not a member any more ends cleanly: {all}");
    assert!(done[2].stderr.contains("task 3 was removed before it could join"), "{all}");
    assert!(line(&done[2], "JOINED ").is_none(), "{all}");
    assert!(line(&done[3], "JOINED ").is_some(), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    let want = [("0", "running"), ("1", "running"), ("3", "stopped"), ("4", "running")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
}

/// A task that was removed and has left, started again (as Spark re-runs a task whose
/// executor died after it left), is told it has left: it ends cleanly at once, and the job
/// finishes as without it.
#[test]
fn a_task_that_left_started_again_ends_cleanly_at_once() {
    let tracker = elastic_tracker(3, 2, 3);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0), spawn(&tracker, "2", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.remove_worker("2", Some(4)).unwrap();
    let left = finish(vec![workers.pop().unwrap()]);
    assert!(left[0].ok && line(&left[0], "LEFT ") == Some("4"), "{}", report(&left));
    let started = Instant::now();
    let again = finish(vec![spawn(&tracker, "2", 1)]);
    assert!(again[0].ok, "{}", report(&again));
    assert!(again[0].stderr.contains("task 2 was removed from the elastic job and has left it"), "{}", report(&again));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
}

/// Runs `warren ctl --tracker URI ARGS` with `secret`: (success, stdout, stderr).
fn ctl(uri: &str, secret: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(WARREN)
        .args(["ctl", "--tracker", uri])
        .args(args)
        .env("WARREN_JOB_SECRET", secret)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const SECRET: &str = "ctl-test-secret";

/// `warren run --min-workers 2 --max-workers 3` of the example job (30 iterations) with `env`;
/// `control` runs with the tracker's address once the job has started. Returns the run's
/// stdout (workers' lines and the summary) and its log.
fn elastic_run(env: &[(&str, &str)], control: impl FnOnce(&str)) -> (String, String) {
    elastic_run_with(&[], env, control)
}

/// [`elastic_run`] with more arguments for `warren run`.
fn elastic_run_with(run_args: &[&str], env: &[(&str, &str)], control: impl FnOnce(&str)) -> (String, String) {
    let train = ["example", "train", "--elastic", "--iters", "30", "--model-bytes", "40000", "--compute-ms", "100"];
    let mut run = Command::new(WARREN)
        .args(["run", "--min-workers", "2", "--max-workers", "3"])
        .args(run_args)
        .args(["--", WARREN])
        .args(train)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_CONNECT_TIMEOUT_S", "60")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = run.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut all = String::new();
        for l in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if let Some(rest) = l.split("tracker: listening on ").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or_default().to_string());
            }
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let stdout = drain(run.stdout.take().unwrap());
    let uri = rx.recv_timeout(Duration::from_secs(30)).expect("the launcher logs its tracker's address");
    let until = Instant::now() + Duration::from_secs(30);
    while !ctl(&uri, SECRET, &["list"]).0 {
        assert!(Instant::now() < until, "the job never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    control(&uri);
    let started = Instant::now();
    while run.try_wait().unwrap().is_none() {
        if started.elapsed() > LIMIT {
            let _ = run.kill();
            panic!("the job hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (stdout.join().unwrap(), log.join().unwrap())
}

/// `warren run --min-workers 2 --max-workers 3` controlled with `warren ctl`: task 2 is added
/// (the launcher starts its worker) and joins at version 12, task 1 is removed at version 20,
/// a remove below the minimum and a wrong secret are refused with clear errors, and the job
/// finishes.
#[test]
fn warren_ctl_grows_and_shrinks_an_elastic_warren_run() {
    let (out, log) = elastic_run(&[], |uri| {
        let (ok, out, err) = ctl(uri, SECRET, &["add", "2", "--at-version", "12"]);
        assert!(ok, "{err}");
        assert!(out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "joining", "-"]), "{out}");
        assert!(ctl(uri, SECRET, &["remove", "1", "--at-version", "20"]).0);
        let (ok, _, err) = ctl(uri, SECRET, &["remove", "0"]);
        assert!(!ok && err.contains("removing task 0 would leave 1 workers, below the minimum of 2"), "{err}");
        let (ok, _, err) = ctl(uri, "wrong-secret", &["list"]);
        assert!(!ok && err.contains("authentication"), "{err}");
    });
    assert!(out.contains("\"status\":\"ok\""), "{out}\n{log}");
    assert!(out.lines().any(|l| l == "JOINED 12 3"), "{out}\n{log}");
    assert!(out.lines().any(|l| l == "LEFT 20"), "{out}\n{log}");
    assert!(out.contains("MODEL_HASH "), "{out}");
}

/// `warren ctl` driven only by what `warren run` prints: with no secret exported, the run
/// prints its tracker's address and the secret file it made (mode 0600, removed at the end);
/// an add of a task id that is not a number is refused, an add of task 2 makes it join; once
/// the job is over, `ctl` says at once that nothing listens there.
#[test]
fn warren_ctl_works_from_what_warren_run_prints() {
    let train = ["example", "train", "--elastic", "--iters", "30", "--model-bytes", "40000", "--compute-ms", "100"];
    let mut run = Command::new(WARREN)
        .args(["run", "--min-workers", "2", "--max-workers", "3", "--", WARREN])
        .args(train)
        .env_remove("WARREN_JOB_SECRET")
        .env_remove("WARREN_JOB_SECRET_FILE")
        .env("WARREN_CONNECT_TIMEOUT_S", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, out) = follow(run.stdout.take().unwrap());
    let file = printed(&lines, "WARREN_JOB_SECRET_FILE=");
    let uri = printed(&lines, "WARREN_TRACKER_URI=");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let ctl = |args: &[&str]| {
        let o = Command::new(WARREN)
            .args(["ctl", "--tracker", &uri])
            .args(args)
            .env_remove("WARREN_JOB_SECRET")
            .env("WARREN_JOB_SECRET_FILE", &file)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let until = Instant::now() + Duration::from_secs(30);
    while !ctl(&["list"]).0 {
        assert!(Instant::now() < until, "the job never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, _, err) = ctl(&["add", "abc"]);
    assert!(!ok && err.contains("task id \"abc\" is not a number"), "{err}");
    let (ok, _, err) = ctl(&["add", ""]);
    assert!(!ok && err.contains("cannot be a task id"), "{err}");
    let (ok, _, err) = ctl(&["add", "2", "--at-version", "12"]);
    assert!(ok, "{err}");
    let started = Instant::now();
    while run.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < LIMIT, "the job hung");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = out.join().unwrap();
    assert!(out.contains("\"status\":\"ok\"") && out.lines().any(|l| l == "JOINED 12 3"), "{out}");
    assert!(!std::path::Path::new(&file).exists(), "the secret file outlived the job");
    std::fs::write(&file, "gone").unwrap();
    let asked = Instant::now();
    let (ok, _, err) = ctl(&["list"]);
    let _ = std::fs::remove_file(&file);
    assert!(!ok && err.contains("connection refused"), "{err}");
    assert!(asked.elapsed() < Duration::from_secs(5), "a refused connection took {:?}", asked.elapsed());
}

/// A kill during a resize: task 2 joins at version 12 and rank 0 dies (`WARREN_MOCK`) at the
/// first call after the change, while the joiner is still catching up; `warren run` restarts
/// it, it recovers its local model from the replica renumbered for the new view, and the job
/// ends with the model of the same schedule without the kill.
#[test]
fn a_kill_right_after_a_resize_is_recovered_with_the_same_model() {
    let grow = |uri: &str| assert!(ctl(uri, SECRET, &["add", "2", "--at-version", "12"]).0);
    let (clean, log) = elastic_run(&[], grow);
    let (killed, killed_log) = elastic_run(&[("WARREN_MOCK", "0,12,0,0")], grow);
    let hash = |out: &str| out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string);
    assert!(clean.contains("\"status\":\"ok\"") && clean.contains("\"restarts\":0"), "{clean}\n{log}");
    assert!(killed.contains("\"status\":\"ok\""), "{killed}\n{killed_log}");
    assert!(killed.contains("\"restarts\":1"), "the mock kill did not happen:\n{killed}\n{killed_log}");
    assert!(killed.lines().any(|l| l == "JOINED 12 3"), "{killed}\n{killed_log}");
    assert_eq!(hash(&killed), hash(&clean), "killed run:\n{killed}\n{killed_log}\nclean run:\n{clean}\n{log}");
}

/// A joiner killed at its first call after joining, while the members still serve it: the
/// launcher restarts only the joiner (one restart is enough: `--max-restarts 1`), its
/// replacement loads the checkpoint again, and the job ends with the model of the same
/// schedule without the kill. Before, a member that left the serving with its links as they
/// were sent its next call to a peer still serving, which failed on a malformed call header.
#[test]
fn a_joiner_killed_right_after_it_joined_costs_one_restart() {
    let grow = |uri: &str| assert!(ctl(uri, SECRET, &["add", "2", "--at-version", "12"]).0);
    let one = ["--max-restarts", "1"];
    let (clean, log) = elastic_run_with(&one, &[], grow);
    let (killed, killed_log) = elastic_run_with(&one, &[("WARREN_MOCK", "2,12,0,0")], grow);
    let hash = |out: &str| out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string);
    assert!(clean.contains("\"status\":\"ok\""), "{clean}\n{log}");
    assert!(killed.contains("\"status\":\"ok\"") && killed.contains("\"restarts\":1"), "{killed}\n{killed_log}");
    assert!(killed_log.contains("WARREN_MOCK: rank 2 exits"), "the mock kill did not happen:\n{killed_log}");
    assert_eq!(killed.lines().filter(|l| *l == "JOINED 12 3").count(), 2, "{killed}\n{killed_log}");
    assert_eq!(hash(&killed), hash(&clean), "killed run:\n{killed}\n{killed_log}\nclean run:\n{clean}\n{log}");
}

/// One control request of a schedule: (`add`, `remove` or `restart`, task id, version).
type Request = (&'static str, u32, u32);

/// A seeded random schedule of 2-4 requests on an elastic job of tasks 0 and 1 (min 2, max
/// 5): adds of new task ids, removes of members and restarts of removed tasks, at increasing
/// checkpoint versions from 7 on, never outside the limits (as the tracker would accept
/// them).
fn schedule(seed: u64) -> Vec<Request> {
    let mut state = seed;
    let mut next = |n: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let (mut target, mut stopped, mut fresh): (Vec<u32>, Vec<u32>, u32) = (vec![0, 1], Vec::new(), 2);
    let mut out = Vec::new();
    let mut version = 2;
    for _ in 0..2 + next(3) {
        version += 5 + next(4) as u32;
        let mut choices: Vec<&'static str> = Vec::new();
        if target.len() < 5 {
            choices.push("add");
            if !stopped.is_empty() {
                choices.push("restart");
            }
        }
        if target.len() > 2 {
            choices.push("remove");
        }
        let req = match choices[next(choices.len() as u64) as usize] {
            "add" => {
                fresh += 1 + next(2) as u32;
                target.push(fresh);
                ("add", fresh, version)
            }
            "restart" => {
                let t = stopped.remove(next(stopped.len() as u64) as usize);
                target.push(t);
                ("restart", t, version)
            }
            _ => {
                // Prefer a task that joined: "add X ... remove X" is the schedule that hung.
                let t = *target.iter().rev().find(|t| **t > 1).unwrap_or(&target[0]);
                target.retain(|x| *x != t);
                stopped.push(t);
                ("remove", t, version)
            }
        };
        out.push(req);
    }
    out
}

/// Runs `schedule` through `warren ctl` against `warren run --min-workers 2 --max-workers 5`
/// (50 iterations), all requests sent when the job starts or, `sent_late`, each add followed
/// by a wait until its task has registered (so a later remove of it comes after that). Returns the model hash; the job must end, with status ok.
fn run_schedule(schedule: &[Request], sent_late: bool) -> String {
    let train = ["example", "train", "--elastic", "--iters", "50", "--model-bytes", "40000", "--compute-ms", "100"];
    let mut run = Command::new(WARREN)
        .args(["run", "--min-workers", "2", "--max-workers", "5", "--max-restarts", "0", "--", WARREN])
        .args(train)
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_CONNECT_TIMEOUT_S", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, stdout) = follow(run.stdout.take().unwrap());
    let stderr = drain(run.stderr.take().unwrap());
    let started = Instant::now();
    let uri = printed(&lines, "WARREN_TRACKER_URI=");
    while !ctl(&uri, SECRET, &["list"]).0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    for &(what, task, version) in schedule {
        let (task, version) = (task.to_string(), version.to_string());
        let (ok, _, err) = ctl(&uri, SECRET, &[what, &task, "--at-version", &version]);
        assert!(ok, "{what} {task} at {version}: {err}");
        if sent_late && what == "add" {
            // Wait for its worker to register (the launcher starts it).
            let until = Instant::now() + Duration::from_secs(20);
            while !status_registered(&uri, &task) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    while run.try_wait().unwrap().is_none() {
        if started.elapsed() > LIMIT {
            let _ = run.kill();
            panic!("the job hung with schedule {schedule:?} (sent late: {sent_late})\n{}", stderr.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, log) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(out.contains("\"status\":\"ok\""), "{schedule:?}:\n{out}\n{log}");
    out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).expect("a model hash").to_string()
}

/// Follows a child's stdout: each line as it comes, and all of it at the end.
fn follow(out: impl Read + Send + 'static) -> (std::sync::mpsc::Receiver<String>, JoinHandle<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let all = std::thread::spawn(move || {
        let mut all = String::new();
        for l in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    (rx, all)
}

/// The value of the first line starting with `key` (bounded wait).
fn printed(lines: &std::sync::mpsc::Receiver<String>, key: &str) -> String {
    loop {
        let l = lines.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no {key} line"));
        if let Some(v) = l.strip_prefix(key) {
            return v.to_string();
        }
    }
}

/// Whether `task`'s worker has registered with the tracker at `uri` (`warren ctl list` does
/// not tell; the tracker's status does).
fn status_registered(uri: &str, task: &str) -> bool {
    let secret = SECRET.as_bytes();
    let deadline = Instant::now() + Duration::from_secs(5);
    let Ok(mut c) = warren::tracker::TrackerClient::connect_now(uri, secret, None, deadline) else { return false };
    match c.request(&warren::tracker::proto::ToTracker::Status, deadline) {
        Ok(warren::tracker::proto::FromTracker::Status { registered, finished, .. }) => {
            registered.iter().any(|t| t == task) && !finished.iter().any(|t| t == task)
        }
        _ => false,
    }
}

/// Seeded random schedules of adds, removes and restarts (with "add X ... remove X" among
/// them), sent before the joiners register and again each after its task registered: every
/// job ends (none waits for a worker that will never come), and the same schedule gives the
/// same model both ways.
#[test]
fn random_schedules_end_and_give_the_same_model_whenever_sent() {
    for seed in [3, 11, 42] {
        let s = schedule(seed);
        eprintln!("seed {seed}: {s:?}");
        let early = run_schedule(&s, false);
        let late = run_schedule(&s, true);
        assert_eq!(early, late, "schedule {s:?} (seed {seed}) gave two models");
    }
}

/// Kills at each phase of a view change, one per run, under `warren run --max-restarts 1`:
/// task 2 joins at checkpoint 8 and leaves at 14. The joiner before linking and at its first
/// call; a stayer when the join is decided; the leaver before its leave is decided and when
/// it is (then it has left: nothing to replace). Each costs at most its own restart, and the
/// job ends with the model of the same schedule without a kill. Before, the leaver lost at
/// its view change was replaced, the replacement was refused, and the job failed.
#[test]
fn a_kill_at_any_phase_of_a_view_change_costs_at_most_its_own_restart() {
    let schedule = |uri: &str| {
        assert!(ctl(uri, SECRET, &["add", "2", "--at-version", "8"]).0);
        assert!(ctl(uri, SECRET, &["remove", "2", "--at-version", "14"]).0);
    };
    let one = ["--max-restarts", "1"];
    let hash = |out: &str| out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string);
    let (clean, log) = elastic_run_with(&one, &[], schedule);
    assert!(clean.contains("\"status\":\"ok\"") && clean.lines().any(|l| l == "LEFT 14"), "{clean}\n{log}");
    let cases = [
        ("2,linking,0", "the joiner before linking", 1),
        ("2,8,0,0", "the joiner at its first call", 1),
        ("0,resize,0", "a stayer when the join is decided", 1),
        ("1,8,0,0", "a stayer at its first call with the joiner", 1),
        ("2,12,1,0", "the leaver before its leave is decided", 1),
        ("2,resize,0", "the leaver when its leave is decided", 0),
    ];
    for (mock, what, restarts) in cases {
        let (killed, killed_log) = elastic_run_with(&one, &[("WARREN_MOCK", mock)], schedule);
        let context = format!("{what} ({mock}):\n{killed}\n{killed_log}");
        assert!(killed_log.contains(&format!("exits at {mock}")), "the kill did not happen: {context}");
        assert!(killed.contains("\"status\":\"ok\""), "{context}");
        assert!(killed.contains(&format!("\"restarts\":{restarts}")), "{context}");
        assert_eq!(hash(&killed), hash(&clean), "{context}");
    }
}

/// The rejoin timeout of the tests below.
const REJOIN: Duration = Duration::from_secs(2);

/// Tasks 0, 1, 2 (min 2); task 1 dies at the second call after checkpoint 10
/// (`WARREN_MOCK`) and nobody restarts it. Returns the tracker, the survivors and the dead
/// worker's result once the tracker has given up on it.
fn lose_task_1_for_good() -> (Tracker, Vec<Worker>, Done) {
    let tracker = elastic_tracker_with(3, 2, 3, Some(REJOIN));
    let dies = spawn_with(&tracker, "1", 0, &[("WARREN_MOCK", "1,10,1,0")], &[]);
    let workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "2", 0)];
    let dead = finish(vec![dies]).remove(0);
    assert!(!dead.ok && dead.stderr.contains("WARREN_MOCK: rank 1 exits"), "{}", report(&[dead]));
    let lost = |t: &Tracker| t.list().is_ok_and(|l| l.iter().any(|t| t.task_id == "1" && t.state == "lost"));
    let until = Instant::now() + REJOIN + Duration::from_secs(30);
    while !lost(&tracker) {
        assert!(Instant::now() < until, "task 1 was never given up on: {:?}", tracker.list());
        std::thread::sleep(Duration::from_millis(10));
    }
    (tracker, workers, dead)
}

/// A lost worker whose replacement never registers: dropped after the rejoin timeout, the
/// survivors roll back to checkpoint 10 in the view without it and finish; returns the model.
fn never_comes_back() -> String {
    let (tracker, workers, _) = lose_task_1_for_good();
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    for d in &done {
        assert_eq!(line(d, "ROLLED_BACK "), Some("10 2"), "{all}");
    }
    let want = [("0", "running"), ("1", "lost"), ("2", "running")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
    model_of(&done)
}

/// The schedule "task 1 leaves at checkpoint 10", as a graceful remove; returns the model.
fn removed_at_10() -> String {
    let tracker = elastic_tracker(3, 2, 3);
    let workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0), spawn(&tracker, "2", 0)];
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.remove_worker("1", Some(10)).unwrap();
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok) && line(&done[1], "LEFT ") == Some("10"), "{all}");
    model_of(&done)
}

/// A replacement that never comes back: after the rejoin timeout the job goes on without it
/// from the last checkpoint; twice, the same model, bit for bit, and the model of the same
/// schedule made with a graceful remove at that checkpoint (the calls made after it in the
/// old view are dropped, not kept).
#[test]
fn a_worker_that_never_comes_back_is_dropped_and_the_survivors_roll_back() {
    let first = never_comes_back();
    let second = never_comes_back();
    assert_eq!(first, second, "the same schedule gave different models");
    assert_eq!(first, removed_at_10(), "the roll-back did not give the model of a remove at checkpoint 10");
}

/// The given-up worker comes back (a new process of task 1): it rejoins at a later
/// checkpoint, loading the model from its peers, and the job finishes with three workers.
#[test]
fn a_worker_given_up_on_rejoins_when_it_comes_back() {
    let (tracker, mut workers, _) = lose_task_1_for_good();
    workers.push(spawn(&tracker, "1", 1));
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    let joined = line(&done[2], "JOINED ").expect("task 1 rejoins");
    let (version, world) = joined.split_once(' ').unwrap();
    assert!(version.parse::<u32>().unwrap() > 10 && world == "3", "{all}");
    assert!(tracker.list().unwrap().iter().all(|t| t.state == "running"), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
}

/// A worker lost for good when going on without it would leave fewer than the minimum: the
/// job fails with an error naming the missing task, on the tracker and on the survivors.
#[test]
fn a_drop_below_the_minimum_fails_the_job_naming_the_missing_tasks() {
    let tracker = elastic_tracker_with(3, 3, 3, Some(REJOIN));
    let dies = spawn_with(&tracker, "1", 0, &[("WARREN_MOCK", "1,5,1,0")], &[]);
    let workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "2", 0)];
    let done = finish(workers);
    let all = report(&done);
    let e = tracker.wait(Some(Duration::from_secs(10))).unwrap_err().to_string();
    assert!(e.contains("tasks [\"1\"]") && e.contains("below the minimum of 3"), "{e}\n{all}");
    for d in &done {
        assert!(!d.ok && d.stderr.contains("below the minimum of 3"), "{all}");
    }
    drop(finish(vec![dies]));
}

/// A join while a recovery is running: task 1 dies after checkpoint 6 and its replacement
/// takes 4 s to come back; meanwhile task 2 is added and registers. The recovery completes
/// without it, and it joins at the next boundary; the job finishes with three workers.
#[test]
fn a_join_while_a_recovery_is_running() {
    let tracker = elastic_tracker(2, 2, 3);
    let dies = spawn_with(&tracker, "1", 0, &[("WARREN_MOCK", "1,6,1,0")], &["--rejoin-delay-ms", "4000"]);
    let mut workers = vec![spawn(&tracker, "0", 0)];
    let dead = finish(vec![dies]).remove(0);
    assert!(!dead.ok, "{}", report(&[dead]));
    workers.push(spawn_with(&tracker, "1", 1, &[], &["--rejoin-delay-ms", "4000"]));
    wait_for(&tracker, "the survivor waits in a re-link round", |r| r.round_members() == ["0"]);
    tracker.add_worker("2", None).unwrap();
    workers.push(spawn(&tracker, "2", 0));
    wait_for(&tracker, "task 2 registered during the recovery", |r| {
        r.state_of("2") == Some(WorkerState::Running) && r.round_members() == ["0"]
    });
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    let joined = line(&done[2], "JOINED ").expect("task 2 joins");
    let (version, world) = joined.split_once(' ').unwrap();
    assert!(version.parse::<u32>().unwrap() >= 6 && world == "3", "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
}

/// Tasks 0 and 1 train (a checkpoint every ~0.1 s); task 2 is added once they are past
/// checkpoint 2, and its worker started `delay` later. Returns the version decided when it was
/// added and the version it joined at.
fn late_join(join_hold: Duration, delay: Duration) -> (u32, u32) {
    let mut cfg = elastic_config(2, 2, 3, None);
    cfg.join_hold = join_hold;
    let tracker = Tracker::start(cfg).unwrap();
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "1", 0)];
    wait_for(&tracker, "the members are past checkpoint 2", |r| r.decided_version() >= Some(2));
    let at_add = tracker.registry().decided_version().unwrap();
    tracker.add_worker("2", None).unwrap();
    std::thread::sleep(delay);
    workers.push(spawn(&tracker, "2", 0));
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    let joined = line(&done[2], "JOINED ").unwrap_or_else(|| panic!("task 2 joins: {all}"));
    assert!(joined.ends_with(" 3"), "a world of 3: {all}");
    (at_add, joined.split_once(' ').unwrap().0.parse().unwrap())
}

/// A worker added while its process starts slowly (here: started 1 s after the add, ~10
/// checkpoint intervals) joins at the first boundary after the add: the tracker holds that
/// boundary's decision for it (the join hold). Without the hold it joins boundaries later.
#[test]
fn an_added_worker_that_starts_late_joins_at_the_first_boundary_after_the_add() {
    let delay = Duration::from_secs(1);
    let (at_add, joined) = late_join(Duration::from_secs(5), delay);
    // The first boundary after the add: at_add + 1, or + 2 if the members asked about
    // at_add + 1 between the test's reading and its add.
    assert!(joined <= at_add + 2, "added after version {at_add}, joined at {joined}");
    let (at_add, joined) = late_join(Duration::ZERO, delay);
    assert!(joined > at_add + 2, "no hold: the members go on; added after {at_add}, joined at {joined}");
}

/// `warren run --rejoin-timeout 2 --max-restarts 0`: task 2 joins at version 4 and dies at
/// the second call after checkpoint 12; with no restart left the launcher leaves it dead, the
/// tracker drops it after the timeout, the two others roll back to checkpoint 12 and the job
/// finishes ok.
#[test]
fn warren_run_goes_on_without_a_worker_that_is_not_back_within_the_rejoin_timeout() {
    let run_args = ["--rejoin-timeout", "2", "--max-restarts", "0"];
    let grow = |uri: &str| assert!(ctl(uri, SECRET, &["add", "2", "--at-version", "4"]).0);
    let (out, log) = elastic_run_with(&run_args, &[("WARREN_MOCK", "2,12,1,0")], grow);
    assert!(out.contains("\"status\":\"ok\""), "{out}\n{log}");
    assert_eq!(out.lines().filter(|l| *l == "ROLLED_BACK 12 2").count(), 2, "{out}\n{log}");
    assert!(log.contains("no replacement for tasks [\"2\"] within the rejoin timeout"), "{log}");
    assert!(out.contains("MODEL_HASH "), "{out}");
}

/// The schedule "tasks `leave` leave at checkpoint 10" of a job of tasks 0..4, as graceful
/// removes; returns the model.
fn four_with_removed_at_10(leave: &[&str]) -> String {
    let tracker = elastic_tracker(4, 2, 4);
    let workers: Vec<Worker> = ["0", "1", "2", "3"].iter().map(|t| spawn(&tracker, t, 0)).collect();
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    for t in leave {
        tracker.remove_worker(t, Some(10)).unwrap();
    }
    let done = finish(workers);
    let all = report(&done);
    assert!(done.iter().all(|d| d.ok), "{all}");
    for t in leave {
        let d = done.iter().find(|d| d.task == *t).unwrap();
        assert_eq!(line(d, "LEFT "), Some("10"), "{all}");
    }
    model_of(&done)
}

/// A second worker lost during the roll-back: tasks 0..4 (min 2); task 1 dies at the second
/// call after checkpoint 10 and is never restarted; once the tracker gives up on it, task 3
/// dies right when it is told to roll back (`WARREN_MOCK` `3,rollback,0`), while the others
/// link in the view without task 1. The tracker gives up on task 3 too and tells the
/// survivors, who are still linking to it, to re-link: they roll back to checkpoint 10 in a
/// view of two and finish with the model of "tasks 1 and 3 leave at checkpoint 10".
#[test]
fn a_second_worker_lost_during_the_roll_back_is_given_up_on_too() {
    let tracker = elastic_tracker_with(4, 2, 4, Some(REJOIN));
    let dies = spawn_with(&tracker, "1", 0, &[("WARREN_MOCK", "1,10,1,0")], &[]);
    let dies_in_roll_back = spawn_with(&tracker, "3", 0, &[("WARREN_MOCK", "3,rollback,0")], &[]);
    let survivors = vec![spawn(&tracker, "0", 0), spawn(&tracker, "2", 0)];
    let done = finish(survivors);
    let dead = finish(vec![dies, dies_in_roll_back]);
    let all = report(&done) + &report(&dead);
    assert!(dead[1].stderr.contains("WARREN_MOCK: rank 3 exits at 3,rollback,0"), "{all}");
    assert!(done.iter().all(|d| d.ok), "{all}");
    for d in &done {
        assert_eq!(line(d, "ROLLED_BACK "), Some("10 2"), "{all}");
    }
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    let want = [("0", "running"), ("1", "lost"), ("2", "running"), ("3", "lost")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
    assert_eq!(model_of(&done), four_with_removed_at_10(&["1", "3"]), "{all}");
}

/// A restart and a give-up in the same round: tasks 1 and 3 die at the same call after
/// checkpoint 10; task 3's replacement registers at once, task 1's never does. The round the
/// survivors wait in completes when the tracker gives up on task 1, with task 3's
/// replacement in it: the survivors roll back to checkpoint 10 (the version they told the
/// tracker), the replacement catches up from them, and the job ends with the model of "task
/// 1 leaves at checkpoint 10".
#[test]
fn a_restart_and_a_give_up_in_the_same_round() {
    let tracker = elastic_tracker_with(4, 2, 4, Some(REJOIN));
    let dies = spawn_with(&tracker, "1", 0, &[("WARREN_MOCK", "1,10,1,0")], &[]);
    let restarted = spawn_with(&tracker, "3", 0, &[("WARREN_MOCK", "3,10,1,0")], &[]);
    let mut workers = vec![spawn(&tracker, "0", 0), spawn(&tracker, "2", 0)];
    let dead = finish(vec![restarted]).remove(0);
    assert!(!dead.ok && dead.stderr.contains("WARREN_MOCK: rank 3 exits"), "{}", report(&[dead]));
    workers.push(spawn(&tracker, "3", 1));
    let done = finish(workers);
    let gone = finish(vec![dies]);
    let all = report(&done) + &report(&gone);
    assert!(done.iter().all(|d| d.ok), "{all}");
    for d in &done[..2] {
        assert_eq!(line(d, "ROLLED_BACK "), Some("10 3"), "{all}");
    }
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    let want = [("0", "running"), ("1", "lost"), ("2", "running"), ("3", "running")];
    assert_eq!(states(&tracker), want.map(|(t, s)| (t.to_string(), s.to_string())), "{all}");
    assert_eq!(model_of(&done), four_with_removed_at_10(&["1"]), "{all}");
}

/// Kills during resizes under `warren run`: task 2 joins at checkpoint 12 and task 1 is
/// removed at 20; task 1 dies when the tracker has answered the join (`1,resize,0`) and task
/// 2 when it has answered the remove (`2,resize,0`), each before entering the new view.
/// `warren run` restarts both; each re-registers into the new view and catches up from the
/// others, and the job ends with the model of the same schedule without the kills.
#[test]
fn kills_during_a_join_and_a_remove_taking_effect_are_recovered() {
    let schedule = |uri: &str| {
        assert!(ctl(uri, SECRET, &["add", "2", "--at-version", "12"]).0);
        assert!(ctl(uri, SECRET, &["remove", "1", "--at-version", "20"]).0);
    };
    let (clean, log) = elastic_run(&[], schedule);
    let (killed, killed_log) = elastic_run(&[("WARREN_MOCK", "1,resize,0;2,resize,0")], schedule);
    let hash = |out: &str| out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string);
    assert!(clean.contains("\"status\":\"ok\"") && clean.contains("\"restarts\":0"), "{clean}\n{log}");
    assert!(killed.contains("\"status\":\"ok\""), "{killed}\n{killed_log}");
    assert!(killed.contains("\"restarts\":2"), "the mock kills did not both happen:\n{killed}\n{killed_log}");
    assert!(killed_log.contains("exits at 1,resize,0") && killed_log.contains("exits at 2,resize,0"), "{killed_log}");
    assert!(killed.lines().any(|l| l == "JOINED 12 3") && killed.lines().any(|l| l == "LEFT 20"), "{killed}");
    assert_eq!(hash(&killed), hash(&clean), "killed run:\n{killed}\n{killed_log}\nclean run:\n{clean}\n{log}");
}

/// Four workers on two hosts (two each, in task order) grow to six at version 8, tasks 4 and
/// 5 joining on a third host; with one replica of each local model, both workers of the first
/// host exit at once at version 14 (`WARREN_MOCK`, two entries at the same call) when `lose`,
/// and are replaced on the other hosts. Returns the model and every worker's report. The
/// replicas follow the replica ring the new view's hosts give, so each model had its replica
/// on another host.
fn grow_then_lose_a_host(lose: bool) -> (String, String) {
    let tracker = elastic_tracker(4, 2, 6);
    let mock = if lose { "0,14,0,0;1,14,0,0" } else { "" };
    let on = |t: usize, host: usize| {
        let host = format!("h{host}");
        let env = [("WARREN_HOST_ID", host.as_str()), ("WARREN_LOCAL_REPLICAS", "1"), ("WARREN_MOCK", mock)];
        spawn_with(&tracker, &t.to_string(), 0, &env, &[])
    };
    let mut workers: Vec<Worker> = (0..4).map(|t| on(t, t / 2)).collect();
    wait_for(&tracker, "the first view is made", |r| r.assigned());
    tracker.add_worker("4", Some(8)).unwrap();
    tracker.add_worker("5", Some(8)).unwrap();
    workers.extend([on(4, 2), on(5, 2)]);
    let mut lost = Vec::new();
    if lose {
        for t in [0, 1] {
            let status = workers[t].child.wait().unwrap();
            assert_eq!(status.code(), Some(86), "task {t} exits at its WARREN_MOCK point");
            let env = [("WARREN_HOST_ID", if t == 0 { "h1" } else { "h2" }), ("WARREN_LOCAL_REPLICAS", "1")];
            let replacement = spawn_with(&tracker, &t.to_string(), 1, &env, &[]);
            lost.push(std::mem::replace(&mut workers[t], replacement));
        }
    }
    let done = finish(workers);
    let all = report(&done) + &report(&finish(lost));
    assert!(done.iter().all(|d| d.ok), "{all}");
    assert!(tracker.wait(Some(Duration::from_secs(10))).is_ok(), "{all}");
    assert_eq!(line(&done[4], "JOINED "), Some("8 6"), "{all}");
    (model_of(&done), all)
}

/// A whole host lost after an elastic view change (both its workers at once): the job ends
/// with the model of the same schedule without the loss. Before, rank 0's only replica was
/// rank 1, on the same host, and recovery was impossible.
#[test]
fn a_host_lost_after_a_view_change_is_recovered_with_the_same_model() {
    let (want, _) = grow_then_lose_a_host(false);
    let (got, all) = grow_then_lose_a_host(true);
    assert!(all.contains("WARREN_MOCK: rank 0 exits") && all.contains("WARREN_MOCK: rank 1 exits"), "{all}");
    assert_eq!(got, want, "{all}");
}

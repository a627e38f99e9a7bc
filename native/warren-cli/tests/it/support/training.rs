//! What the recovery tests share: `warren run` of the example training job with a hard time
//! limit, its summary and `MODEL_HASH`, and SIGKILLs of given tasks while it runs.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const WARREN: &str = env!("CARGO_BIN_EXE_warren");
/// Hard limit on one job.
pub const LIMIT: Duration = Duration::from_secs(90);

/// A finished `warren run`.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn summary(&self) -> serde_json::Value {
        let line = self.stdout.lines().find_map(|l| l.strip_prefix("WARREN_RUN_SUMMARY ")).expect("summary line");
        serde_json::from_str(line).unwrap()
    }
    pub fn hash(&self) -> Option<String> {
        self.stdout.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string)
    }
    pub fn restarts(&self) -> u64 {
        self.summary()["restarts"].as_u64().unwrap()
    }
    pub fn ok(&self) -> bool {
        self.summary()["status"] == "ok"
    }
}

/// A running `warren run`, for killing its workers.
pub struct Job {
    /// The launcher's pid.
    pub launcher: u32,
    assigned: mpsc::Receiver<()>,
}

impl Job {
    /// Waits (at most 30 s) until the tracker has assigned ranks: every worker has joined and
    /// is about to link and make its first calls.
    pub fn wait_assigned(&self) {
        self.assigned.recv_timeout(Duration::from_secs(30)).expect("the workers did not all join");
    }

    /// SIGKILLs the running worker of `task`; false if it is not running.
    pub fn kill_task(&self, task: usize) -> bool {
        self.signal_task(task, "KILL").is_some()
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`, `"KILL"`) to the running worker of `task`; its pid,
    /// or `None` if it is not running.
    pub fn signal_task(&self, task: usize, signal: &str) -> Option<u32> {
        let pid = worker_pid(self.launcher, task)?;
        let sent = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status();
        sent.map(|s| s.success()).unwrap_or(false).then_some(pid)
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`) to the launcher itself (and the tracker it runs).
    pub fn signal_launcher(&self, signal: &str) {
        let sent = Command::new("kill").args([&format!("-{signal}"), &self.launcher.to_string()]).status();
        assert!(sent.unwrap().success(), "kill -{signal} {}", self.launcher);
    }
}

/// The pid of the worker of `task` among the launcher's children (from its environment).
pub fn worker_pid(launcher: u32, task: usize) -> Option<u32> {
    let out = Command::new("pgrep").args(["-P", &launcher.to_string()]).output().ok()?;
    let wanted = format!("WARREN_TASK_ID={task}");
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse::<u32>().ok()).find(|pid| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|env| env.split(|&b| b == 0).any(|kv| kv == wanted.as_bytes()))
            .unwrap_or(false)
    })
}

/// [`launch`] with the worker of `task` SIGKILLed 300 ms after the ranks are assigned.
pub fn launch_killing(n: usize, train_args: &[&str], env: &[(&str, &str)], task: usize) -> Run {
    launch(n, &[], train_args, env, |job| {
        job.wait_assigned();
        std::thread::sleep(Duration::from_millis(300));
        assert!(job.kill_task(task), "task {task} was not running");
    })
}

/// `warren run -n N` of `warren example train TRAIN_ARGS`; `kill` runs while the job does
/// (for external kills), and the run is bounded by [`LIMIT`].
pub fn launch(n: usize, run_args: &[&str], train_args: &[&str], env: &[(&str, &str)], kill: impl FnOnce(&Job)) -> Run {
    let mut cmd = Command::new(WARREN);
    cmd.args(["run", "-n", &n.to_string(), "--max-restarts", "10"]).args(run_args);
    cmd.args(["--", WARREN, "example", "train"]).args(train_args);
    cmd.env("WARREN_CONNECT_TIMEOUT_S", "30").env("WARREN_TIMEOUT_S", "30");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, assigned) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("ranks assigned") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    kill(&Job { launcher: child.id(), assigned });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > LIMIT {
            let _ = Command::new("pkill").args(["-KILL", "-P", &child.id().to_string()]).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!("job hung past {LIMIT:?}:\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    Run { stdout: String::from_utf8_lossy(&out.stdout).into_owned(), stderr: reader.join().unwrap() }
}

/// [`launch`] with a small model (40 kB), so that many jobs fit in a test.
pub fn train(n: usize, run_args: &[&str], train_args: &[&str], env: &[(&str, &str)], kill: impl FnOnce(&Job)) -> Run {
    let args: Vec<&str> = ["--model-bytes", "40000"].into_iter().chain(train_args.iter().copied()).collect();
    launch(n, run_args, &args, env, kill)
}

/// The failure-free model of a small-model job.
pub fn clean(n: usize, train_args: &[&str]) -> String {
    let r = train(n, &[], train_args, &[], |_| {});
    assert!(r.ok(), "{}", r.stderr);
    r.hash().expect("hash")
}

/// A small-model job with `WARREN_MOCK` failure points.
pub fn mocked(n: usize, mock: &str, train_args: &[&str]) -> Run {
    train(n, &[], train_args, &[("WARREN_MOCK", mock)], |_| {})
}

/// The job survived its failures: it succeeded with the failure-free model, after
/// `restarts` restarts.
pub fn assert_recovered(r: &Run, want_hash: &str, restarts: u64, what: &str) {
    assert!(r.ok(), "{what}: job failed:\n{}", r.stderr);
    assert_eq!(r.hash().as_deref(), Some(want_hash), "{what}: model differs from the failure-free run");
    // A replacement of rank 0 that took over after it printed the model prints it again.
    for h in r.stdout.lines().filter_map(|l| l.strip_prefix("MODEL_HASH ")) {
        assert_eq!(h, want_hash, "{what}: a model printed differs from the failure-free run");
    }
    assert_eq!(r.restarts(), restarts, "{what}");
}

/// Seeded pseudo-random numbers (xorshift), so a failing schedule can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

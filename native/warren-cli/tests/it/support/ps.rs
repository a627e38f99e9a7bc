//! Parameter-server test helpers: commands run to completion under a time limit, the
//! MODEL_HASH they print, and stand-alone `warren ps` server processes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `warren` binary under test.
pub const WARREN: &str = env!("CARGO_BIN_EXE_warren");

/// The `ps-train` job of the recovery tests: long enough (60 steps with random pauses) for a
/// server to be killed and restarted mid-run.
pub const JOB: [&str; 10] =
    ["--steps", "60", "--batch", "64", "--buckets", "4096", "--optimizer", "adam:0.05", "--max-sleep-ms", "30"];

/// Waits for `child` (started with piped stdout and stderr), killing it if it outlives `limit`.
pub fn finish(mut child: Child, limit: Duration) -> Output {
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

/// Runs `cmd` to completion within `limit`.
pub fn run_limited(cmd: &mut Command, limit: Duration) -> Output {
    finish(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn"), limit)
}

/// The one MODEL_HASH line of a successful run.
pub fn model_hash(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let hashes: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("MODEL_HASH ")).collect();
    assert_eq!(hashes.len(), 1, "one MODEL_HASH line (trainer 0's): {stdout}");
    hashes[0].to_string()
}

/// A stand-alone `warren ps --servers N --index I ARGS...` process and its address.
pub struct Server {
    child: Child,
    /// Its `host:port`.
    pub uri: String,
}

impl Server {
    /// Starts server `index` of `servers` with the job secret `secret` and `args`, and reads
    /// the address it prints.
    pub fn start(index: usize, servers: usize, secret: &str, args: &[&str]) -> Server {
        let mut child = Command::new(WARREN)
            .args(["ps", "--servers", &servers.to_string(), "--index", &index.to_string()])
            .args(args)
            .env("WARREN_JOB_SECRET", secret)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn warren ps");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("warren ps printed its address");
        let uri = line.strip_prefix(&format!("WARREN_PS_URI_{index}=")).expect("the address line").to_string();
        Server { child, uri }
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

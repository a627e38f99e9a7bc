//! Child processes of the fault tests: their output collected line by line (and optionally
//! streamed, to wait for a log line), bounded waits for their exit, and killing on drop.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Serializes the timing-sensitive tests, those of `faults` and `netns` together (held for the
/// whole test): jobs that pause or cut off workers for seconds, on a machine of two shared
/// cores.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads a child's stream into a string on a thread, sending each line to `lines` as well.
pub fn collect(stream: impl Read + Send + 'static, lines: Option<mpsc::Sender<String>>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Some(tx) = &lines {
                let _ = tx.send(line.clone());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

/// Waits for a line containing `text` (at most `limit`); returns it.
pub fn wait_for(lines: &mpsc::Receiver<String>, text: &str, limit: Duration) -> String {
    let until = Instant::now() + limit;
    while let Ok(l) = lines.recv_timeout(until.saturating_duration_since(Instant::now())) {
        if l.contains(text) {
            return l;
        }
    }
    panic!("no {text:?} within {limit:?}");
}

/// Waits (at most `limit`) for a child to exit; kills it and panics after that.
pub fn exit_within(child: &mut Child, limit: Duration) -> ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("process {} still running after {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child process whose stdout and stderr are collected (stderr lines also streamed to
/// [`Proc::log`]); killed on drop if still running.
pub struct Proc {
    /// The process.
    pub child: Child,
    /// Its stderr, line by line, as it comes.
    pub log: mpsc::Receiver<String>,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

/// How a [`Proc`] ended.
pub struct Ended {
    /// Its exit status.
    pub status: ExitStatus,
    /// All it wrote to stdout.
    pub stdout: String,
    /// All it wrote to stderr.
    pub stderr: String,
}

impl Proc {
    /// Starts `cmd` with its stdout and stderr piped.
    pub fn start(cmd: &mut Command) -> Proc {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let (tx, log) = mpsc::channel();
        let out = Some(collect(child.stdout.take().unwrap(), None));
        let err = Some(collect(child.stderr.take().unwrap(), Some(tx)));
        Proc { child, log, out, err }
    }

    /// [`Proc::start`], with its stdout lines also streamed to the receiver returned.
    pub fn start_streaming(cmd: &mut Command) -> (Proc, mpsc::Receiver<String>) {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let (tx, log) = mpsc::channel();
        let (out_tx, lines) = mpsc::channel();
        let out = Some(collect(child.stdout.take().unwrap(), Some(out_tx)));
        let err = Some(collect(child.stderr.take().unwrap(), Some(tx)));
        (Proc { child, log, out, err }, lines)
    }

    /// Starts a `warren tracker` command and reads the address it prints first.
    pub fn tracker(cmd: &mut Command) -> (Proc, String) {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let uri = first.trim().strip_prefix("WARREN_TRACKER_URI=").expect("the tracker prints its address");
        let (tx, log) = mpsc::channel();
        let (out, err) = (Some(collect(out, None)), Some(collect(child.stderr.take().unwrap(), Some(tx))));
        (Proc { child, log, out, err }, uri.to_string())
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`, ...).
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status();
        assert!(ok.unwrap().success(), "kill -{signal} {}", self.child.id());
    }

    /// Waits (at most `limit`) for the process to end; its status and output.
    pub fn finish(mut self, limit: Duration) -> Ended {
        let status = exit_within(&mut self.child, limit);
        let stdout = self.out.take().map(|h| h.join().unwrap()).unwrap_or_default();
        let stderr = self.err.take().map(|h| h.join().unwrap()).unwrap_or_default();
        Ended { status, stdout, stderr }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The environment of worker `task` (attempt `attempt`) of a job of `n` at tracker `uri`.
pub fn worker_env(uri: &str, n: usize, secret: &str, task: usize, attempt: u32) -> Vec<(String, String)> {
    [
        ("WARREN_TRACKER_URI", uri.to_string()),
        ("WARREN_NUM_WORKERS", n.to_string()),
        ("WARREN_JOB_SECRET", secret.to_string()),
        ("WARREN_TIMEOUT_S", "30".to_string()),
        ("WARREN_CONNECT_TIMEOUT_S", "30".to_string()),
        ("WARREN_TASK_ID", task.to_string()),
        ("WARREN_ATTEMPT", attempt.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The `MODEL_HASH` line's value in `stdout`.
pub fn model_hash(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).map(str::to_string)
}

/// Every worker ends well, the tracker reports the job done, and the model (rank 0's, the
/// first worker's) is `want`. Returns how the tracker ended.
pub fn assert_job_done(tracker: Proc, workers: Vec<Proc>, want: &str) -> Ended {
    let ended: Vec<_> = workers.into_iter().map(|w| w.finish(Duration::from_secs(60))).collect();
    for (t, e) in ended.iter().enumerate() {
        assert!(e.status.success(), "task {t} failed:\n{}", e.stderr);
    }
    let tracker = tracker.finish(Duration::from_secs(20));
    assert!(tracker.stdout.contains("WARREN_JOB_DONE"), "{}\n{}", tracker.stdout, tracker.stderr);
    let hash = model_hash(&ended[0].stdout);
    assert_eq!(hash.as_deref(), Some(want), "model differs from the failure-free run:\n{}", tracker.stderr);
    tracker
}

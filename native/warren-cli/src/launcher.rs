//! Runs N local worker processes against an in-process tracker, restarting a worker that
//! exits with an error (retry-one), and reports how the job went. Used by `warren run` and
//! `warren bench`.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use log::{info, warn};
use warren::config::keys;
use warren::membership::Limits;
use warren::{Error, Tracker, TrackerConfig};

/// Exit status of a worker that failed with an error that cannot succeed on retry
/// ([`warren::Error::is_final`]: a broken contract, a bad setting, a job that cannot be
/// recovered): the launcher stops the job at once instead of restarting it.
pub const FINAL_EXIT: u8 = 3;

/// What to launch.
pub struct LaunchSpec {
    /// Number of workers (an elastic job: at the start).
    pub workers: usize,
    /// An elastic job's limits: the launcher starts the worker of every task id added or
    /// restarted through the tracker (`warren ctl`).
    pub elastic: Option<Limits>,
    /// An elastic job's rejoin timeout: a lost worker whose replacement does not register
    /// within it is dropped from the view (`TrackerConfig::rejoin_timeout`); a worker with no
    /// restarts left is then left dead instead of failing the job.
    pub rejoin_timeout: Option<Duration>,
    /// An elastic job's join hold (`TrackerConfig::join_hold`).
    pub join_hold: Duration,
    /// Restarts allowed over the whole job.
    pub max_restarts: u32,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Extra environment for every worker.
    pub env: Vec<(String, String)>,
    /// Seconds the workers have to arrive at the tracker.
    pub rendezvous_timeout: Duration,
    /// Capture each worker's stdout instead of passing it through.
    pub capture_stdout: bool,
    /// On a failure, restart every worker (from the durable checkpoint) instead of only the
    /// failed one.
    pub fail_all: bool,
    /// The job secret (default: from the environment, or a fresh one).
    pub secret: Option<String>,
    /// Print `WARREN_TRACKER_URI=host:port` on stdout whenever a tracker starts (for `warren
    /// ctl`).
    pub announce: bool,
}

/// How a launch ended.
pub struct LaunchOutcome {
    /// Restarts performed.
    pub restarts: u32,
    /// Whether every worker exited successfully.
    pub ok: bool,
    /// Whether the user interrupted the job.
    pub interrupted: bool,
    /// Captured stdout of each task's last attempt (when requested).
    pub stdout: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// TLS from the environment (`WARREN_TLS`, and `WARREN_TLS_CA`, `_CERT`, `_KEY` for user
/// certificates): `None` when off. Child processes inherit the same settings.
pub fn tls() -> warren::Result<Option<warren::wire::Tls>> {
    warren::wire::Tls::from_settings(&warren::config::TlsSettings::from_env()?)
}

/// The job secret from the environment, or a fresh one. With `announce`, a fresh secret is
/// written to a private file whose path is printed for the workers to use.
pub fn job_secret(announce: bool) -> warren::Result<String> {
    if let Ok(s) = std::env::var(keys::JOB_SECRET) {
        return Ok(s);
    }
    if let Ok(path) = std::env::var(keys::JOB_SECRET_FILE) {
        return std::fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::Config(format!("{} {path}: {e}", keys::JOB_SECRET_FILE)));
    }
    let secret = warren::wire::auth::generate_secret();
    if announce {
        let path = made_secret_file();
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&path).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        f.write_all(secret.as_bytes()).map_err(|e| Error::io("writing secret", e))?;
        println!("{}={}", keys::JOB_SECRET_FILE, path.display());
    }
    Ok(secret)
}

/// Where [`job_secret`] writes a secret it made and announces (mode 0600).
pub fn made_secret_file() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("warren-secret-{}", std::process::id()))
}

fn interrupted_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        let g = f.clone();
        let _ = ctrlc::set_handler(move || g.store(true, Ordering::SeqCst));
        f
    })
    .clone()
}

struct Worker {
    task: usize,
    attempt: u32,
    child: Option<Child>,
    done: bool,
    out: Option<std::thread::JoinHandle<String>>,
    stdout: String,
}

fn spawn(
    spec: &LaunchSpec,
    tracker: &Tracker,
    task: usize,
    attempt: u32,
) -> warren::Result<(Child, Option<std::thread::JoinHandle<String>>)> {
    let mut cmd = Command::new(&spec.command[0]);
    cmd.args(&spec.command[1..])
        .envs(tracker.worker_env())
        .envs(spec.env.iter().cloned())
        .env(keys::TASK_ID, task.to_string())
        .env(keys::ATTEMPT, attempt.to_string())
        .stdin(Stdio::null());
    if spec.capture_stdout {
        cmd.stdout(Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| Error::io(format!("starting {:?}", spec.command[0]), e))?;
    let out = child.stdout.take().map(|mut o| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut o, &mut s);
            s
        })
    });
    Ok((child, out))
}

/// Kills the workers the tracker fenced (no heartbeat within the peer timeout: paused, frozen
/// or cut off); the watch loop then restarts them as it does any worker that died. A fence of
/// an earlier attempt than the running one (its process already ended) is left alone.
fn kill_fenced(tracker: &Tracker, workers: &mut [Worker]) {
    for fenced in tracker.take_fenced() {
        let task = &fenced.task_id;
        let Some(w) = workers.iter_mut().find(|w| w.task.to_string() == *task && w.attempt == fenced.attempt) else {
            continue;
        };
        if let Some(child) = w.child.as_mut() {
            warn!("task {task} (attempt {}, pid {}) was fenced by the tracker: killing it", w.attempt, child.id());
            let _ = child.kill();
        }
    }
}

/// Whether an elastic job's `task` has left it (removed, its leave applied) and is not to
/// come back: its worker needs no replacement.
fn has_left(tracker: &Tracker, task: usize) -> bool {
    let task = task.to_string();
    tracker.list().is_ok_and(|tasks| tasks.iter().any(|t| t.task_id == task && t.state == "stopped"))
}

/// Starts the worker of every task id an elastic job expects to join (added, or restarted
/// after a remove) that has no running process.
fn start_joiners(spec: &LaunchSpec, tracker: &Tracker, workers: &mut Vec<Worker>) -> warren::Result<()> {
    let Ok(tasks) = tracker.list() else { return Ok(()) };
    for t in tasks.into_iter().filter(|t| t.state == "joining") {
        let Ok(task) = t.task_id.parse::<usize>() else {
            warn!("task id {:?} is not a number: start its worker yourself", t.task_id);
            continue;
        };
        match workers.iter_mut().find(|w| w.task == task) {
            Some(w) if w.child.is_none() => {
                w.attempt += 1;
                w.done = false;
                info!("task {task} joins the job again (attempt {})", w.attempt);
                let (child, out) = spawn(spec, tracker, task, w.attempt)?;
                w.child = Some(child);
                w.out = out;
            }
            Some(_) => {}
            None => {
                info!("task {task} joins the job");
                let (child, out) = spawn(spec, tracker, task, 0)?;
                workers.push(Worker { task, attempt: 0, child: Some(child), done: false, out, stdout: String::new() });
            }
        }
    }
    Ok(())
}

/// Runs the job to the end.
pub fn launch(spec: &LaunchSpec) -> warren::Result<LaunchOutcome> {
    if spec.command.is_empty() {
        return Err(Error::Config("no worker command given (usage: warren run -n N -- CMD ARGS...)".into()));
    }
    let started = Instant::now();
    let interrupted = interrupted_flag();
    let secret = match &spec.secret {
        Some(s) => s.clone(),
        None => job_secret(false)?,
    };
    let peer_timeout = warren::config::peer_timeout_from_env()?;
    let tls = tls()?;
    let start_tracker = || {
        let mut cfg = TrackerConfig::new(spec.workers, secret.clone());
        cfg.tls = tls.clone();
        cfg.rendezvous_timeout = spec.rendezvous_timeout;
        cfg.peer_timeout = peer_timeout;
        cfg.elastic = spec.elastic;
        cfg.rejoin_timeout = spec.rejoin_timeout;
        cfg.join_hold = spec.join_hold;
        Tracker::start(cfg)
    };
    let announce = |t: &Tracker| {
        if spec.announce {
            println!("{}={}", keys::TRACKER_URI, t.uri());
        }
    };
    let mut tracker = start_tracker()?;
    announce(&tracker);
    let mut workers: Vec<Worker> = Vec::new();
    for task in 0..spec.workers {
        let (child, out) = spawn(spec, &tracker, task, 0)?;
        workers.push(Worker { task, attempt: 0, child: Some(child), done: false, out, stdout: String::new() });
    }
    let mut restarts = 0u32;
    let mut ok = true;
    let mut was_interrupted = false;
    let mut restart_all = false;
    'watch: while workers.iter().any(|w| !w.done) {
        if interrupted.load(Ordering::SeqCst) {
            warn!("interrupted: stopping all workers");
            was_interrupted = true;
            ok = false;
            break;
        }
        if let Err(Error::Tracker(reason)) = tracker.wait(Some(Duration::ZERO)) {
            warn!("job failed at the tracker: {reason}");
            ok = false;
            break;
        }
        kill_fenced(&tracker, &mut workers);
        if spec.elastic.is_some() {
            start_joiners(spec, &tracker, &mut workers)?;
        }
        for w in workers.iter_mut().filter(|w| !w.done) {
            let Some(child) = w.child.as_mut() else {
                continue;
            };
            let Some(status) = child.try_wait().map_err(|e| Error::io("waiting for a worker", e))? else {
                continue;
            };
            w.child = None;
            w.stdout = w.out.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
            if status.success() {
                w.done = true;
                continue;
            }
            if spec.elastic.is_some() && has_left(&tracker, w.task) {
                // Lost after its leave was decided (at the view change): the job goes on
                // without it, as asked; a replacement would only be refused.
                info!(
                    "task {} (attempt {}) failed with {status} after leaving the job; not restarted",
                    w.task, w.attempt
                );
                w.done = true;
                continue;
            }
            if status.code() == Some(FINAL_EXIT as i32) {
                warn!(
                    "task {} (attempt {}) failed with an error that cannot succeed on retry (see its error above); \
                     stopping the job instead of restarting it",
                    w.task, w.attempt
                );
                ok = false;
                break 'watch;
            }
            if restarts >= spec.max_restarts && spec.rejoin_timeout.is_some() {
                warn!(
                    "task {} (attempt {}) failed with {status}; no restarts left: the job goes on without it once \
                     the rejoin timeout passes",
                    w.task, w.attempt
                );
                w.done = true;
                continue;
            }
            if restarts >= spec.max_restarts {
                warn!(
                    "task {} (attempt {}) failed with {status}; no restarts left ({} used)",
                    w.task, w.attempt, restarts
                );
                ok = false;
                break 'watch;
            }
            restarts += 1;
            if spec.fail_all {
                info!("task {} failed with {status}; restarting all workers (fail-all, restart {restarts})", w.task);
                restart_all = true;
                break;
            }
            w.attempt += 1;
            info!(
                "task {} failed with {status}; restarting it (attempt {}, restart {restarts}/{})",
                w.task, w.attempt, spec.max_restarts
            );
            let (child, out) = spawn(spec, &tracker, w.task, w.attempt)?;
            w.child = Some(child);
            w.out = out;
        }
        if restart_all {
            restart_all = false;
            for w in workers.iter_mut() {
                if let Some(mut c) = w.child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            tracker.stop();
            tracker = start_tracker()?;
            announce(&tracker);
            for w in workers.iter_mut() {
                w.attempt += 1;
                w.done = false;
                let (child, out) = spawn(spec, &tracker, w.task, w.attempt)?;
                w.child = Some(child);
                w.out = out;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for w in workers.iter_mut() {
        if let Some(mut c) = w.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            w.stdout = w.out.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        }
    }
    Ok(LaunchOutcome {
        restarts,
        ok,
        interrupted: was_interrupted,
        stdout: workers.into_iter().map(|w| w.stdout).collect(),
        elapsed: started.elapsed(),
    })
}

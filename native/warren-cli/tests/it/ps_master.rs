//! Parameter-server trainers fed by the data master's task queues (`warren example ps-train
//! --master`): a real `warren master` process hands out the tasks of a RecordIO dataset to
//! trainers under `warren run`, which train them through two parameter servers. Without
//! failures every example is trained exactly once (sync, async, SSP); a trainer killed with
//! SIGKILL half-way through a task is replaced, its task comes back to the queue when its
//! time is up, and the pass still ends with every task finished. Real processes, real
//! signals, time limits.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::crash::Dir;
use crate::support::ps::{WARREN, model_hash, run_limited};

const SECRET: &str = "ps-master-secret";
const EXAMPLES: u64 = 3000;
const BATCH: &str = "32";

/// A `warren master` serving `dir/data/part-*.rio` (tasks time out after `timeout_s`) and
/// the address it printed.
struct Master {
    child: Child,
    uri: String,
}

impl Master {
    fn start(dir: &Path, timeout_s: &str) -> Master {
        let mut child = Command::new(WARREN)
            .args(["master", "--dataset", &dir.join("data/part-*.rio").display().to_string()])
            .args(["--store", &format!("file:{}", dir.join("store").display())])
            .args(["--initial-timeout-s", timeout_s, "--min-timeout-s", timeout_s])
            .env("WARREN_JOB_SECRET", SECRET)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("master.log")).unwrap())
            .spawn()
            .expect("spawn warren master");
        let line = BufReader::new(child.stdout.take().unwrap()).lines().next().unwrap().unwrap();
        let uri = line.strip_prefix("WARREN_MASTER_URI=").unwrap_or_else(|| panic!("master said {line:?}")).to_string();
        Master { child, uri }
    }

    /// `warren master status` as JSON.
    fn status(&self) -> serde_json::Value {
        let out = run_limited(
            Command::new(WARREN).args(["master", "status", "--uri", &self.uri]).env("WARREN_JOB_SECRET", SECRET),
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the dataset into `dir/data`; returns how many tasks (chunks) it has.
fn dataset(dir: &Path) -> u64 {
    let data = dir.join("data");
    let out = run_limited(
        Command::new(WARREN).args(["example", "ps-train", "--write-dataset"]).arg(&data).args([
            "--examples",
            &EXAMPLES.to_string(),
            "--chunk-bytes",
            "2048",
        ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let index = run_limited(
        Command::new(WARREN).args(["recordio", "index"]).arg(data.join("part-0.rio")),
        Duration::from_secs(60),
    );
    // "PATH: B bytes, N chunks, R records" first.
    let first = String::from_utf8_lossy(&index.stdout).lines().next().unwrap_or_default().to_string();
    let chunks: u64 = first.split(", ").find_map(|w| w.strip_suffix(" chunks")).unwrap().parse().unwrap();
    assert!(chunks >= 20, "a dataset of many tasks: {chunks}");
    chunks
}

/// Three trainers in `mode` under `warren run` (two servers of its own, one replacement per
/// trainer), fed by `master`, with `WARREN_PS_MOCK=mock`.
fn train(master: &Master, mode: &str, mock: &str) -> Output {
    run_limited(
        Command::new(WARREN)
            .args(["run", "-n", "3", "--ps-servers", "2", "--max-restarts", "1", "--rendezvous-timeout", "600", "--"])
            .args([WARREN, "example", "ps-train", "--mode", mode, "--batch", BATCH, "--buckets", "65536"])
            .env("WARREN_JOB_SECRET", SECRET)
            .env("WARREN_MASTER_URI", &master.uri)
            .env("WARREN_PS_MOCK", mock),
        Duration::from_secs(240),
    )
}

/// The examples and tasks every trainer that finished says it trained.
fn trained(out: &Output) -> (u64, u64) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut sums = (0, 0);
    for line in stdout.lines().filter(|l| l.starts_with("TRAINER ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = |w: &str| words.iter().position(|x| *x == w).unwrap_or_else(|| panic!("{w:?} in {line:?}"));
        sums.0 += words[at("examples") - 1].parse::<u64>().unwrap();
        sums.1 += words[at("tasks") - 1].parse::<u64>().unwrap();
    }
    assert_eq!(stdout.lines().filter(|l| l.starts_with("TRAINER ")).count(), 3, "{stdout}");
    sums
}

#[test]
fn every_example_of_the_pass_is_trained_once_by_trainers_the_master_feeds() {
    for mode in ["sync", "async", "ssp"] {
        let dir = Dir::new(&format!("ps-master-{mode}"));
        let tasks = dataset(&dir.0);
        let master = Master::start(&dir.0, "60");
        let out = train(&master, mode, "");
        model_hash(&out);
        assert_eq!(trained(&out), (EXAMPLES, tasks), "{mode}: every example and task once");
        let status = master.status();
        assert_eq!(status["pass"], 1, "{mode}: the master moved past the pass: {status}");
    }
}

#[test]
fn a_killed_trainers_task_returns_to_the_queue_and_the_pass_still_ends() {
    for mode in ["sync", "async"] {
        let dir = Dir::new(&format!("ps-master-kill-{mode}"));
        let tasks = dataset(&dir.0);
        let master = Master::start(&dir.0, "3");
        // Trainer 1 dies at its step 10, in the middle of its third or fourth task.
        let mock = "1,10,before-push,0";
        let out = train(&master, mode, mock);
        model_hash(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("WARREN_PS_MOCK: trainer Some(1) dies at step 10"), "{mode}: {stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("\"restarts\":1,"), "{mode}: one replacement");
        let log = std::fs::read_to_string(dir.0.join("master.log")).unwrap();
        assert!(log.contains("task(s) timed out"), "{mode}: the dead trainer's task timed out:\n{log}");
        let status = master.status();
        assert_eq!(status["pass"], 1, "{mode}: every task of the pass was finished: {status}");
        // The dead attempt trained at most its 10 batches (and said nothing); the rest were
        // trained by the others and the replacement, its task among them.
        let (examples, done) = trained(&out);
        let dead = 10 * BATCH.parse::<u64>().unwrap();
        assert!(examples + dead >= EXAMPLES && examples <= EXAMPLES, "{mode}: {examples} examples");
        // A batch never spans two tasks: the dead attempt finished at most one task a step.
        assert!(done < tasks && done + 10 >= tasks, "{mode}: {done} of {tasks} tasks reported by the finishers");
    }
}

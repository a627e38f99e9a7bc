//! Recovery does not depend on placement: a worker re-run on another host (its host id
//! changes between attempts, as when Spark re-runs a lost task on another executor) joins
//! its peers' calls with the algorithm and reduction order of the view, and the job ends with
//! the model of the failure-free run of the same first placement. Hosts are simulated with
//! `WARREN_HOST_ID` (same-host workers link over shared memory, the others over TCP, and
//! under `WARREN_REDUCTION_ORDER=hosts` the hierarchical allreduce groups ranks by host).
//! Under the default order, ranks, the same job gives the same model on every placement.
//! Whole hosts lost at once are recovered from the local-model replicas on the other hosts.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::procs::{collect, exit_within, wait_for};
use crate::support::ps::{WARREN, run_limited};
use crate::support::training::{LIMIT, worker_pid};

/// `warren run -n N` of the training example (1 MiB model: its gradient allreduce is large
/// enough for the ring or the hierarchy) in reduction order `order`, each attempt `a` of
/// task `t` on the host `hosts` names for it (a shell expression over `$t` and `$a`), with
/// `mock` failures. Returns (stdout, stderr).
fn job(n: usize, order: &str, hosts: &str, mock: &str) -> (String, String) {
    let script = format!(
        "t=$WARREN_TASK_ID; a=$WARREN_ATTEMPT; WARREN_HOST_ID=h$(({hosts})) exec \"$0\" example train --iters 16 \
         --model-bytes 1048576"
    );
    let out = run_limited(
        Command::new(WARREN)
            .args(["run", "-n", &n.to_string(), "--max-restarts", "3", "--", "sh", "-c", &script, WARREN])
            .env("WARREN_MOCK", mock)
            .env("WARREN_REDUCTION_ORDER", order)
            .env("WARREN_TIMEOUT_S", "60")
            .env("WARREN_CONNECT_TIMEOUT_S", "60"),
        Duration::from_secs(120),
    );
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn hash_and_restarts(out: &str, log: &str) -> (String, u64) {
    let hash =
        out.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).unwrap_or_else(|| panic!("no model:\n{out}\n{log}"));
    let summary = out.lines().find_map(|l| l.strip_prefix("WARREN_RUN_SUMMARY ")).expect("a summary");
    let summary: serde_json::Value = serde_json::from_str(summary).unwrap();
    assert_eq!(summary["status"], "ok", "{out}\n{log}");
    (hash.to_string(), summary["restarts"].as_u64().unwrap())
}

/// Under the hosts order, task 0 alone on host 1, tasks 1 and 2 on host 0 (the hierarchical
/// allreduce runs); task 0
/// is killed at a large allreduce and re-run on host 0, with its peers. Before, every worker
/// failed with a call mismatch: the survivors retried the call with the hierarchy of the old
/// placement, the replacement chose the ring of the new one.
#[test]
fn a_worker_re_run_on_another_host_recovers_with_the_same_model() {
    let hosts = "t == 0 && a == 0 ? 1 : 0";
    let (clean, log) = job(3, "hosts", hosts, "");
    let (want, restarts) = hash_and_restarts(&clean, &log);
    assert_eq!(restarts, 0);
    for mock in ["0,5,0,0", "1,9,0,0"] {
        let (out, log) = job(3, "hosts", hosts, mock);
        assert!(log.contains(&format!("exits at {mock}")), "the kill did not happen ({mock}):\n{log}");
        assert_eq!(hash_and_restarts(&out, &log), (want.clone(), 1), "killed at {mock}:\n{out}\n{log}");
    }
}

/// Under the hosts order, six workers on three hosts, attempt `a` of task `t` on host
/// `(t + a) mod 3`: every
/// replacement starts on another host than the worker it replaces. Two kills, one after the
/// other; the job ends with the failure-free model of the first placement.
#[test]
fn replacements_on_other_hosts_of_three_recover_with_the_same_model() {
    let hosts = "(t + a) % 3";
    let (clean, log) = job(6, "hosts", hosts, "");
    let (want, _) = hash_and_restarts(&clean, &log);
    let (out, log) = job(6, "hosts", hosts, "2,4,0,0;5,10,0,0");
    assert_eq!(hash_and_restarts(&out, &log), (want, 2), "{out}\n{log}");
}

/// The same job of three workers on one host, on two hosts (tasks 1 and 2 sharing one, over
/// shared memory; task 0 alone, over TCP) and on three hosts: under the ranks order (the
/// default) it ends with the same model on all three placements. Under the hosts order the
/// two-host placement runs the hierarchy and ends with another model (the one-host and
/// three-host placements, where the hierarchy adds nothing, with the ranks order's model).
#[test]
fn the_ranks_order_gives_the_same_model_on_every_placement() {
    let placements = [("one host", "0"), ("two hosts", "t == 0 ? 1 : 0"), ("three hosts", "t")];
    let model = |order: &str, hosts: &str| {
        let (out, log) = job(3, order, hosts, "");
        let (hash, restarts) = hash_and_restarts(&out, &log);
        assert_eq!(restarts, 0, "{out}\n{log}");
        (hash, log)
    };
    let (want, _) = model("ranks", placements[0].1);
    for (name, hosts) in &placements[1..] {
        let (hash, log) = model("ranks", hosts);
        assert!(!log.contains("allreduce(hier)"), "{name}: a hierarchical allreduce under the ranks order:\n{log}");
        assert_eq!(hash, want, "{name}: another model than on one host under the ranks order");
    }
    let (default, _) = model("", placements[1].1);
    assert_eq!(default, want, "the ranks order is the default");
    let hosts: Vec<(String, String)> = placements.iter().map(|(_, h)| model("hosts", h)).collect();
    assert!(
        hosts[1].1.contains("allreduce(hier)"),
        "two hosts under the hosts order use the hierarchy:\n{}",
        hosts[1].1
    );
    let hosts: Vec<String> = hosts.into_iter().map(|(h, _)| h).collect();
    assert_eq!((&hosts[0], &hosts[2]), (&want, &want), "no hierarchy on one host or one worker per host");
    assert_ne!(hosts[1], want, "under the hosts order two hosts of three workers add in another order");
}

/// A job of six workers on three hosts, tasks placed two per host in task order (task `t` on
/// host `t / 2`, as a Spark executor of two cores runs consecutive task ids), each replacement
/// started on the next host; both workers of each host in `lost` are SIGKILLed at once (one
/// `kill` for all of them) once rank 0 is past iteration 5. Returns the run's stdout and
/// stderr, and the seconds from the kill to rank 0's next iteration.
fn host_loss(local_replicas: &str, lost: &[usize]) -> (String, String, Option<f64>) {
    let script = "t=$WARREN_TASK_ID; a=$WARREN_ATTEMPT; WARREN_HOST_ID=h$(( (t / 2 + (a > 0)) % 3 )) exec \"$0\" \
                  example train --iters 300 --compute-ms 20 --model-bytes 40000 --timeline";
    let restarts = (2 * lost.len()).to_string();
    let mut launcher = Command::new(WARREN)
        .args(["run", "-n", "6", "--max-restarts", &restarts, "--", "sh", "-c", script, WARREN])
        .env("WARREN_LOCAL_REPLICAS", local_replicas)
        .env("WARREN_TIMEOUT_S", "60")
        .env("WARREN_CONNECT_TIMEOUT_S", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (tx, steps) = mpsc::channel();
    let out = collect(launcher.stdout.take().unwrap(), Some(tx));
    let err = collect(launcher.stderr.take().unwrap(), None);
    wait_for(&steps, "STEP 5 ", Duration::from_secs(60));
    let tasks: Vec<usize> = lost.iter().flat_map(|h| [2 * h, 2 * h + 1]).collect();
    let pids: Vec<String> = tasks
        .iter()
        .map(|&t| worker_pid(launcher.id(), t).unwrap_or_else(|| panic!("task {t} is not running")).to_string())
        .collect();
    let killed = Command::new("kill").arg("-KILL").args(&pids).status().unwrap();
    let killed_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(killed.success(), "kill -KILL {pids:?}");
    let status = exit_within(&mut launcher, LIMIT);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(!status.success() || out.contains("MODEL_HASH"), "{out}\n{err}");
    let resumed = out
        .lines()
        .filter_map(|l| l.strip_prefix("STEP "))
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<f64>().ok())
        .find(|&t| t > killed_at);
    (out, err, resumed.map(|t| t - killed_at))
}

/// The failure-free model of [`host_loss`]'s job with `local_replicas` (the same first
/// placement, so the same algorithms and reduction order).
fn host_loss_clean(local_replicas: &str) -> String {
    let script = "t=$WARREN_TASK_ID; WARREN_HOST_ID=h$(( t / 2 )) exec \"$0\" example train --iters 300 \
                  --model-bytes 40000";
    let out = run_limited(
        Command::new(WARREN)
            .args(["run", "-n", "6", "--", "sh", "-c", script, WARREN])
            .env("WARREN_LOCAL_REPLICAS", local_replicas),
        LIMIT,
    );
    let (out, log) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    hash_and_restarts(&out, &log).0
}

/// One host of three lost at once, with one replica of each local model: every model has its
/// replica on another host (before, rank 0's only replica was rank 1, on the same host, and
/// the job ended with "no live worker holds the local model of rank 0").
#[test]
fn losing_a_whole_host_with_one_replica_recovers_with_the_same_model() {
    let want = host_loss_clean("1");
    let (out, log, resumed) = host_loss("1", &[0]);
    assert_eq!(hash_and_restarts(&out, &log), (want, 2), "{out}\n{log}");
    eprintln!("host lost: rank 0's next iteration {:.3} s after the kill", resumed.expect("rank 0 went on"));
}

/// Two hosts of three lost at once, with two replicas of each local model: every model has a
/// replica on each of the two other hosts, so the third host alone serves the four
/// replacements.
#[test]
fn losing_two_hosts_of_three_with_two_replicas_recovers_with_the_same_model() {
    let want = host_loss_clean("2");
    let (out, log, resumed) = host_loss("2", &[0, 1]);
    assert_eq!(hash_and_restarts(&out, &log), (want, 4), "{out}\n{log}");
    eprintln!("two hosts lost: rank 0's next iteration {:.3} s after the kill", resumed.expect("rank 0 went on"));
}

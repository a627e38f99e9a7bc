//! Recovery does not depend on placement: a worker re-run on another host (its host id
//! changes between attempts, as when Spark re-runs a lost task on another executor) joins
//! its peers' calls with the algorithm and reduction order of the view, and the job ends with
//! the model of the failure-free run of the same first placement. Hosts are simulated with
//! `WARREN_HOST_ID` (same-host workers link over shared memory, the others over TCP, and the
//! hierarchical allreduce groups ranks by host).

use std::process::Command;
use std::time::Duration;

mod support;

use support::ps::{WARREN, run_limited};

/// `warren run -n N` of the training example (1 MiB model: its gradient allreduce is large
/// enough for the ring or the hierarchy), each attempt `a` of task `t` on the host `hosts`
/// names for it (a shell expression over `$t` and `$a`), with `mock` failures. Returns
/// (stdout, stderr).
fn job(n: usize, hosts: &str, mock: &str) -> (String, String) {
    let script = format!(
        "t=$WARREN_TASK_ID; a=$WARREN_ATTEMPT; WARREN_HOST_ID=h$(({hosts})) exec \"$0\" example train --iters 16 \
         --model-bytes 1048576"
    );
    let out = run_limited(
        Command::new(WARREN)
            .args(["run", "-n", &n.to_string(), "--max-restarts", "3", "--", "sh", "-c", &script, WARREN])
            .env("WARREN_MOCK", mock)
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

/// Task 0 alone on host 1, tasks 1 and 2 on host 0 (the hierarchical allreduce runs); task 0
/// is killed at a large allreduce and re-run on host 0, with its peers. Before, every worker
/// failed with a call mismatch: the survivors retried the call with the hierarchy of the old
/// placement, the replacement chose the ring of the new one.
#[test]
fn a_worker_re_run_on_another_host_recovers_with_the_same_model() {
    let hosts = "t == 0 && a == 0 ? 1 : 0";
    let (clean, log) = job(3, hosts, "");
    let (want, restarts) = hash_and_restarts(&clean, &log);
    assert_eq!(restarts, 0);
    for mock in ["0,5,0,0", "1,9,0,0"] {
        let (out, log) = job(3, hosts, mock);
        assert!(log.contains(&format!("exits at {mock}")), "the kill did not happen ({mock}):\n{log}");
        assert_eq!(hash_and_restarts(&out, &log), (want.clone(), 1), "killed at {mock}:\n{out}\n{log}");
    }
}

/// Six workers on three hosts, attempt `a` of task `t` on host `(t + a) mod 3`: every
/// replacement starts on another host than the worker it replaces. Two kills, one after the
/// other; the job ends with the failure-free model of the first placement.
#[test]
fn replacements_on_other_hosts_of_three_recover_with_the_same_model() {
    let hosts = "(t + a) % 3";
    let (clean, log) = job(6, hosts, "");
    let (want, _) = hash_and_restarts(&clean, &log);
    let (out, log) = job(6, hosts, "2,4,0,0;5,10,0,0");
    assert_eq!(hash_and_restarts(&out, &log), (want, 2), "{out}\n{log}");
}

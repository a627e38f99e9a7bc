//! `warren bench scale`: workers as threads of one process on the in-memory transport; the
//! command joins them, times allreduces, loses one worker and recovers it, and reports each
//! figure in one JSON line.

use std::process::Command;

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

#[test]
fn bench_scale_reports_rendezvous_calls_and_the_recovery_of_a_lost_worker() {
    let out = Command::new(WARREN)
        .args(["bench", "scale", "-n", "16", "--sizes", "4,65536", "--iters", "3", "--idle-s", "0.5"])
        .env("WARREN_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["workers"], 16);
    assert_eq!(line["transport"], "mem");
    let calls = line["allreduce"].as_array().unwrap();
    assert_eq!(calls.iter().map(|c| c["bytes"].as_u64().unwrap()).collect::<Vec<_>>(), [4, 65536]);
    for key in ["rendezvous_s", "recovery_s", "tracker_cpu_idle_share"] {
        assert!(line[key].as_f64().is_some_and(|v| v >= 0.0), "{key}: {line}");
    }
    assert!(line["recovery_s"].as_f64().unwrap() > 0.0, "{line}");
}

#[test]
fn bench_scale_refuses_a_world_of_one() {
    let out = Command::new(WARREN).args(["bench", "scale", "-n", "1"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--workers must be at least 2"), "{err}");
}

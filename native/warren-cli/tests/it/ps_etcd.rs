//! Parameter servers and trainers registered in a real etcd (the `etcd` binary, started on
//! free loopback ports), as real processes killed with SIGKILL: servers racing for an index
//! end with distinct ones; a trainer's key goes when its lease expires after the trainer is
//! killed; a server killed and restarted (on another port) takes its index back, loads its
//! checkpoint, is found by the trainers through etcd, and the sync job ends with the
//! failure-free MODEL_HASH. Every wait has a deadline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::crash::Dir;
use crate::support::ps::{JOB, WARREN, finish, model_hash, run_limited};
use warren::ps::EtcdRegistry;

const SECRET: &str = "ps-etcd-test-secret";
/// A `warren ps --store etcd:...` process: the index it claimed and its address come on
/// `line` (`WARREN_PS_URI_<index>=<uri>`).
struct Registered {
    child: Child,
    line: mpsc::Receiver<String>,
    log: PathBuf,
}

impl Registered {
    fn start(store: &str, servers: usize, args: &[&str], log: &Path) -> Registered {
        let mut child = Command::new(WARREN)
            .args(["ps", "--servers", &servers.to_string(), "--store", store, "--etcd-lease-ttl-s", "2"])
            .args(args)
            .env("WARREN_JOB_SECRET", SECRET)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("spawn warren ps");
        let stdout = child.stdout.take().unwrap();
        let (tx, line) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Registered { child, line, log: log.to_path_buf() }
    }

    /// The index it claimed and its address, once it listens.
    fn claimed(&self, within: Duration) -> (usize, String) {
        let line = self.line.recv_timeout(within).unwrap_or_else(|_| {
            panic!("no address line within {within:?}; log:\n{}", std::fs::read_to_string(&self.log).unwrap())
        });
        let (key, uri) = line.strip_prefix("WARREN_PS_URI_").and_then(|l| l.split_once('=')).expect(&line);
        (key.parse().unwrap(), uri.to_string())
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `cond` every 50 ms until it holds or `limit` passes; whether it held.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn servers_racing_for_an_index_end_with_distinct_indices() {
    let etcd = crate::support::etcd::Etcd::start("ps-race");
    let dir = Dir::new("ps-etcd-race");
    for round in 0..3 {
        let store = format!("etcd:{}/warren/ps/race-{round}", etcd.endpoint);
        // Three servers of a job of three, started at the same moment.
        let servers: Vec<Registered> =
            (0..3).map(|i| Registered::start(&store, 3, &[], &dir.0.join(format!("{round}-{i}.log")))).collect();
        let mut claimed: Vec<(usize, String)> = servers.iter().map(|s| s.claimed(Duration::from_secs(30))).collect();
        claimed.sort();
        let indices: Vec<usize> = claimed.iter().map(|c| c.0).collect();
        assert_eq!(indices, vec![0, 1, 2], "round {round}: {claimed:?}");
        // etcd lists each at the index it printed.
        let r = EtcdRegistry::connect(&store, 2).unwrap();
        let found = r.wait_servers(3, Duration::from_secs(10)).unwrap();
        assert_eq!(found, claimed.iter().map(|c| c.1.clone()).collect::<Vec<_>>(), "round {round}");

        // A fourth one finds no free index and says so (after its short wait).
        let mut extra = Command::new(WARREN);
        extra
            .args(["ps", "--servers", "3", "--store", &store, "--register-timeout-s", "0.5"])
            .env("WARREN_JOB_SECRET", SECRET);
        let out = run_limited(&mut extra, Duration::from_secs(30));
        assert!(!out.status.success(), "a fourth server of three must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("a free server index below 3") && stderr.contains("[0, 1, 2]"), "{stderr}");

        // A server of another count on the same prefix is refused, naming both counts.
        let mut other = Command::new(WARREN);
        other.args(["ps", "--servers", "2", "--store", &store]).env("WARREN_JOB_SECRET", SECRET);
        let out = run_limited(&mut other, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("3 parameter servers, not 2"), "{stderr}");
    }
}

#[test]
fn a_trainers_key_disappears_when_its_lease_expires_after_it_is_killed() {
    let etcd = crate::support::etcd::Etcd::start("ps-lease");
    let store = format!("etcd:{}/warren/ps/lease", etcd.endpoint);
    let observer = EtcdRegistry::connect(&store, 2).unwrap();
    // Two trainers of a job whose server never comes: they register and wait.
    let spawn = |t: &str| {
        Command::new(WARREN)
            .args(["example", "ps-train", "--trainers", "2", "--trainer", t, "--servers", "1"])
            .args(["--store", &store, "--etcd-lease-ttl-s", "2", "--register-timeout-s", "60"])
            .env("WARREN_JOB_SECRET", SECRET)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut victim = spawn("0");
    let mut other = spawn("1");
    assert!(
        eventually(Duration::from_secs(30), || observer.trainers().unwrap().len() == 2),
        "both trainers register: {:?}",
        observer.trainers()
    );
    let ids = observer.trainers().unwrap();
    let victim_id =
        ids.iter().find(|id| id.starts_with(&format!("0-{}-", victim.id()))).expect("trainer 0's key").clone();
    let other_id =
        ids.iter().find(|id| id.starts_with(&format!("1-{}-", other.id()))).expect("trainer 1's key").clone();

    victim.kill().unwrap(); // SIGKILL: the lease is not revoked, it expires
    let killed = Instant::now();
    victim.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(15), || !observer.trainers().unwrap().contains(&victim_id)),
        "the killed trainer's key must go when its lease expires"
    );
    let gone_after = killed.elapsed();
    // Bound to a lease of 2 s (etcd's minimum): gone about then, not at once on the kill.
    assert!(gone_after >= Duration::from_millis(500), "gone after {gone_after:?}: not a lease expiry");
    assert!(observer.trainers().unwrap().contains(&other_id), "the live trainer keeps its key");
    assert!(other.try_wait().unwrap().is_none(), "the live trainer still waits for the server");
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn a_killed_server_is_found_again_at_its_index_and_a_sync_job_loses_nothing() {
    let etcd = crate::support::etcd::Etcd::start("ps-restart");
    let dir = Dir::new("ps-etcd-restart");
    let store = format!("etcd:{}/warren/ps/restart", etcd.endpoint);
    let ckpt = dir.0.join("ckpt");
    let ckpt_s = ckpt.to_str().unwrap().to_string();
    let args = ["--checkpoint-dir", &ckpt_s, "--checkpoint-every-steps", "3", "--pull-timeout-s", "60"];

    let mut serial = Command::new(WARREN);
    serial.args(["example", "ps-train", "--serial", "--trainers", "4"]).args(JOB);
    let want = model_hash(&run_limited(&mut serial, Duration::from_secs(120)));

    let mut servers: Vec<Registered> =
        (0..2).map(|i| Registered::start(&store, 2, &args, &dir.0.join(format!("server-{i}.log")))).collect();
    let mut claimed: Vec<(usize, String)> = servers.iter().map(|s| s.claimed(Duration::from_secs(30))).collect();
    let victim = 1;
    let at = claimed.iter().position(|c| c.0 == victim).unwrap();
    let job = Command::new(WARREN)
        .args(["run", "-n", "4", "--max-restarts", "0", "--rendezvous-timeout", "3600", "--", WARREN])
        .args(["example", "ps-train", "--mode", "sync", "--servers", "2", "--store", &store])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warren run");

    // Kill the victim once it has written a checkpoint (the job is then under way).
    let snapshot = ckpt.join(format!("server-{victim}")).join("snapshot.gz");
    assert!(eventually(Duration::from_secs(60), || snapshot.exists()), "server {victim} checkpoints");
    servers[at].kill();
    let (old_index, old_uri) = claimed.remove(at);

    // Restarted without --index: the first free index is the dead one's, once its lease ends.
    let restarted = Registered::start(&store, 2, &args, &dir.0.join("restarted.log"));
    let (index, uri) = restarted.claimed(Duration::from_secs(30));
    assert_eq!(index, old_index, "the restarted server takes the dead one's index back");
    assert_ne!(uri, old_uri, "restarted on another port: the trainers must find it through etcd");
    let out = finish(job, Duration::from_secs(240));
    assert_eq!(model_hash(&out), want, "the sync job across the restart ends with the failure-free model");
    let log = std::fs::read_to_string(&restarted.log).unwrap();
    assert!(log.contains("restored the checkpoint"), "the restarted server loads its checkpoint:\n{log}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("is now registered at {uri}")), "trainers found it in etcd:\n{stderr}");
    drop(servers);
}

/// `warren ps status --store`: whether it succeeded, its JSON lines (server lines, then the
/// trainers' line), and its stderr.
fn status_in_etcd(store: &str) -> (bool, Vec<serde_json::Value>, String) {
    let mut cmd = Command::new(WARREN);
    cmd.args(["ps", "status", "--store", store, "--timeout-s", "5"])
        .env("WARREN_JOB_SECRET", SECRET)
        .env_remove("WARREN_PS_URIS");
    let out = run_limited(&mut cmd, Duration::from_secs(30));
    let lines = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out.status.success(), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn ps_status_through_etcd_lists_the_servers_and_trainers() {
    let etcd = crate::support::etcd::Etcd::start("ps-status");
    let dir = Dir::new("ps-etcd-status");
    let store = format!("etcd:{}/warren/ps/status", etcd.endpoint);
    let (ok, _, err) = status_in_etcd(&store);
    assert!(!ok && err.contains("no parameter-server job is registered"), "{err}");

    let mut servers: Vec<Registered> =
        (0..2).map(|i| Registered::start(&store, 2, &[], &dir.0.join(format!("server-{i}.log")))).collect();
    let claimed: Vec<(usize, String)> = servers.iter().map(|s| s.claimed(Duration::from_secs(30))).collect();
    // Trainer 0 of a job of 2 registers, defines the job and waits for trainer 1 (never there).
    let mut trainer = Command::new(WARREN)
        .args(["example", "ps-train", "--trainers", "2", "--trainer", "0", "--servers", "2"])
        .args(["--store", &store, "--etcd-lease-ttl-s", "2"])
        .args(JOB)
        .env("WARREN_JOB_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let defined = eventually(Duration::from_secs(30), || {
        lines = status_in_etcd(&store).1;
        lines.len() == 3 && lines[0]["status"]["job"].is_object() && lines[2]["trainers"].as_array().unwrap().len() == 1
    });
    assert!(defined, "both servers with the job and one trainer: {lines:?}");
    let mut sorted = claimed.clone();
    sorted.sort();
    for (i, (index, uri)) in sorted.iter().enumerate() {
        assert_eq!(lines[i]["index"], *index);
        assert_eq!(lines[i]["address"], uri.as_str(), "{lines:?}");
        assert_eq!(lines[i]["alive"], true);
        assert_eq!(lines[i]["status"]["index"], *index, "the server's own state");
    }
    let id = lines[2]["trainers"][0].as_str().unwrap().to_string();
    assert!(id.starts_with(&format!("0-{}-", trainer.id())), "trainer 0's id: {id}");

    // Server 1 killed: once its lease expires it is listed as not alive, without a state.
    let at = claimed.iter().position(|c| c.0 == 1).unwrap();
    servers[at].kill();
    let gone = eventually(Duration::from_secs(20), || {
        lines = status_in_etcd(&store).1;
        lines.len() == 3 && lines[1]["alive"] == false
    });
    assert!(gone, "server 1 no longer alive: {lines:?}");
    assert!(lines[1]["address"].is_null() && lines[1]["status"].is_null(), "{lines:?}");
    assert_eq!((lines[0]["alive"].clone(), lines[0]["address"].clone()), (true.into(), sorted[0].1.as_str().into()));
    trainer.kill().unwrap();
    trainer.wait().unwrap();
}

/// Sends `signal` to process `pid`.
fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child process of this test.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0, "kill({pid}, {signal})");
}

#[test]
fn a_server_and_a_trainer_whose_leases_lapsed_in_a_pause_register_again() {
    let etcd = crate::support::etcd::Etcd::start("ps-relapse");
    let dir = Dir::new("ps-etcd-relapse");
    let store = format!("etcd:{}/warren/ps/relapse", etcd.endpoint);
    let observer = EtcdRegistry::connect(&store, 2).unwrap();
    // Server 0 of a job of 2, and a trainer waiting for the server that never comes.
    let server = Registered::start(&store, 2, &[], &dir.0.join("server.log"));
    let (index, uri) = server.claimed(Duration::from_secs(30));
    let mut trainer = Command::new(WARREN)
        .args(["example", "ps-train", "--trainers", "1", "--servers", "2", "--store", &store])
        .args(["--etcd-lease-ttl-s", "2", "--register-timeout-s", "120"])
        .env("WARREN_JOB_SECRET", SECRET)
        .env("WARREN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.0.join("trainer.log")).unwrap())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(30), || observer.trainers().unwrap().len() == 1), "the trainer registers");
    let id = observer.trainers().unwrap()[0].clone();
    assert_eq!(observer.resolve(index).unwrap(), Some(uri.clone()));

    // Both paused (SIGSTOP) past their leases' TTL: etcd deletes their keys.
    for pid in [server.child.id(), trainer.id()] {
        signal(pid, libc::SIGSTOP);
    }
    let lapsed = eventually(Duration::from_secs(20), || {
        observer.resolve(index).unwrap().is_none() && observer.trainers().unwrap().is_empty()
    });
    for pid in [server.child.id(), trainer.id()] {
        signal(pid, libc::SIGCONT);
    }
    assert!(lapsed, "the paused processes' keys go when their leases expire");

    // Resumed, each notices its lease lapsed and registers again, with the same values.
    let back = eventually(Duration::from_secs(20), || {
        observer.resolve(index).unwrap() == Some(uri.clone()) && observer.trainers().unwrap() == vec![id.clone()]
    });
    let logs = format!(
        "server:\n{}\ntrainer:\n{}",
        std::fs::read_to_string(&server.log).unwrap(),
        std::fs::read_to_string(dir.0.join("trainer.log")).unwrap()
    );
    assert!(
        back,
        "both register again: server {:?}, trainers {:?}\n{logs}",
        observer.resolve(index),
        observer.trainers()
    );
    assert!(logs.matches("registering again").count() >= 2, "{logs}");
    assert!(trainer.try_wait().unwrap().is_none(), "the trainer goes on waiting for the servers");
    trainer.kill().unwrap();
    trainer.wait().unwrap();
}

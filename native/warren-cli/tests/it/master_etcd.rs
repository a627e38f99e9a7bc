//! `warren master --store etcd:...` as real processes against a real etcd (the `etcd` binary
//! from `apt-get install -y etcd-server`; the test fails with that advice when it is missing):
//! a second master on the same prefix waits while the first serves, and takes over with the
//! first one's state when the first is killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use warren::master::{Ack, ClientOptions, GetTask, MasterClient};
use warren::recordio::{Compressor, Writer, WriterOptions};

const WARREN: &str = env!("CARGO_BIN_EXE_warren");
const SECRET: &str = "etcd-test-secret";

struct Master {
    child: Child,
    uri: mpsc::Receiver<String>,
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_master(store: &str, pattern: &str, log: &Path) -> Master {
    let mut child = Command::new(WARREN)
        .args(["master", "--dataset", pattern, "--chunks-per-task", "1", "--store", store])
        .env("WARREN_JOB_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(uri) = line.strip_prefix("WARREN_MASTER_URI=") {
                let _ = tx.send(uri.to_string());
            }
        }
    });
    Master { child, uri: rx }
}

#[test]
fn a_waiting_master_takes_over_when_the_leader_is_killed() {
    let etcd = crate::support::etcd::Etcd::start("takeover");
    let dir = crate::support::temp_dir("master-takeover");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut w =
        Writer::create(dir.join("d.rio"), WriterOptions { max_chunk_bytes: 1, compressor: Compressor::None }).unwrap();
    for i in 0..10u32 {
        w.write(&i.to_le_bytes()).unwrap();
    }
    w.finish().unwrap();
    let pattern = dir.join("*.rio").display().to_string();
    let store = format!("etcd:{}/warren/takeover", etcd.endpoint);

    let mut first = spawn_master(&store, &pattern, &dir.join("first.log"));
    let uri = first.uri.recv_timeout(Duration::from_secs(30)).expect("first master starts");
    let opts = ClientOptions { call_timeout: Duration::from_secs(20), ..Default::default() };
    let mut c = MasterClient::new(&uri, SECRET, opts.clone());
    for _ in 0..4 {
        let GetTask::Task(t) = c.get_task(0).unwrap() else { panic!() };
        assert_eq!(c.task_finished(t.id, t.epoch).unwrap(), Ack::Accepted);
    }

    let second = spawn_master(&store, &pattern, &dir.join("second.log"));
    assert!(
        second.uri.recv_timeout(Duration::from_secs(2)).is_err(),
        "the second master must wait while the first holds the lock"
    );
    first.child.kill().unwrap(); // SIGKILL: the lock goes when the lease expires
    first.child.wait().unwrap();
    let killed = Instant::now();
    let uri2 = second.uri.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
        panic!("the second master did not take over:\n{}", std::fs::read_to_string(dir.join("second.log")).unwrap())
    });
    eprintln!("took over {:?} after the kill", killed.elapsed());
    let log = std::fs::read_to_string(dir.join("second.log")).unwrap();
    assert!(log.contains("held by another writer"), "{log}");

    let mut c = MasterClient::new(&uri2, SECRET, opts);
    let st = c.status().unwrap();
    assert_eq!((st.tasks, st.counts.done, st.counts.todo), (10, 4, 6), "the first master's progress survives");
    let mut finished = 4;
    loop {
        match c.get_task(0).unwrap() {
            GetTask::Task(t) => {
                c.task_finished(t.id, t.epoch).unwrap();
                finished += 1;
            }
            GetTask::PassFinished { current_pass: 1 } => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(finished, 10);
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lease_ttl_out_of_bounds_is_refused_with_the_setting_named() {
    for bad in ["0", "3601", "-5", "two"] {
        let out = Command::new(WARREN)
            .args(["master", "--store", "etcd:127.0.0.1:1/x", &format!("--etcd-lease-ttl-s={bad}")])
            .env("WARREN_JOB_SECRET", SECRET)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--etcd-lease-ttl-s {bad} was accepted");
        assert!(err.contains("--etcd-lease-ttl-s"), "{bad}: {err}");
    }
}

//! The master over real sockets, in process: full passes through `TaskReader`, timeouts,
//! restarts on the same store, and bad input (a glob matching nothing, a corrupt file, a
//! wrong secret, garbage on the port). Every wait is bounded.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use warren::Error;
use warren::master::{
    Ack, ClientOptions, GetTask, MasterClient, MasterConfig, MasterService, QueueSettings, ReaderOptions, TaskReader,
    read_task,
};
use warren::recordio::{Compressor, Writer, WriterOptions};
use warren::store::FileStore;

const SECRET: &str = "master-test-secret";

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "warren-mtest-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `files` RecordIO files of `chunks` chunks of `per_chunk` records each; records are
/// "f<file>-c<chunk>-r<record>". Returns the glob matching them.
fn write_dataset(dir: &Path, files: usize, chunks: usize, per_chunk: usize) -> String {
    for f in 0..files {
        let mut w = Writer::create(
            dir.join(format!("part-{f}.rio")),
            WriterOptions { max_chunk_bytes: 1 << 20, compressor: Compressor::Snappy },
        )
        .unwrap();
        for c in 0..chunks {
            for r in 0..per_chunk {
                w.write(format!("f{f}-c{c}-r{r}").as_bytes()).unwrap();
            }
            w.flush().unwrap();
        }
        w.finish().unwrap();
    }
    dir.join("part-*.rio").display().to_string()
}

fn start(dir: &Path, settings: QueueSettings, dataset: Option<(String, u32)>) -> MasterService {
    let mut cfg = MasterConfig::new(SECRET);
    cfg.settings = settings;
    cfg.tick_interval = Duration::from_millis(20);
    cfg.dataset = dataset.map(|(p, k)| (vec![p], k));
    MasterService::start(cfg, Box::new(FileStore::open(dir.join("store")).unwrap())).unwrap()
}

fn client(uri: &str) -> MasterClient {
    MasterClient::new(uri, SECRET, ClientOptions { call_timeout: Duration::from_secs(20), ..Default::default() })
}

fn quick() -> ReaderOptions {
    ReaderOptions { poll: Duration::from_millis(10), idle_timeout: Duration::from_secs(20) }
}

#[test]
fn readers_share_a_pass_and_read_every_record_once() {
    let dir = Dir::new("pass");
    let pattern = write_dataset(&dir.0, 3, 5, 4);
    let master = start(&dir.0, QueueSettings::default(), None);
    let uri = master.uri().to_string();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (uri, pattern) = (uri.clone(), pattern.clone());
            std::thread::spawn(move || {
                let mut c = client(&uri);
                c.set_dataset(&[pattern], 2).unwrap();
                let mut reader = TaskReader::new(c, 0, quick());
                let records: Vec<String> = reader.by_ref().map(|r| String::from_utf8(r.unwrap()).unwrap()).collect();
                (records, reader.tasks_finished(), reader.tasks_failed())
            })
        })
        .collect();
    let mut all = Vec::new();
    let (mut finished, mut failed) = (0, 0);
    for h in handles {
        let (r, f, x) = h.join().unwrap();
        all.extend(r);
        finished += f;
        failed += x;
    }
    assert_eq!(all.len(), 3 * 5 * 4, "every record exactly once without failures");
    assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 60);
    // 15 chunks in tasks of 2: 8 tasks.
    assert_eq!((finished, failed), (8, 0));
    let st = master.status().unwrap();
    assert_eq!((st.pass, st.tasks, st.counts.todo, st.counts.failed), (1, 8, 8, 0));
    // Pass 1 can be read by a reader moved on to it.
    let mut reader = TaskReader::new(client(&uri), 0, quick());
    assert_eq!(reader.by_ref().count(), 0, "pass 0 is over");
    reader.start_pass(1);
    assert_eq!(reader.by_ref().map(Result::unwrap).count(), 60);
}

#[test]
fn dataset_rules_and_a_glob_matching_nothing() {
    let dir = Dir::new("dataset");
    let pattern = write_dataset(&dir.0, 2, 2, 1);
    let master = start(&dir.0, QueueSettings::default(), Some((pattern.clone(), 1)));
    let mut c = client(master.uri());
    c.set_dataset(std::slice::from_ref(&pattern), 1).unwrap();
    let err = c.set_dataset(std::slice::from_ref(&pattern), 3).unwrap_err();
    assert!(matches!(&err, Error::DatasetMismatch(m) if m.contains(master.uri())), "{err}");
    let none = dir.0.join("nothing-*.rio").display().to_string();
    let err = c.set_dataset(&[none], 1).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("nothing-*.rio")), "{err}");

    // A fresh master refuses to start on a pattern that matches nothing, naming it.
    let other = Dir::new("dataset-empty");
    let mut cfg = MasterConfig::new(SECRET);
    cfg.dataset = Some((vec![other.0.join("*.rio").display().to_string()], 1));
    let err = MasterService::start(cfg, Box::new(FileStore::open(other.0.join("store")).unwrap())).unwrap_err();
    assert!(err.to_string().contains("*.rio") && err.to_string().contains("matches no file"), "{err}");
}

#[test]
fn a_corrupt_file_fails_its_tasks_and_the_others_go_on() {
    let dir = Dir::new("corrupt");
    let pattern = write_dataset(&dir.0, 3, 2, 3);
    // Damage the payload of the second chunk of part-1 (its header stays readable).
    let bad = dir.0.join("part-1.rio");
    let mut bytes = std::fs::read(&bad).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    std::fs::write(&bad, bytes).unwrap();
    let settings = QueueSettings { max_failures: 1, ..Default::default() };
    let master = start(&dir.0, settings, Some((pattern, 1)));
    let mut reader = TaskReader::new(client(master.uri()), 0, quick());
    let records: Vec<String> = reader.by_ref().map(|r| String::from_utf8(r.unwrap()).unwrap()).collect();
    // 6 tasks; the bad one is tried twice (max_failures 1) and then discarded.
    assert_eq!(reader.tasks_finished(), 5);
    assert_eq!(reader.tasks_failed(), 2);
    assert_eq!(records.len(), 5 * 3);
    assert!(!records.iter().any(|r| r.starts_with("f1-c1-")), "{records:?}");
    let st = master.status().unwrap();
    assert_eq!((st.pass, st.counts.failed, st.counts.todo), (1, 1, 5));
}

#[test]
fn overdue_tasks_come_back_and_late_reports_are_stale() {
    let dir = Dir::new("timeout");
    let pattern = write_dataset(&dir.0, 1, 2, 1);
    let settings = QueueSettings { initial_timeout_ms: 100, min_timeout_ms: 100, ..Default::default() };
    let master = start(&dir.0, settings, Some((pattern, 1)));
    let mut a = client(master.uri());
    let GetTask::Task(t) = a.get_task(0).unwrap() else { panic!() };
    let GetTask::Task(u) = a.get_task(0).unwrap() else { panic!() };
    assert_eq!(a.get_task(0).unwrap(), GetTask::NoMoreTasksNow);
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        assert!(Instant::now() < deadline, "the master's clock never expired the tasks");
        if let GetTask::Task(x) = a.get_task(0).unwrap() {
            break x;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!([t.id, u.id].contains(&again.id));
    assert!(again.epoch > 1);
    let old = if again.id == t.id { &t } else { &u };
    assert_eq!(a.task_finished(old.id, old.epoch).unwrap(), Ack::Stale);
    assert_eq!(a.task_finished(again.id, again.epoch).unwrap(), Ack::Accepted);
}

#[test]
fn a_restarted_master_resumes_from_its_store_and_clients_reconnect() {
    let dir = Dir::new("restart");
    let pattern = write_dataset(&dir.0, 1, 6, 1);
    let master = start(&dir.0, QueueSettings::default(), Some((pattern.clone(), 1)));
    let uri = master.uri().to_string();
    let port: u16 = uri.rsplit(':').next().unwrap().parse().unwrap();
    let mut c = client(&uri);
    let GetTask::Task(t) = c.get_task(0).unwrap() else { panic!() };
    assert_eq!(c.task_finished(t.id, t.epoch).unwrap(), Ack::Accepted);
    let GetTask::Task(pending) = c.get_task(0).unwrap() else { panic!() };
    master.stop();

    // Restart on the same port a little later, while the client is already retrying.
    let dir_path = dir.0.clone();
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut cfg = MasterConfig::new(SECRET);
        cfg.port = port;
        cfg.dataset = Some((vec![pattern], 1));
        MasterService::start(cfg, Box::new(FileStore::open(dir_path.join("store")).unwrap())).unwrap()
    });
    // The task handed out before the restart is still live after it.
    assert_eq!(c.task_finished(pending.id, pending.epoch).unwrap(), Ack::Accepted);
    assert!(c.reconnects() >= 1);
    let master = restarter.join().unwrap();
    let st = master.status().unwrap();
    assert_eq!((st.counts.done, st.counts.todo, st.counts.pending), (2, 4, 0));
}

#[test]
fn a_wrong_secret_and_garbage_are_refused_and_service_goes_on() {
    let dir = Dir::new("bad");
    let pattern = write_dataset(&dir.0, 1, 2, 1);
    let master = start(&dir.0, QueueSettings::default(), Some((pattern, 1)));
    let uri = master.uri().to_string();

    let err = MasterClient::connect(&uri, "wrong", ClientOptions::default()).unwrap_err();
    assert!(matches!(&err, Error::Auth(m) if m.contains(&uri)), "{err}");

    // Garbage instead of a preamble: the connection is closed, without a reply.
    let mut s = TcpStream::connect(&uri).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(buf.is_empty(), "{buf:?}");

    // A good handshake, then a frame that is not a request: a protocol error, then closed.
    let mut s = TcpStream::connect(&uri).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&warren::wire::preamble()).unwrap();
    let mut challenge = [0u8; 8 + warren::wire::auth::PROOF_LEN];
    s.read_exact(&mut challenge).unwrap();
    let proof = warren::wire::auth::prove(SECRET.as_bytes(), warren::wire::auth::Purpose::Master, &challenge[8..]);
    s.write_all(&proof).unwrap();
    let mut ok = [0u8];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(ok[0], 1);
    s.write_all(&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3]).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(String::from_utf8_lossy(&buf).contains("protocol"), "{buf:?}");

    // A half-open connection that never finishes its handshake does not block others.
    let _idle = TcpStream::connect(&uri).unwrap();
    let mut c = client(&uri);
    let st = c.status().unwrap();
    assert_eq!((st.tasks, st.counts.todo), (2, 2));
    let GetTask::Task(_) = c.get_task(0).unwrap() else { panic!() };
}

#[test]
fn a_master_that_is_gone_gives_a_timeout_naming_it() {
    let gone = crate::common::RefusedPort::new();
    let uri = gone.uri();
    let mut c = MasterClient::new(
        &uri,
        SECRET,
        ClientOptions { call_timeout: Duration::from_millis(300), ..Default::default() },
    );
    let started = Instant::now();
    let err = c.get_task(0).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(&err, Error::Timeout { what, .. } if what.contains(&uri)), "{err}");
}

#[test]
fn read_task_gives_a_tasks_records_in_order_and_a_changed_file_is_corrupt() {
    let dir = Dir::new("read-task");
    let pattern = write_dataset(&dir.0, 1, 4, 3);
    let master = start(&dir.0, QueueSettings::default(), Some((pattern, 2)));
    let mut c = client(master.uri());
    let GetTask::Task(t) = c.get_task(0).unwrap() else { panic!("no task") };
    let records: Vec<String> = read_task(&t).unwrap().into_iter().map(|r| String::from_utf8(r).unwrap()).collect();
    let c0 = t.chunks[0].index;
    let want: Vec<String> = (c0..c0 + 2).flat_map(|c| (0..3).map(move |r| format!("f0-c{c}-r{r}"))).collect();
    assert_eq!(records, want);
    // The file rewritten with other chunk boundaries: the task's chunks are no longer there.
    let mut w = Writer::create(
        dir.0.join("part-0.rio"),
        WriterOptions { max_chunk_bytes: 1 << 20, compressor: Compressor::Snappy },
    )
    .unwrap();
    w.write(b"other").unwrap();
    w.finish().unwrap();
    assert!(matches!(read_task(&t), Err(Error::Corrupt { .. })), "{:?}", read_task(&t));
    assert_eq!(c.task_failed(t.id, t.epoch, "changed").unwrap(), Ack::Accepted);
}

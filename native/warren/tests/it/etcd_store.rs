//! `EtcdStore` against a real etcd (the `etcd` binary from `apt-get install -y etcd-server`;
//! these tests fail with that advice when it is missing): the queue survives reopening and
//! compaction, a second store waits for the leader lock and takes over, a store that lost
//! the lock can no longer write; a flush is one transaction however many submits it holds,
//! cut only between submits when too large; a log that lost a flush ends at the gap; a
//! prefix of another format is refused.

use std::time::{Duration, Instant};

use crate::support::etcd::Etcd;
use serde::{Deserialize, Serialize};
use warren::Error;
use warren::master::{Ack, ChunkRef, DurableQueue, GetTask, QueueCodec, QueueSettings, Task};
use warren::store::{Codec, EtcdOptions, EtcdStore, Store, Ticket};

/// The master's store in etcd.
type QueueStore = EtcdStore<QueueCodec>;

fn chunks(n: u64) -> Vec<ChunkRef> {
    (0..n).map(|i| ChunkRef { path: format!("/d/{i}.rio"), index: 0, offset: 0, len: 1, records: 1 }).collect()
}

fn opts(etcd: &Etcd, prefix: &str) -> EtcdOptions {
    let mut o = EtcdOptions::new(vec![etcd.endpoint.clone()], prefix);
    o.lease_ttl_s = 2;
    o.lock_timeout = Duration::from_secs(20);
    o.compact_after_changes = 8;
    // Two flushes in flight (the default is one; the CLI's tests run that): commits may
    // then complete out of order, which these tests must survive.
    o.flushes_in_flight = 2;
    o
}

fn task(g: GetTask) -> Task {
    match g {
        GetTask::Task(t) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[test]
fn the_queue_survives_reopening_and_compaction_in_etcd() {
    let etcd = Etcd::start("reopen");
    let dq =
        DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/reopen")).unwrap(), 0).unwrap();
    dq.set_dataset(chunks(30), 1).unwrap();
    let mut compactions = 0;
    for i in 0..15 {
        let t = task(dq.get_task(0, i).unwrap());
        assert_eq!(dq.task_finished(t.id, t.epoch, i + 1).unwrap(), Ack::Accepted);
        compactions += usize::from(dq.compact_if_wanted().unwrap());
    }
    assert!(compactions >= 2, "{compactions}");
    let pending = task(dq.get_task(0, 20).unwrap());
    let before = dq.read(|q| q.snapshot()).unwrap();
    drop(dq);

    let store = QueueStore::open(opts(&etcd, "/t/reopen")).unwrap();
    let dq = DurableQueue::open(QueueSettings::default(), store, 20).unwrap();
    let (counts, seq) = dq.read(|q| (q.counts(), q.seq())).unwrap();
    assert_eq!((counts.done, counts.pending, counts.todo), (15, 1, 14));
    assert_eq!(seq, before.seq(), "nothing lost, nothing added");
    assert_eq!(dq.task_finished(pending.id, pending.epoch, 30).unwrap(), Ack::Accepted);
    // Another prefix is another queue.
    let other = QueueStore::open(opts(&etcd, "/t/other")).unwrap();
    assert!(matches!(other.load().unwrap(), (None, c) if c.is_empty()));
}

#[test]
fn a_second_store_waits_for_the_leader_lock_and_takes_over() {
    let etcd = Etcd::start("lock");
    let first =
        DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/lock")).unwrap(), 0).unwrap();
    first.set_dataset(chunks(4), 1).unwrap();
    let t = task(first.get_task(0, 0).unwrap());
    first.task_finished(t.id, t.epoch, 1).unwrap();

    let o = opts(&etcd, "/t/lock");
    let second = std::thread::spawn(move || {
        let started = Instant::now();
        let store = QueueStore::open(o).unwrap();
        (started.elapsed(), DurableQueue::open(QueueSettings::default(), store, 10).unwrap())
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!second.is_finished(), "the lock is held: the second master must wait");
    // The first master still serves meanwhile.
    let t = task(first.get_task(0, 2).unwrap());
    first.task_finished(t.id, t.epoch, 3).unwrap();
    drop(first); // gives the lock up
    let (waited, second) = second.join().unwrap();
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    let counts = second.read(|q| q.counts()).unwrap();
    assert_eq!((counts.done, counts.todo), (2, 2), "the successor has every change of the first master");
}

#[test]
fn a_store_that_lost_the_lock_refuses_to_write() {
    let etcd = Etcd::start("lost");
    let store = QueueStore::open(opts(&etcd, "/t/lost")).unwrap();
    let dq = DurableQueue::open(QueueSettings::default(), store, 0).unwrap();
    dq.set_dataset(chunks(3), 1).unwrap();
    // Someone removes the leader key (as when the lease expired during a long pause).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.endpoint.as_str()], None).await.unwrap();
        c.delete("/t/lost/leader", None).await.unwrap();
    });
    let err = dq.get_task(0, 1).unwrap_err();
    assert!(matches!(&err, Error::StoreFailed(m) if m.contains("no longer holds the leader lock")), "{err}");
    assert!(matches!(dq.get_task(0, 1), Err(Error::StoreFailed(_))), "and stays failed");
}

#[test]
fn an_unreachable_etcd_is_a_clear_error_within_the_deadline() {
    let nobody = crate::common::RefusedPort::new();
    let port = nobody.port();
    let mut o = EtcdOptions::new(vec![format!("127.0.0.1:{port}")], "/t/none");
    o.request_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = QueueStore::open(o).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn group_commit_writes_many_queued_entries_in_order() {
    use warren::master::{Change, ChangeKind};
    let etcd = Etcd::start("group");
    let store = QueueStore::open(opts(&etcd, "/t/group")).unwrap();
    // 300 submits before anyone waits: written as three transactions, in order.
    for seq in 1..=300 {
        let c = Change { seq, kind: ChangeKind::DeadlinesExtended { min_deadline_ms: seq } };
        assert_eq!(store.submit(&[c]).unwrap(), Ticket(seq));
    }
    store.wait_durable(Ticket(300)).unwrap();
    drop(store);
    let store = QueueStore::open(opts(&etcd, "/t/group")).unwrap();
    let (snapshot, changes) = store.load().unwrap();
    assert!(snapshot.is_none());
    assert_eq!(changes.iter().map(|c| c.seq).collect::<Vec<_>>(), (1..=300).collect::<Vec<_>>());
}

#[test]
fn concurrent_clients_share_commits_and_reload_consistently() {
    let etcd = Etcd::start("concurrent");
    let dq = std::sync::Arc::new(
        DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/conc")).unwrap(), 0).unwrap(),
    );
    dq.set_dataset(chunks(200), 1).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let dq = dq.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while let GetTask::Task(t) = dq.get_task(0, 1).unwrap() {
                    assert_eq!(dq.task_finished(t.id, t.epoch, 2).unwrap(), Ack::Accepted);
                    n += 1;
                    dq.compact_if_wanted().unwrap();
                }
                n
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, 200);
    drop(dq);
    let dq =
        DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/conc")).unwrap(), 3).unwrap();
    let (pass, counts) = dq.read(|q| (q.pass(), q.counts())).unwrap();
    assert_eq!((pass, counts.todo, counts.done, counts.pending), (1, 200, 0, 0));
}

/// `n` chunks; `spread` gives every chunk a file name that gzip cannot shrink much.
fn chunk_list(n: u64, spread: bool) -> Vec<ChunkRef> {
    (0..n)
        .map(|i| {
            let path = if spread {
                format!("/data/{:016x}.rio", i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17))
            } else {
                "/data/part-00000.rio".to_string()
            };
            ChunkRef { path, index: i, offset: i * 64, len: 64, records: 1 }
        })
        .collect()
}

#[test]
fn a_dataset_too_large_for_etcd_is_a_clear_error_naming_the_setting() {
    let etcd = Etcd::start_with_request_limit("small", 64 * 1024);
    // ~1.6 MB of JSON, still ~10 times etcd's limit gzipped.
    let dq = DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/big")).unwrap(), 0).unwrap();
    let err = dq.set_dataset(chunk_list(20_000, true), 1).unwrap_err();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(matches!(err, Error::StoreFailed(_)), "{msg}");
    assert!(msg.contains("--max-request-bytes") && msg.contains("bytes"), "{msg}");
}

#[test]
fn a_large_dataset_change_is_stored_compressed_and_reloads() {
    let etcd = Etcd::start_with_request_limit("gz", 64 * 1024);
    let chunks = chunk_list(2_000, false);
    let json = serde_json::to_vec(&chunks).unwrap().len();
    assert!(json > 2 * 64 * 1024, "the change ({json} bytes of JSON) must exceed the limit uncompressed");
    {
        let dq =
            DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/gz")).unwrap(), 0).unwrap();
        dq.set_dataset(chunks, 1).unwrap();
        let t = task(dq.get_task(0, 1).unwrap());
        assert_eq!(dq.task_finished(t.id, t.epoch, 2).unwrap(), Ack::Accepted);
    }
    let dq = DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/gz")).unwrap(), 3).unwrap();
    let (tasks, counts) = dq.read(|q| (q.task_count(), q.counts())).unwrap();
    assert_eq!((tasks, counts.done, counts.todo), (2_000, 1, 1_999));
}

#[test]
fn a_service_whose_store_fails_stops_answering_and_reports_why() {
    use warren::master::{ClientOptions, MasterClient, MasterConfig, MasterService};
    let etcd = Etcd::start("svcfail");
    let master =
        MasterService::start(MasterConfig::new("s"), Box::new(QueueStore::open(opts(&etcd, "/t/svc")).unwrap()))
            .unwrap();
    let mut c = MasterClient::new(
        master.uri(),
        "s",
        ClientOptions { call_timeout: Duration::from_secs(2), ..Default::default() },
    );
    // The dataset goes through the blocking path, tasks through the syncer.
    let dir = crate::common::temp_dir("svcfail");
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = warren::recordio::Writer::create(
        dir.join("d.rio"),
        warren::recordio::WriterOptions { max_chunk_bytes: 1, compressor: warren::recordio::Compressor::None },
    )
    .unwrap();
    for i in 0..4u32 {
        w.write(&i.to_le_bytes()).unwrap();
    }
    w.finish().unwrap();
    c.set_dataset(&[dir.join("*.rio").display().to_string()], 1).unwrap();
    let t = task(c.get_task(0).unwrap());
    assert_eq!(c.task_finished(t.id, t.epoch).unwrap(), Ack::Accepted);
    assert!(master.failure().is_none());

    // Another party takes the lock away (as when the lease expired during a long pause).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut e = etcd_client::Client::connect([etcd.endpoint.as_str()], None).await.unwrap();
        e.delete("/t/svc/leader", None).await.unwrap();
    });
    // A hand-out is answered before it is durable (`MasterConfig::durable_hand_outs`), so
    // the first call after the lock is gone may still get a task; its flush fails, the
    // master reports why, and from then on nothing is answered: clients retry a failed
    // store (a restarted master may answer) until their deadline.
    let started = Instant::now();
    let first = c.get_task(0);
    let why = loop {
        if let Some(why) = master.failure() {
            break why;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the store failure goes unnoticed ({first:?})");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(why.contains("no longer holds the leader lock"), "{why}");
    let asked = Instant::now();
    let err = c.get_task(0).unwrap_err();
    assert!(matches!(&err, Error::Timeout { what, .. } if what.contains("get_task")), "{err}");
    assert!(asked.elapsed() < Duration::from_secs(10), "the call is bounded by its deadline");
    master.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A service's record that is not the master's: a numbered note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Note {
    seq: u64,
    text: String,
}

/// The notes' format.
struct Notes;

impl Codec for Notes {
    type Record = Note;
    type Snapshot = Vec<Note>;
    const FORMAT: &'static str = "test.notes/1";

    fn seq(note: &Note) -> u64 {
        note.seq
    }

    fn snapshot_seq(notes: &Vec<Note>) -> u64 {
        notes.last().map_or(0, |n| n.seq)
    }
}

/// `n` submits of 3 notes each, from note 1.
fn note_submits(n: u64) -> Vec<Vec<Note>> {
    (0..n)
        .map(|i| (1..=3).map(|j| Note { seq: i * 3 + j, text: format!("note {} of submit {i}", i * 3 + j) }).collect())
        .collect()
}

/// The log keys under `prefix` with their values, in key order.
fn log_keys(etcd: &Etcd, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.endpoint.as_str()], None).await.unwrap();
        let opts = etcd_client::GetOptions::new()
            .with_prefix()
            .with_sort(etcd_client::SortTarget::Key, etcd_client::SortOrder::Ascend);
        let resp = c.get(format!("{prefix}/log/"), Some(opts)).await.unwrap();
        resp.kvs().iter().map(|kv| (kv.key_str().unwrap().to_string(), kv.value().to_vec())).collect()
    })
}

/// The sequence number a log key is named after.
fn key_seq(key: &str) -> u64 {
    key.rsplit('/').next().unwrap().parse().unwrap()
}

/// Stops etcd (SIGSTOP) while `f` runs, then lets it go on (SIGCONT): whatever `f`
/// submits meanwhile queues up behind the flushes in flight.
fn with_etcd_paused(etcd: &Etcd, f: impl FnOnce()) {
    let pid = etcd.pid() as libc::pid_t;
    // SAFETY: signals to the etcd child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    f();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
}

#[test]
fn a_flush_of_many_submits_is_one_transaction_and_reloads_in_order() {
    let etcd = Etcd::start("burst");
    let submits = note_submits(1_000);
    let store = EtcdStore::<Notes>::open(opts(&etcd, "/t/burst")).unwrap();
    let mut last = Ticket(0);
    with_etcd_paused(&etcd, || {
        for s in &submits {
            last = store.submit(s).unwrap();
        }
    });
    assert_eq!(last, Ticket(3_000));
    store.wait_durable(last).unwrap();
    // The two flushes in flight when etcd stopped took what was queued when they started
    // (a few submits, or a few hundred if the producer ran ahead of them); the one after
    // them took everything else: hundreds of submits in one key, one transaction (over
    // etcd's --max-txn-ops of 128 were it one put per submit).
    let keys = log_keys(&etcd, "/t/burst");
    let ends: Vec<u64> = keys.iter().map(|(k, _)| key_seq(k)).collect();
    assert_eq!(*ends.last().unwrap(), 3_000);
    assert!(ends.len() <= 2 + 2, "a burst while two flushes were in flight: {ends:?}");
    assert!(ends.iter().all(|e| e % 3 == 0), "keys end at submit boundaries: {ends:?}");
    let largest = ends.iter().scan(0, |prev, e| Some(e - std::mem::replace(prev, *e))).max().unwrap() / 3;
    assert!(largest >= 300, "the largest flush held {largest} submits: {ends:?}");
    drop(store);
    let store = EtcdStore::<Notes>::open(opts(&etcd, "/t/burst")).unwrap();
    let (snapshot, notes) = store.load().unwrap();
    assert!(snapshot.is_none());
    assert_eq!(notes, submits.concat());
}

#[test]
fn a_flush_over_the_request_budget_is_cut_between_submits() {
    let etcd = Etcd::start_with_request_limit("cut", 64 * 1024);
    let mut o = opts(&etcd, "/t/cut");
    o.max_request_bytes = 8 * 1024;
    let submits = note_submits(600); // ~130 bytes per note: ~230 KB, over etcd's limit at once
    let store = EtcdStore::<Notes>::open(o.clone()).unwrap();
    with_etcd_paused(&etcd, || {
        for s in &submits {
            store.submit(s).unwrap();
        }
    });
    store.wait_durable(Ticket(1_800)).unwrap();
    let keys = log_keys(&etcd, "/t/cut");
    let total: usize = submits.iter().map(|s| serde_json::to_vec(s).unwrap().len() + 4).sum();
    assert!(keys.len() >= total / (8 * 1024), "{total} bytes cut into pieces of at most 8 KiB: {} keys", keys.len());
    for (key, value) in &keys {
        assert_eq!(key_seq(key) % 3, 0, "{key}: a submit's records stay in one key");
        assert!(value.len() <= 8 * 1024 + 1, "{key}: {} bytes", value.len());
    }
    drop(store);
    let (_, notes) = EtcdStore::<Notes>::open(o).unwrap().load().unwrap();
    assert_eq!(notes, submits.concat());
}

#[test]
fn a_log_that_lost_a_flush_ends_at_the_gap_and_goes_on_from_there() {
    let etcd = Etcd::start("gap");
    let submits = note_submits(30);
    {
        let store = EtcdStore::<Notes>::open(opts(&etcd, "/t/gap")).unwrap();
        for s in &submits {
            store.append(s).unwrap(); // one flush per submit: one key per submit
        }
    }
    // As if the writer died with a flush not committed and a later one committed.
    let keys = log_keys(&etcd, "/t/gap");
    assert_eq!(keys.len(), 30);
    let lost = &keys[10].0;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([etcd.endpoint.as_str()], None).await.unwrap();
        c.delete(lost.as_str(), None).await.unwrap();
    });
    let store = EtcdStore::<Notes>::open(opts(&etcd, "/t/gap")).unwrap();
    let (_, notes) = store.load().unwrap();
    assert_eq!(notes, submits[..10].concat(), "the records before the gap, nothing after it");
    assert_eq!(log_keys(&etcd, "/t/gap").len(), 10, "the keys after the gap are gone");
    // The log goes on from the gap, with new records where the lost ones were.
    let again: Vec<Note> = (31..=36).map(|seq| Note { seq, text: format!("again {seq}") }).collect();
    store.append(&again).unwrap();
    drop(store);
    let (_, notes) = EtcdStore::<Notes>::open(opts(&etcd, "/t/gap")).unwrap().load().unwrap();
    assert_eq!(notes, [submits[..10].concat(), again].concat());
}

#[test]
fn a_prefix_of_another_format_is_refused_and_left_untouched() {
    let etcd = Etcd::start("format");
    let dq = DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/fmt")).unwrap(), 0).unwrap();
    dq.set_dataset(chunks(3), 1).unwrap();
    drop(dq);
    let before = log_keys(&etcd, "/t/fmt");
    let err = EtcdStore::<Notes>::open(opts(&etcd, "/t/fmt")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Config(_)), "{msg}");
    assert!(msg.contains("warren.master.queue/1") && msg.contains("test.notes/1"), "{msg}");
    assert_eq!(log_keys(&etcd, "/t/fmt"), before);
    // The master still opens it.
    let dq = DurableQueue::open(QueueSettings::default(), QueueStore::open(opts(&etcd, "/t/fmt")).unwrap(), 1).unwrap();
    assert_eq!(dq.read(|q| q.task_count()).unwrap(), 3);
}

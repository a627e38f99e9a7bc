//! `EtcdStore` against a real etcd (the `etcd` binary from `apt-get install -y etcd-server`;
//! these tests fail with that advice when it is missing): the queue survives reopening and
//! compaction, a second store waits for the leader lock and takes over, and a store that
//! lost the lock can no longer write.

#[path = "support/etcd.rs"]
mod etcd;

use std::time::{Duration, Instant};

use etcd::Etcd;
use warren::Error;
use warren::master::{Ack, ChunkRef, DurableQueue, GetTask, QueueSettings, Task};
use warren::store::{EtcdOptions, EtcdStore, Store};

fn chunks(n: u64) -> Vec<ChunkRef> {
    (0..n).map(|i| ChunkRef { path: format!("/d/{i}.rio"), index: 0, offset: 0, len: 1, records: 1 }).collect()
}

fn opts(etcd: &Etcd, prefix: &str) -> EtcdOptions {
    let mut o = EtcdOptions::new(vec![etcd.endpoint.clone()], prefix);
    o.lease_ttl_s = 2;
    o.lock_timeout = Duration::from_secs(20);
    o.compact_after_changes = 8;
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
        DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/reopen")).unwrap(), 0).unwrap();
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

    let store = EtcdStore::open(opts(&etcd, "/t/reopen")).unwrap();
    let dq = DurableQueue::open(QueueSettings::default(), store, 20).unwrap();
    let (counts, seq) = dq.read(|q| (q.counts(), q.seq())).unwrap();
    assert_eq!((counts.done, counts.pending, counts.todo), (15, 1, 14));
    assert_eq!(seq, before.seq(), "nothing lost, nothing added");
    assert_eq!(dq.task_finished(pending.id, pending.epoch, 30).unwrap(), Ack::Accepted);
    // Another prefix is another queue.
    let other = EtcdStore::open(opts(&etcd, "/t/other")).unwrap();
    assert!(matches!(other.load().unwrap(), (None, c) if c.is_empty()));
}

#[test]
fn a_second_store_waits_for_the_leader_lock_and_takes_over() {
    let etcd = Etcd::start("lock");
    let first =
        DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/lock")).unwrap(), 0).unwrap();
    first.set_dataset(chunks(4), 1).unwrap();
    let t = task(first.get_task(0, 0).unwrap());
    first.task_finished(t.id, t.epoch, 1).unwrap();

    let o = opts(&etcd, "/t/lock");
    let second = std::thread::spawn(move || {
        let started = Instant::now();
        let store = EtcdStore::open(o).unwrap();
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
    let store = EtcdStore::open(opts(&etcd, "/t/lost")).unwrap();
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
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut o = EtcdOptions::new(vec![format!("127.0.0.1:{port}")], "/t/none");
    o.request_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = EtcdStore::open(o).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn group_commit_writes_many_queued_entries_in_order() {
    use warren::master::{Change, ChangeKind};
    use warren::store::Ticket;
    let etcd = Etcd::start("group");
    let store = EtcdStore::open(opts(&etcd, "/t/group")).unwrap();
    // 300 submits before anyone waits: written as three transactions, in order.
    for seq in 1..=300 {
        let c = Change { seq, kind: ChangeKind::DeadlinesExtended { min_deadline_ms: seq } };
        assert_eq!(store.submit(&[c]).unwrap(), Ticket(seq));
    }
    store.wait_durable(Ticket(300)).unwrap();
    drop(store);
    let store = EtcdStore::open(opts(&etcd, "/t/group")).unwrap();
    let (snapshot, changes) = store.load().unwrap();
    assert!(snapshot.is_none());
    assert_eq!(changes.iter().map(|c| c.seq).collect::<Vec<_>>(), (1..=300).collect::<Vec<_>>());
}

#[test]
fn concurrent_clients_share_commits_and_reload_consistently() {
    let etcd = Etcd::start("concurrent");
    let dq = std::sync::Arc::new(
        DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/conc")).unwrap(), 0).unwrap(),
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
    let dq = DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/conc")).unwrap(), 3).unwrap();
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
    let dq = DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/big")).unwrap(), 0).unwrap();
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
            DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/gz")).unwrap(), 0).unwrap();
        dq.set_dataset(chunks, 1).unwrap();
        let t = task(dq.get_task(0, 1).unwrap());
        assert_eq!(dq.task_finished(t.id, t.epoch, 2).unwrap(), Ack::Accepted);
    }
    let dq = DurableQueue::open(QueueSettings::default(), EtcdStore::open(opts(&etcd, "/t/gz")).unwrap(), 3).unwrap();
    let (tasks, counts) = dq.read(|q| (q.task_count(), q.counts())).unwrap();
    assert_eq!((tasks, counts.done, counts.todo), (2_000, 1, 1_999));
}

#[test]
fn a_service_whose_store_fails_stops_answering_and_reports_why() {
    use warren::master::{ClientOptions, MasterClient, MasterConfig, MasterService};
    let etcd = Etcd::start("svcfail");
    let master =
        MasterService::start(MasterConfig::new("s"), Box::new(EtcdStore::open(opts(&etcd, "/t/svc")).unwrap()))
            .unwrap();
    let mut c = MasterClient::new(
        master.uri(),
        "s",
        ClientOptions { call_timeout: Duration::from_secs(2), ..Default::default() },
    );
    // The dataset goes through the blocking path, tasks through the syncer.
    let dir = std::env::temp_dir().join(format!("warren-svcfail-{}", std::process::id()));
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
    // Clients retry a failed store (a restarted master may answer) until their deadline.
    let started = Instant::now();
    let err = c.get_task(0).unwrap_err();
    assert!(matches!(&err, Error::Timeout { what, .. } if what.contains("get_task")), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "the call is bounded by its deadline");
    let why = master.failure().expect("the master reports its store failed");
    assert!(why.contains("no longer holds the leader lock"), "{why}");
    master.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

//! The master as a network service (tokio): authenticated connections carrying
//! [`Request`]s, answered from a [`DurableQueue`] once the change is durable (a plain
//! hand-out at once, see [`MasterConfig::durable_hand_outs`]), plus a clock
//! that expires overdue tasks and logs progress.
//!
//! A request is carried out on the connection's task: the queue's lock is held only to
//! change the queue in memory and *submit* the change to the store (which only queues it).
//! The wait for durability does not park a thread per request: one *syncer* thread makes
//! everything submitted durable (one fsync or etcd transaction covers the changes of every
//! connection submitted before it started) and publishes the durable point, which the
//! connection tasks await before they answer. Requests that block anyway (setting the
//! dataset indexes files; a store whose submit writes) go to tokio's blocking pool.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{error, info, warn};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::dataset;
use super::durable::{DurableQueue, QueueCodec};
use super::proto::{MasterStatus, Reply, Request, error_reply};
use super::queue::{Millis, Output, Queue, QueueSettings};
use warren_base::error::{Error, Result};
use warren_base::pause::overslept;
use warren_store::{Store, Ticket};
use warren_wire::auth::Purpose;
use warren_wire::{self as wire, FrameReader};

/// Longest wait for a change to become durable before the request is answered with a
/// timeout (the stores' own deadlines are shorter: this is a backstop).
const DURABLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Settings of a [`MasterService`].
#[derive(Clone, Debug)]
pub struct MasterConfig {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port to bind (0 = any free port).
    pub port: u16,
    /// The job secret clients must prove they hold.
    pub secret: String,
    /// Queue tunables (timeouts, retries, shuffle seed).
    pub settings: QueueSettings,
    /// How often overdue tasks are expired (default 1 s; the queue's timeouts are at
    /// least [`QueueSettings::min_timeout_ms`] anyway).
    pub tick_interval: Duration,
    /// How often progress is logged (default 10 s).
    pub progress_interval: Duration,
    /// A dataset to set at start-up, as if a first worker had sent it: glob patterns and
    /// chunks per task.
    pub dataset: Option<(Vec<String>, u32)>,
    /// Whether a `get_task` reply waits until its hand-out is durable (default `false`).
    ///
    /// By default a hand-out is answered at once and made durable with the next group
    /// commit: the client's next durable call (its `task_finished`) is logged after it, so
    /// it covers the hand-out, and a crash can forget only hand-outs whose task nobody has
    /// reported on yet. Such a task is back in todo after the restart and is handed out
    /// again: at-least-once delivery, as after a timeout or a lost reply. That halves the
    /// durable round trips of a get/finish pair (docs/benchmarks-master.md). `true` keeps
    /// the seed's behaviour: no hand-out is ever forgotten.
    pub durable_hand_outs: bool,
    /// TLS on every connection (default `None`: plain TCP); clients must use TLS too.
    pub tls: Option<wire::Tls>,
}

impl MasterConfig {
    /// Settings for `127.0.0.1`, any port, with `secret` and default queue settings.
    pub fn new(secret: impl Into<String>) -> MasterConfig {
        MasterConfig {
            host: "127.0.0.1".into(),
            port: 0,
            secret: secret.into(),
            settings: QueueSettings::default(),
            tick_interval: Duration::from_secs(1),
            progress_interval: Duration::from_secs(10),
            dataset: None,
            durable_hand_outs: false,
            tls: None,
        }
    }
}

/// Milliseconds of wall-clock time: deadlines stored in the queue survive a restart.
pub fn now_ms() -> Millis {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as Millis)
}

/// The store's durable point as the syncer last published it.
#[derive(Clone, Debug, Default)]
struct Durable {
    /// Every change up to this sequence number is durable.
    seq: u64,
    /// The store failed (nothing after `seq` will become durable).
    failed: Option<String>,
}

/// What the connection tasks ask of the syncer thread.
#[derive(Default)]
struct SyncRequest {
    /// The highest ticket a connection waits for.
    wanted: u64,
    /// The service is stopping.
    stop: bool,
}

/// The syncer: one thread waits on the store for the highest ticket requested, then
/// publishes the new durable point to every waiting connection task.
struct Syncer {
    request: Mutex<SyncRequest>,
    wake: Condvar,
    durable: watch::Sender<Durable>,
}

/// What the connection tasks share.
pub(crate) struct Shared {
    queue: DurableQueue<Box<dyn Store<QueueCodec>>>,
    /// The last dataset request accepted, so that the same request from every worker does
    /// not re-index the files.
    dataset: Mutex<Option<(Vec<String>, u32)>>,
    failure: Mutex<Option<String>>,
    syncer: Syncer,
    /// See [`MasterConfig::durable_hand_outs`].
    durable_hand_outs: bool,
}

impl Shared {
    pub(crate) fn open(
        settings: QueueSettings,
        store: Box<dyn Store<QueueCodec>>,
        durable_hand_outs: bool,
    ) -> Result<Shared> {
        Ok(Shared {
            queue: DurableQueue::open(settings, store, now_ms())?,
            dataset: Mutex::new(None),
            failure: Mutex::new(None),
            durable_hand_outs,
            syncer: Syncer {
                request: Mutex::new(SyncRequest::default()),
                wake: Condvar::new(),
                durable: watch::Sender::new(Durable::default()),
            },
        })
    }

    /// Carries out one request (blocking until its changes are durable).
    pub(crate) fn handle(&self, req: Request, now: Millis) -> Reply {
        let answer_at_once = self.answers_before_durable(&req);
        let result = self.submit(req, now).and_then(|(reply, ticket)| {
            if answer_at_once {
                self.ask_syncer(ticket);
                Ok(reply)
            } else {
                self.queue.wait_durable(ticket).map(|()| reply)
            }
        });
        self.reply(result)
    }

    /// Carries out one request that does not block (not `SetDataset`), awaiting the syncer
    /// for durability.
    async fn handle_async(&self, req: Request, now: Millis) -> Reply {
        let answer_at_once = self.answers_before_durable(&req);
        let result = match self.submit(req, now) {
            Ok((reply, ticket)) if answer_at_once => {
                self.ask_syncer(ticket);
                Ok(reply)
            }
            Ok((reply, ticket)) => self.durable(ticket).await.map(|()| reply),
            Err(e) => Err(e),
        };
        self.reply(result)
    }

    /// Whether `req` is answered before its change is durable: a plain hand-out, unless
    /// [`MasterConfig::durable_hand_outs`].
    fn answers_before_durable(&self, req: &Request) -> bool {
        !self.durable_hand_outs && matches!(req, Request::GetTask { .. })
    }

    /// Asks the syncer to make everything up to `ticket` durable, without waiting.
    fn ask_syncer(&self, ticket: Ticket) {
        let mut r = self.syncer.request.lock().unwrap_or_else(|p| p.into_inner());
        if ticket.0 > r.wanted {
            r.wanted = ticket.0;
            drop(r);
            self.syncer.wake.notify_one();
        }
    }

    /// Whether `req` must run on a blocking thread.
    fn blocks(&self, req: &Request) -> bool {
        matches!(req, Request::SetDataset { .. }) || self.queue.store().submit_blocks()
    }

    /// Makes the change of `req` and submits it; the reply may be sent once the ticket is
    /// durable.
    fn submit(&self, req: Request, now: Millis) -> Result<(Reply, Ticket)> {
        let q = &self.queue;
        match req {
            Request::SetDataset { patterns, chunks_per_task } => {
                self.set_dataset(patterns, chunks_per_task).map(|()| (Reply::Done, Ticket(0)))
            }
            Request::GetTask { pass } => q.submit(|q| q.get_task(pass, now)).map(|(task, t)| (Reply::Task { task }, t)),
            Request::TaskFinished { id, epoch } => {
                q.submit(|q| q.task_finished(id, epoch, now)).map(|(ack, t)| (Reply::Ack { ack }, t))
            }
            Request::TaskFailed { id, epoch, reason } => {
                warn!("master: task {id} epoch {epoch} failed: {reason}");
                q.submit(|q| q.task_failed(id, epoch, reason)).map(|(ack, t)| (Reply::Ack { ack }, t))
            }
            Request::FinishAndGetTask { id, epoch, pass } => q
                .submit(|q| {
                    let finished = q.task_finished(id, epoch, now)?;
                    // Cannot fail once `task_finished` succeeded (both need only a dataset);
                    // if it did, `submit` would notice the unreturned change.
                    let next = q.get_task(pass, now)?;
                    let mut changes = finished.changes;
                    changes.extend(next.changes);
                    Ok(Output { reply: (finished.reply, next.reply), changes })
                })
                .map(|((ack, task), t)| (Reply::FinishedAndTask { ack, task }, t)),
            Request::Status => q
                .submit(|q| Ok(Output { reply: status_of(q), changes: Vec::new() }))
                .map(|(status, t)| (Reply::Status { status }, t)),
        }
    }

    fn reply(&self, result: Result<Reply>) -> Reply {
        result.unwrap_or_else(|e| {
            if matches!(e, Error::StoreFailed(_)) {
                self.set_failure(&e);
            }
            error_reply(&e)
        })
    }

    /// Waits (without blocking a thread) until the syncer made `ticket` durable.
    async fn durable(&self, ticket: Ticket) -> Result<()> {
        let mut rx = self.syncer.durable.subscribe();
        if rx.borrow().seq >= ticket.0 {
            return Ok(());
        }
        self.ask_syncer(ticket);
        let seen =
            tokio::time::timeout(DURABLE_TIMEOUT, rx.wait_for(|d| d.seq >= ticket.0 || d.failed.is_some())).await;
        match seen {
            Ok(Ok(d)) if d.seq >= ticket.0 => Ok(()),
            Ok(Ok(d)) => Err(Error::StoreFailed(d.failed.clone().unwrap_or_default())),
            Ok(Err(_)) => Err(Error::Master("the master is stopping".into())),
            Err(_) => Err(Error::Timeout {
                what: format!("the store to make change {} durable", ticket.0),
                after: DURABLE_TIMEOUT,
            }),
        }
    }

    /// The syncer thread's loop: until [`stop_syncer`](Self::stop_syncer), waits for the
    /// highest ticket requested and publishes it once durable. Asked to stop, it first makes
    /// durable what was asked before (hand-outs already answered), so that a master stopped
    /// and started again on its store still knows every task it handed out.
    fn run_syncer(&self) {
        let mut done = 0;
        loop {
            let target = {
                let mut r = self.syncer.request.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if r.wanted > done {
                        break r.wanted;
                    }
                    if r.stop {
                        return;
                    }
                    // An idle wait for work: `request` and `stop_syncer` notify.
                    r = self.syncer.wake.wait(r).unwrap_or_else(|p| p.into_inner());
                }
            };
            match self.queue.wait_durable(Ticket(target)) {
                Ok(()) => {
                    done = target;
                    self.syncer.durable.send_modify(|d| d.seq = d.seq.max(target));
                }
                Err(e) => {
                    self.set_failure(&e);
                    let why = match &e {
                        Error::StoreFailed(m) => m.clone(),
                        other => other.to_string(),
                    };
                    self.syncer.durable.send_modify(|d| d.failed = Some(why));
                    return;
                }
            }
        }
    }

    fn stop_syncer(&self) {
        self.syncer.request.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        self.syncer.wake.notify_all();
    }

    fn set_dataset(&self, patterns: Vec<String>, chunks_per_task: u32) -> Result<()> {
        let mut last = self.dataset.lock().map_err(|_| Error::Master("dataset lock poisoned".into()))?;
        let key = (patterns, chunks_per_task);
        if last.as_ref() == Some(&key) {
            return Ok(());
        }
        let chunks = dataset::chunks(&key.0)?;
        self.queue.set_dataset(chunks, chunks_per_task)?;
        *last = Some(key);
        Ok(())
    }

    pub(crate) fn status(&self) -> Result<MasterStatus> {
        self.queue.read(status_of)
    }

    /// Expires overdue tasks and compacts the store if it asks for it. A master that did not
    /// run for `stopped` (its clock woke that much later than due: the process was stopped or
    /// frozen) first gives every pending task a full timeout again, as after a restart: the
    /// trainers are not blamed for the master's own pause.
    fn tick(&self, now: Millis, stopped: Option<Duration>) {
        let resumed = match stopped {
            Some(d) => {
                warn!("master: it did not run for {d:.1?} (stopped or frozen): pending tasks get a full timeout again");
                self.queue.resume(now)
            }
            None => Ok(()),
        };
        let result = resumed.and_then(|()| self.queue.tick(now)).and_then(|expired| {
            if !expired.is_empty() {
                warn!("master: {} task(s) timed out: {expired:?}", expired.len());
            }
            self.queue.compact_if_wanted().map(|_| ())
        });
        if let Err(e) = result {
            self.set_failure(&e);
        }
    }

    fn set_failure(&self, e: &Error) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            error!("master: the store failed; restart the master: {e}");
            *f = Some(e.to_string());
        }
    }
}

fn status_of(q: &Queue) -> MasterStatus {
    MasterStatus { has_dataset: q.has_dataset(), pass: q.pass(), tasks: q.task_count(), counts: q.counts() }
}

/// A running master. Dropping it stops it.
pub struct MasterService {
    runtime: Option<tokio::runtime::Runtime>,
    syncer: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
    uri: String,
}

impl std::fmt::Debug for MasterService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterService").field("uri", &self.uri).finish()
    }
}

impl MasterService {
    /// Rebuilds the queue from `store`, sets the configured dataset (if any), binds and
    /// starts serving.
    pub fn start(cfg: MasterConfig, store: Box<dyn Store<QueueCodec>>) -> Result<MasterService> {
        if cfg.secret.is_empty() {
            return Err(Error::Config("a master needs a non-empty job secret".into()));
        }
        cfg.settings.validate()?;
        let shared = Arc::new(Shared::open(cfg.settings.clone(), store, cfg.durable_hand_outs)?);
        if let Some((patterns, k)) = &cfg.dataset {
            shared.set_dataset(patterns.clone(), *k)?;
        }
        let syncer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("warren-master-sync".into())
                .spawn(move || shared.run_syncer())
                .map_err(|e| Error::io("starting the master's syncer thread", e))?
        };
        let wire::Bound { runtime, listener, addr: bound } = wire::bind("master", 2, &cfg.host, cfg.port)?;
        let uri = format!("{}:{}", cfg.host, bound.port());
        runtime.spawn(serve(listener, shared.clone(), Arc::new(cfg.secret.into_bytes()), cfg.tls));
        runtime.spawn(clock(shared.clone(), cfg.tick_interval, cfg.progress_interval));
        let status = shared.status()?;
        info!(
            "master: listening on {uri}; pass {}, {} tasks (todo {}, pending {}, done {}, failed {})",
            status.pass,
            status.tasks,
            status.counts.todo,
            status.counts.pending,
            status.counts.done,
            status.counts.failed
        );
        Ok(MasterService { runtime: Some(runtime), syncer: Some(syncer), shared, uri })
    }

    /// `host:port` clients connect to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The current counts.
    pub fn status(&self) -> Result<MasterStatus> {
        self.shared.status()
    }

    /// Why the master stopped working, if its store failed (it must then be restarted).
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops serving; open connections are closed. Outside an async context this waits (at
    /// most 10 s) for queue calls in flight, and the store is closed when it returns.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_err() {
                // Wait for queue calls in flight, so that the store is released when this
                // returns (a new master may open it next).
                rt.shutdown_timeout(Duration::from_secs(10));
            } else {
                rt.shutdown_background();
            }
        }
        if let Some(syncer) = self.syncer.take() {
            self.shared.stop_syncer();
            // Its store waits have deadlines of their own.
            let _ = syncer.join();
        }
    }
}

impl Drop for MasterService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, secret: Arc<Vec<u8>>, tls: Option<wire::Tls>) {
    wire::serve(listener, secret, tls, Purpose::Master, "master", move |stream| connection(stream, shared.clone()))
        .await
}

async fn connection(stream: wire::ServiceStream, shared: Arc<Shared>) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let (rd, mut wr) = stream.into_split();
    let mut requests = FrameReader::new(rd, peer.clone());
    loop {
        let req = match requests.next::<Request>().await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e @ Error::Protocol(_)) => {
                warn!("master: {peer} sent a bad frame, closing: {e}");
                let _ = wr.write_all(&wire::encode_frame(&error_reply(&e))).await;
                return;
            }
            Err(e) => {
                info!("master: connection from {peer} ended: {e}");
                return;
            }
        };
        let reply = if shared.blocks(&req) {
            let s = shared.clone();
            match tokio::task::spawn_blocking(move || s.handle(req, now_ms())).await {
                Ok(reply) => reply,
                Err(e) => error_reply(&Error::Master(format!("request handler panicked: {e}"))),
            }
        } else {
            shared.handle_async(req, now_ms()).await
        };
        if let Err(e) = wr.write_all(&wire::encode_frame(&reply)).await {
            info!("master: connection from {peer} ended: {e}");
            return;
        }
    }
}

async fn clock(shared: Arc<Shared>, tick: Duration, progress: Duration) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_progress = tokio::time::Instant::now();
    loop {
        let asked = std::time::Instant::now();
        let due = ticks.tick().await.into_std().max(asked);
        let stopped = overslept(due, std::time::Instant::now(), tick);
        let s = shared.clone();
        let log_progress = last_progress.elapsed() >= progress;
        if log_progress {
            last_progress = tokio::time::Instant::now();
        }
        let _ = tokio::task::spawn_blocking(move || {
            s.tick(now_ms(), stopped);
            if !log_progress {
                return;
            }
            if let Ok(st) = s.status() {
                info!(
                    "master progress: pass {}, tasks {}: done {}, pending {}, todo {}, failed {}",
                    st.pass, st.tasks, st.counts.done, st.counts.pending, st.counts.todo, st.counts.failed
                );
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ack, GetTask, TaskId};
    use warren_recordio::{Compressor, Writer, WriterOptions};
    use warren_store::FileStore;
    use warren_store::testdir::TestDir;

    fn dataset(dir: &TestDir, chunks: usize) -> String {
        let mut w = Writer::create(
            dir.path().join("d.rio"),
            WriterOptions { max_chunk_bytes: 1, compressor: Compressor::None },
        )
        .unwrap();
        for i in 0..chunks {
            w.write(format!("r{i}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
        dir.path().join("*.rio").display().to_string()
    }

    fn shared(dir: &TestDir) -> Shared {
        Shared::open(QueueSettings::default(), Box::new(FileStore::open(dir.path().join("store")).unwrap()), false)
            .unwrap()
    }

    /// A file store that remembers the highest ticket anyone waited for.
    struct Watched {
        inner: FileStore<QueueCodec>,
        waited: std::sync::atomic::AtomicU64,
    }

    impl Store<QueueCodec> for Watched {
        fn submit(&self, records: &[crate::Change]) -> Result<Ticket> {
            self.inner.submit(records)
        }
        fn wait_durable(&self, ticket: Ticket) -> Result<()> {
            self.inner.wait_durable(ticket)?;
            self.waited.fetch_max(ticket.0, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
        fn load(&self) -> Result<warren_store::Loaded<QueueCodec>> {
            self.inner.load()
        }
        fn compact(&self, snapshot: &crate::Snapshot) -> Result<()> {
            self.inner.compact(snapshot)
        }
    }

    fn watched(dir: &TestDir) -> Arc<Watched> {
        let inner = FileStore::open(dir.path().join("store")).unwrap();
        Arc::new(Watched { inner, waited: Default::default() })
    }

    /// The queue's last change, read without waiting for it to be durable.
    fn last_change(s: &Shared) -> u64 {
        s.queue.submit(|q| Ok(Output { reply: q.seq(), changes: Vec::new() })).unwrap().0
    }

    fn waited(w: &Watched) -> u64 {
        w.waited.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn a_master_that_did_not_run_gives_pending_tasks_a_full_timeout_again() {
        let dir = TestDir::new("svc-paused");
        let pat = dataset(&dir, 2);
        let settings = QueueSettings { initial_timeout_ms: 1000, min_timeout_ms: 1000, ..QueueSettings::default() };
        let s = Shared::open(settings, Box::new(FileStore::open(dir.path().join("store")).unwrap()), false).unwrap();
        s.handle(Request::SetDataset { patterns: vec![pat], chunks_per_task: 1 }, 0);
        let Reply::Task { task: GetTask::Task(_) } = s.handle(Request::GetTask { pass: 0 }, 0) else { panic!() };
        // Stopped from just after the hand-out until well past its deadline.
        s.tick(9_000, Some(Duration::from_secs(9)));
        assert_eq!(s.status().unwrap().counts.pending, 1, "not the trainer's fault");
        s.tick(9_500, None);
        assert_eq!(s.status().unwrap().counts.pending, 1, "a full timeout from the wake");
        s.tick(10_000, None);
        assert_eq!(s.status().unwrap().counts.pending, 0, "then the silence counts");
    }

    #[test]
    fn a_hand_out_is_answered_before_it_is_durable_unless_asked_and_a_finish_never_is() {
        for durable_hand_outs in [false, true] {
            let dir = TestDir::new("svc-hand-outs");
            let pat = dataset(&dir, 2);
            let store = watched(&dir);
            let s = Shared::open(QueueSettings::default(), Box::new(store.clone()), durable_hand_outs).unwrap();
            s.handle(Request::SetDataset { patterns: vec![pat], chunks_per_task: 1 }, 0);
            let before = waited(&store);
            let Reply::Task { task: GetTask::Task(t) } = s.handle(Request::GetTask { pass: 0 }, 1) else { panic!() };
            let hand_out = last_change(&s);
            assert!(hand_out > before, "the hand-out is a change");
            assert_eq!(waited(&store) >= hand_out, durable_hand_outs, "durable_hand_outs = {durable_hand_outs}");
            s.handle(Request::TaskFinished { id: t.id, epoch: t.epoch }, 2);
            let finish = last_change(&s);
            assert!(waited(&store) >= finish, "a finish is answered only once durable, with the hand-out before it");
        }
    }

    #[test]
    fn a_hand_out_nobody_reports_on_still_becomes_durable_promptly() {
        let dir = TestDir::new("svc-lone-hand-out");
        let pat = dataset(&dir, 2);
        let store = watched(&dir);
        let mut cfg = MasterConfig::new("s");
        cfg.dataset = Some((vec![pat], 1));
        let master = MasterService::start(cfg, Box::new(store.clone())).unwrap();
        let mut client = crate::MasterClient::connect(master.uri(), "s", Default::default()).unwrap();
        assert!(matches!(client.get_task(0).unwrap(), GetTask::Task(_)));
        let hand_out = last_change(&master.shared);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while waited(&store) < hand_out {
            assert!(std::time::Instant::now() < until, "the syncer never made the hand-out durable");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn requests_are_answered_from_the_queue() {
        let dir = TestDir::new("svc-handle");
        let pat = dataset(&dir, 3);
        let s = shared(&dir);
        let set = |p: &str, k| s.handle(Request::SetDataset { patterns: vec![p.into()], chunks_per_task: k }, 0);
        assert!(matches!(s.handle(Request::GetTask { pass: 0 }, 0), Reply::Error { .. }));
        assert_eq!(set(&pat, 2), Reply::Done);
        assert_eq!(set(&pat, 2), Reply::Done);
        assert!(
            matches!(set(&pat, 1), Reply::Error { kind: super::super::proto::ErrorKind::DatasetMismatch, .. }),
            "another chunks_per_task is another dataset"
        );
        let missing = dir.path().join("nope*.rio").display().to_string();
        match set(&missing, 2) {
            Reply::Error { message, .. } => assert!(message.contains("nope*.rio"), "{message}"),
            other => panic!("{other:?}"),
        }
        let Reply::Task { task: GetTask::Task(t) } = s.handle(Request::GetTask { pass: 0 }, 1) else { panic!() };
        assert_eq!(s.handle(Request::TaskFinished { id: t.id, epoch: t.epoch }, 2), Reply::Ack { ack: Ack::Accepted });
        assert_eq!(s.handle(Request::TaskFinished { id: t.id, epoch: t.epoch }, 2), Reply::Ack { ack: Ack::Stale });
        let Reply::Task { task: GetTask::Task(u) } = s.handle(Request::GetTask { pass: 0 }, 3) else { panic!() };
        assert_eq!(
            s.handle(Request::FinishAndGetTask { id: u.id, epoch: u.epoch, pass: 0 }, 4),
            Reply::FinishedAndTask { ack: Ack::Accepted, task: GetTask::PassFinished { current_pass: 1 } }
        );
        let Reply::Status { status } = s.handle(Request::Status, 5) else { panic!() };
        assert_eq!((status.pass, status.tasks, status.counts.todo), (1, 2, 2));
        assert!(matches!(
            s.handle(Request::TaskFailed { id: TaskId(99), epoch: 1, reason: "x".into() }, 5),
            Reply::Error { .. }
        ));
    }
}

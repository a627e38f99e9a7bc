//! [`DurableQueue`]: a [`Queue`] whose every answer is backed by a [`Store`], and
//! [`QueueCodec`], what the queue keeps in a store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::change::Change;
use super::queue::{Ack, ChunkRef, GetTask, Millis, Output, Queue, QueueSettings, Snapshot, TaskId};
use warren_base::error::{Error, Result};
use warren_store::{Codec, Replay, Store, Ticket};

/// The master's durable format: its log records are the queue's [`Change`]s, its
/// snapshots the queue's [`Snapshot`]s, both as JSON.
pub struct QueueCodec;

impl Codec for QueueCodec {
    type Record = Change;
    type Snapshot = Snapshot;
    const FORMAT: &'static str = "warren.master.queue/1";

    fn seq(change: &Change) -> u64 {
        change.seq
    }

    fn snapshot_seq(snapshot: &Snapshot) -> u64 {
        snapshot.seq()
    }
}

impl Replay for QueueCodec {
    type State = Queue;

    /// Replaying changes never consults the settings (see `change.rs`), so the defaults do.
    fn restore(snapshot: Option<Snapshot>) -> Result<Queue> {
        Queue::restore(QueueSettings::default(), snapshot, [])
    }

    fn apply(queue: &mut Queue, change: &Change) -> Result<()> {
        queue.apply(change)
    }

    fn snapshot(queue: &Queue) -> Snapshot {
        queue.snapshot()
    }
}

/// A task queue shared by threads, whose changes are durable before any call returns.
///
/// Each call locks the queue, runs the operation, submits its changes to the store (which
/// fixes their order), unlocks, and then waits until the store has made them durable, so
/// threads waiting at the same time share fsyncs. A reply is never sent for a state the
/// store could lose: a later change is only durable once every earlier one is.
///
/// If the store fails, the in-memory queue may be ahead of the disk; from then on every
/// call fails with [`Error::StoreFailed`] and the master must be restarted.
pub struct DurableQueue<S: Store<QueueCodec>> {
    queue: Mutex<Queue>,
    store: S,
    broken: AtomicBool,
    compacting: AtomicBool,
}

impl<S: Store<QueueCodec>> DurableQueue<S> {
    /// Rebuilds the queue from what `store` holds and gives pending tasks a fresh timeout
    /// from `now` (see [`Queue::resume`]).
    pub fn open(settings: QueueSettings, store: S, now: Millis) -> Result<DurableQueue<S>> {
        let (snapshot, changes) = store.load()?;
        let mut queue = Queue::restore(settings, snapshot, changes)?;
        let resumed = queue.resume(now);
        store.append(&resumed.changes)?;
        Ok(DurableQueue {
            queue: Mutex::new(queue),
            store,
            broken: AtomicBool::new(false),
            compacting: AtomicBool::new(false),
        })
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Runs `op` on the queue and returns its reply once its changes are durable.
    ///
    /// `op` must return every change it made in its [`Output`] (combine outputs when it
    /// makes several calls); a queue left with changes that were not returned is treated
    /// as a store failure, since they would never be written.
    pub fn run<R>(&self, op: impl FnOnce(&mut Queue) -> Result<Output<R>>) -> Result<R> {
        let (reply, ticket) = self.submit(op)?;
        self.wait_durable(ticket)?;
        Ok(reply)
    }

    /// The first half of [`run`](Self::run): runs `op` and submits its changes, without
    /// waiting for them to be durable. The reply must not be shown to anyone before
    /// [`wait_durable`](Self::wait_durable) returned for the ticket, unless forgetting the
    /// change in a crash is harmless (the service's hand-outs: see
    /// [`MasterConfig::durable_hand_outs`](super::MasterConfig::durable_hand_outs)). Meant for callers
    /// that wait without blocking a thread (the network service); it blocks only as long
    /// as the store's [`Store::submit`] does.
    pub fn submit<R>(&self, op: impl FnOnce(&mut Queue) -> Result<Output<R>>) -> Result<(R, Ticket)> {
        let mut queue = self.lock()?;
        let before = queue.seq();
        let result = op(&mut queue);
        let returned = result.as_ref().ok().and_then(|out| out.changes.last()).map_or(before, |c| c.seq);
        if queue.seq() != returned {
            return Err(self.fail(format!(
                "an operation changed the queue to change {} but returned changes up to {returned} only",
                queue.seq()
            )));
        }
        let out = result?;
        let ticket = self.store.submit(&out.changes).map_err(|e| self.fail_with(e))?;
        Ok((out.reply, ticket))
    }

    /// The second half of [`run`](Self::run): blocks until every change up to `ticket` is
    /// durable. A store failure breaks the queue (every later call fails).
    pub fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        self.store.wait_durable(ticket).map_err(|e| self.fail_with(e))
    }

    /// Runs a read-only `f` on the queue; returns once the state it saw is durable.
    pub fn read<R>(&self, f: impl FnOnce(&Queue) -> R) -> Result<R> {
        self.run(|q| Ok(Output { reply: f(q), changes: Vec::new() }))
    }

    /// [`Queue::set_dataset`], durably.
    pub fn set_dataset(&self, chunks: Vec<ChunkRef>, chunks_per_task: u32) -> Result<()> {
        self.run(|q| q.set_dataset(chunks, chunks_per_task))
    }

    /// [`Queue::get_task`], durably.
    pub fn get_task(&self, pass: u64, now: Millis) -> Result<GetTask> {
        self.run(|q| q.get_task(pass, now))
    }

    /// [`Queue::task_finished`], durably.
    pub fn task_finished(&self, id: TaskId, epoch: u64, now: Millis) -> Result<Ack> {
        self.run(|q| q.task_finished(id, epoch, now))
    }

    /// [`Queue::task_failed`], durably.
    pub fn task_failed(&self, id: TaskId, epoch: u64, reason: impl Into<String>) -> Result<Ack> {
        self.run(|q| q.task_failed(id, epoch, reason))
    }

    /// Finishes a task and gets the next one in a single durable step: the seed's
    /// `GetTask(finished, result)` call, one store write per completion.
    pub fn finish_and_get_task(&self, id: TaskId, epoch: u64, pass: u64, now: Millis) -> Result<(Ack, GetTask)> {
        self.run(|q| {
            let finished = q.task_finished(id, epoch, now)?;
            // Cannot fail once `task_finished` succeeded (both need only a dataset); if it
            // did, `run` would notice the unreturned change and refuse to go on.
            let next = q.get_task(pass, now)?;
            let mut changes = finished.changes;
            changes.extend(next.changes);
            Ok(Output { reply: (finished.reply, next.reply), changes })
        })
    }

    /// [`Queue::tick`], durably: expires overdue tasks.
    pub fn tick(&self, now: Millis) -> Result<Vec<TaskId>> {
        self.run(|q| Ok(q.tick(now)))
    }

    /// [`Queue::resume`], durably: gives every pending task at least a full timeout from `now`
    /// (the master itself did not run for a while: that time is not the trainers').
    pub fn resume(&self, now: Millis) -> Result<()> {
        self.run(|q| Ok(q.resume(now)))
    }

    /// Writes a snapshot of the current state to the store and lets it cut its log.
    pub fn compact(&self) -> Result<()> {
        // The snapshot is taken under the lock, so it ends at an operation boundary.
        let snapshot = self.lock()?.snapshot();
        self.store.compact(&snapshot).map_err(|e| self.fail_with(e))
    }

    /// [`compact`](Self::compact) if the store asks for it and no other thread is
    /// compacting; returns whether it did.
    pub fn compact_if_wanted(&self) -> Result<bool> {
        if !self.store.wants_compaction()
            || self.compacting.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            return Ok(false);
        }
        let result = self.compact();
        self.compacting.store(false, Ordering::Release);
        result.map(|()| true)
    }

    fn lock(&self) -> Result<MutexGuard<'_, Queue>> {
        if self.broken.load(Ordering::Acquire) {
            return Err(Error::StoreFailed("an earlier write to the store failed".into()));
        }
        self.queue.lock().map_err(|_| self.fail("a thread panicked while changing the queue".into()))
    }

    fn fail(&self, why: String) -> Error {
        self.broken.store(true, Ordering::Release);
        Error::StoreFailed(why)
    }

    fn fail_with(&self, e: Error) -> Error {
        self.broken.store(true, Ordering::Release);
        e
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Task;
    use warren_store::testdir::TestDir;
    use warren_store::{FileStore, SnapshotEveryChangeStore};

    fn chunks(n: u64) -> Vec<ChunkRef> {
        (0..n).map(|i| ChunkRef { path: format!("/d/{i}.rio"), index: 0, offset: 0, len: 1, records: 1 }).collect()
    }

    fn open(dir: &TestDir, now: Millis) -> DurableQueue<FileStore<QueueCodec>> {
        DurableQueue::open(QueueSettings::default(), FileStore::open(dir.path()).unwrap(), now).unwrap()
    }

    fn task(reply: GetTask) -> Task {
        match reply {
            GetTask::Task(t) => t,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    #[test]
    fn finish_and_get_is_one_durable_step() {
        let dir = TestDir::new("durable-fag");
        let dq = open(&dir, 0);
        dq.set_dataset(chunks(3), 1).unwrap();
        let mut t = task(dq.get_task(0, 0).unwrap());
        let records = dq.store().stats().submits;
        for _ in 0..2 {
            let (ack, next) = dq.finish_and_get_task(t.id, t.epoch, 0, 10).unwrap();
            assert_eq!(ack, Ack::Accepted);
            t = task(next);
        }
        assert_eq!(dq.store().stats().submits, records + 2, "one record per call");
        let (ack, next) = dq.finish_and_get_task(t.id, t.epoch, 0, 10).unwrap();
        assert_eq!((ack, next), (Ack::Accepted, GetTask::PassFinished { current_pass: 1 }));
        // A stale finish still gets the next task.
        let (ack, next) = dq.finish_and_get_task(t.id, t.epoch, 1, 20).unwrap();
        assert_eq!(ack, Ack::Stale);
        assert_eq!(task(next).pass, 1);
    }

    #[test]
    fn reopening_extends_deadlines_of_pending_tasks() {
        let dir = TestDir::new("durable-resume");
        let dq = open(&dir, 0);
        dq.set_dataset(chunks(2), 1).unwrap();
        let _ = task(dq.get_task(0, 0).unwrap());
        let timeout = dq.read(Queue::timeout_ms).unwrap();
        drop(dq);
        // The master was down far longer than the timeout.
        let later = 10 * timeout;
        let dq = open(&dir, later);
        assert!(dq.tick(later).unwrap().is_empty(), "downtime does not count against trainers");
        assert_eq!(dq.tick(later + timeout).unwrap().len(), 1);
    }

    #[test]
    fn an_operation_hiding_its_changes_breaks_the_queue() {
        let dir = TestDir::new("durable-hide");
        let dq = open(&dir, 0);
        dq.set_dataset(chunks(2), 1).unwrap();
        let err = dq
            .run(|q| {
                let _ = q.get_task(0, 0)?; // changes dropped
                Ok(Output { reply: (), changes: Vec::new() })
            })
            .unwrap_err();
        assert!(matches!(err, Error::StoreFailed(_)), "{err}");
        assert!(matches!(dq.get_task(0, 0), Err(Error::StoreFailed(_))));
    }

    #[test]
    fn errors_before_any_change_leave_the_queue_usable() {
        let dir = TestDir::new("durable-err");
        let dq = open(&dir, 0);
        assert!(matches!(dq.get_task(0, 0), Err(Error::InvalidArgument(_))));
        dq.set_dataset(chunks(2), 1).unwrap();
        assert!(matches!(dq.set_dataset(chunks(3), 1), Err(Error::DatasetMismatch(_))));
        assert!(matches!(dq.task_finished(TaskId(9), 1, 0), Err(Error::InvalidArgument(_))));
        let _ = task(dq.get_task(0, 0).unwrap());
    }

    /// Finishes up to `k` tasks of pass 0.
    fn work<S: Store<QueueCodec>>(dq: &DurableQueue<S>, k: u64) {
        for i in 0..k {
            if let GetTask::Task(t) = dq.get_task(0, i).unwrap() {
                assert_eq!(dq.task_finished(t.id, t.epoch, i + 3).unwrap(), Ack::Accepted);
            }
        }
    }

    #[test]
    fn compactions_through_the_queue_reload_to_the_same_state() {
        let dir = TestDir::new("durable-compact");
        let dq = open(&dir, 0);
        dq.set_dataset(chunks(20), 2).unwrap();
        work(&dq, 4);
        dq.compact().unwrap();
        work(&dq, 3);
        dq.compact().unwrap();
        work(&dq, 2);
        assert_eq!(dq.store().stats().compactions, 2);
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        let (snapshot, changes) = FileStore::<QueueCodec>::open(dir.path()).unwrap().load().unwrap();
        assert!(snapshot.is_some());
        assert_eq!(Queue::restore(QueueSettings::default(), snapshot, changes).unwrap().snapshot(), live);
        // Restarting through DurableQueue works too and keeps going.
        let dq = open(&dir, 100);
        assert_eq!(dq.read(|q| q.counts().done).unwrap(), 9);
        work(&dq, 1);
    }

    #[test]
    fn concurrent_calls_from_8_threads_share_fsyncs_and_reload_to_the_same_state() {
        let dir = TestDir::new("durable-threads");
        let dq = Arc::new(open(&dir, 0));
        let n = 200;
        dq.set_dataset(chunks(n), 1).unwrap();
        let done: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|w| {
                    let dq = Arc::clone(&dq);
                    s.spawn(move || {
                        let mut mine = 0;
                        loop {
                            match dq.get_task(0, w).unwrap() {
                                GetTask::Task(t) => {
                                    assert_eq!(dq.task_finished(t.id, t.epoch, w + 1).unwrap(), Ack::Accepted);
                                    mine += 1;
                                }
                                GetTask::NoMoreTasksNow => std::thread::yield_now(),
                                GetTask::PassFinished { .. } => return mine,
                                other => panic!("{other:?}"),
                            }
                        }
                    })
                })
                .collect();
            workers.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(done, n as usize, "each task finished once");
        let stats = dq.store().stats();
        assert!(stats.syncs < stats.submits, "group commit shared fsyncs: {stats:?}");
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        assert_eq!(open(&dir, 0).read(Queue::snapshot).unwrap().pass(), live.pass());
        let (snapshot, changes) = FileStore::<QueueCodec>::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(Queue::restore(QueueSettings::default(), snapshot, changes).unwrap().snapshot(), live);
    }

    #[test]
    fn the_snapshot_on_every_change_store_replays_the_queue() {
        let dir = TestDir::new("durable-secs");
        let store = SnapshotEveryChangeStore::<QueueCodec>::open(dir.path(), 1).unwrap();
        let dq = DurableQueue::open(QueueSettings::default(), store, 0).unwrap();
        dq.set_dataset(chunks(6), 2).unwrap();
        work(&dq, 2);
        let _ = task(dq.get_task(0, 6).unwrap());
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        let store = SnapshotEveryChangeStore::<QueueCodec>::open(dir.path(), 1).unwrap();
        assert_eq!(store.load().unwrap(), (Some(live), Vec::new()));
    }
}

//! [`SnapshotEveryChangeStore`]: the seed design, kept as a baseline for benchmarks.
//!
//! PaddlePaddle's master serializes the whole task queue, gzips it and writes it to etcd
//! synchronously every time the queue changes. This store does the same against a local
//! directory: it keeps a replica of the queue, applies each batch of changes to it, and
//! writes the full snapshot atomically (temporary file, fsync, rename, directory fsync)
//! before [`submit`](Store::submit) returns. Its cost per change grows with the dataset.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fsutil::{lock, read_snapshot, remove_stale_tmp, write_snapshot};
use super::{Store, Ticket};
use crate::error::{Error, Result};
use crate::master::{Change, Queue, QueueSettings, Snapshot};

/// A store that rewrites the whole queue snapshot on every change (the seed's design).
pub struct SnapshotEveryChangeStore {
    dir: PathBuf,
    level: u32,
    replica: Mutex<Replica>,
}

struct Replica {
    queue: Queue,
    failed: Option<String>,
}

impl SnapshotEveryChangeStore {
    /// Opens (or creates) the store in `dir`; snapshots are gzipped at `level` (0-9; the
    /// seed used Go's default, 6).
    pub fn open(dir: impl AsRef<Path>, level: u32) -> Result<SnapshotEveryChangeStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        remove_stale_tmp(&dir)?;
        // The replica only applies changes, which never consult the settings.
        let queue = Queue::restore(QueueSettings::default(), read_snapshot(&dir)?, [])?;
        Ok(SnapshotEveryChangeStore { dir, level, replica: Mutex::new(Replica { queue, failed: None }) })
    }
}

impl Store for SnapshotEveryChangeStore {
    /// True: every submit writes the whole snapshot.
    fn submit_blocks(&self) -> bool {
        true
    }

    fn submit(&self, changes: &[Change]) -> Result<Ticket> {
        let mut r = lock(&self.replica);
        if let Some(why) = &r.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        if changes.is_empty() {
            return Ok(Ticket(r.queue.seq()));
        }
        let result = changes
            .iter()
            .try_for_each(|c| r.queue.apply(c))
            .and_then(|()| write_snapshot(&self.dir, &r.queue.snapshot(), self.level));
        match result {
            Ok(()) => Ok(Ticket(r.queue.seq())),
            Err(e) => {
                // The replica or the disk may now lag the caller's queue: refuse further work.
                r.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn wait_durable(&self, _ticket: Ticket) -> Result<()> {
        // `submit` wrote synchronously.
        match &lock(&self.replica).failed {
            Some(why) => Err(Error::StoreFailed(why.clone())),
            None => Ok(()),
        }
    }

    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)> {
        Ok((read_snapshot(&self.dir)?, Vec::new()))
    }

    fn compact(&self, _snapshot: &Snapshot) -> Result<()> {
        // Every change already rewrote the snapshot.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::{ChunkRef, DurableQueue, GetTask};
    use crate::store::testdir::TestDir;

    fn chunks(n: u64) -> Vec<ChunkRef> {
        (0..n).map(|i| ChunkRef { path: "/d/a.rio".into(), index: i, offset: i * 10, len: 10, records: 2 }).collect()
    }

    #[test]
    fn every_change_is_in_the_snapshot_and_reloads() {
        let dir = TestDir::new("secs");
        let dq =
            DurableQueue::open(QueueSettings::default(), SnapshotEveryChangeStore::open(dir.path(), 6).unwrap(), 0)
                .unwrap();
        dq.set_dataset(chunks(6), 2).unwrap();
        let GetTask::Task(t) = dq.get_task(0, 0).unwrap() else { panic!("no task") };
        dq.task_finished(t.id, t.epoch, 5).unwrap();
        let _ = dq.get_task(0, 6).unwrap();
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        let store = SnapshotEveryChangeStore::open(dir.path(), 6).unwrap();
        let (snapshot, changes) = store.load().unwrap();
        assert!(changes.is_empty());
        assert_eq!(snapshot.as_ref(), Some(&live));
        let q = Queue::restore(QueueSettings::default(), snapshot, changes).unwrap();
        assert_eq!(q.snapshot(), live);
        // It keeps accepting changes after a restart.
        let dq = DurableQueue::open(QueueSettings::default(), store, 10).unwrap();
        assert!(matches!(dq.get_task(0, 10).unwrap(), GetTask::Task(_)));
    }

    #[test]
    fn a_change_that_does_not_fit_makes_it_refuse_further_work() {
        let dir = TestDir::new("secs-bad");
        let store = SnapshotEveryChangeStore::open(dir.path(), 1).unwrap();
        let mut q = Queue::new(QueueSettings::default()).unwrap();
        let out = q.set_dataset(chunks(2), 1).unwrap();
        let mut wrong = out.changes.clone();
        wrong[0].seq = 5;
        assert!(matches!(store.submit(&wrong), Err(Error::InvalidChange { .. })));
        assert!(matches!(store.submit(&out.changes), Err(Error::StoreFailed(_))));
    }
}

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
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        remove_stale_tmp(&dir)?;
        // The replica only applies changes, which never consult the settings.
        let queue = Queue::restore(QueueSettings::default(), read_snapshot(&dir)?, [])?;
        Ok(SnapshotEveryChangeStore {
            dir,
            level,
            replica: Mutex::new(Replica {
                queue,
                failed: None,
            }),
        })
    }
}

impl Store for SnapshotEveryChangeStore {
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

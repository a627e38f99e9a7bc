//! [`SnapshotEveryChangeStore`]: the seed design, kept as a baseline for benchmarks.
//!
//! PaddlePaddle's master serializes the whole task queue, gzips it and writes it to etcd
//! synchronously every time the queue changes. This store does the same against a local
//! directory: it keeps a replica of the service's state ([`Replay`]), applies each batch of
//! records to it, and writes the full snapshot atomically (temporary file, fsync, rename,
//! directory fsync) before [`submit`](Store::submit) returns. Its cost per record grows with
//! the state.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fsutil::{claim_format, lock, read_snapshot, remove_stale_tmp, write_snapshot};
use super::{Loaded, Replay, Store, Ticket};
use warren_base::error::{Error, Result};

/// A store that rewrites the whole snapshot on every submit (the seed's design).
pub struct SnapshotEveryChangeStore<C: Replay> {
    dir: PathBuf,
    level: u32,
    replica: Mutex<Replica<C>>,
}

struct Replica<C: Replay> {
    state: C::State,
    /// Sequence number of the last record applied to `state`.
    seq: u64,
    failed: Option<String>,
}

impl<C: Replay> SnapshotEveryChangeStore<C> {
    /// Opens (or creates) the store in `dir`; snapshots are gzipped at `level` (0-9; the
    /// seed used Go's default, 6).
    pub fn open(dir: impl AsRef<Path>, level: u32) -> Result<SnapshotEveryChangeStore<C>> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        remove_stale_tmp(&dir)?;
        claim_format::<C>(&dir)?;
        let snapshot = read_snapshot::<C>(&dir)?;
        let seq = snapshot.as_ref().map_or(0, C::snapshot_seq);
        let state = C::restore(snapshot)?;
        Ok(SnapshotEveryChangeStore { dir, level, replica: Mutex::new(Replica { state, seq, failed: None }) })
    }
}

impl<C: Replay> Store<C> for SnapshotEveryChangeStore<C> {
    /// True: every submit writes the whole snapshot.
    fn submit_blocks(&self) -> bool {
        true
    }

    fn submit(&self, records: &[C::Record]) -> Result<Ticket> {
        let mut guard = lock(&self.replica);
        let r = &mut *guard;
        if let Some(why) = &r.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        if records.is_empty() {
            return Ok(Ticket(r.seq));
        }
        let result = records
            .iter()
            .try_for_each(|record| {
                C::apply(&mut r.state, record)?;
                r.seq = C::seq(record);
                Ok(())
            })
            .and_then(|()| write_snapshot::<C>(&self.dir, &C::snapshot(&r.state), self.level));
        match result {
            Ok(()) => Ok(Ticket(r.seq)),
            Err(e) => {
                // The replica or the disk may now lag the caller's state: refuse further work.
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

    fn load(&self) -> Result<Loaded<C>> {
        Ok((read_snapshot::<C>(&self.dir)?, Vec::new()))
    }

    fn compact(&self, _snapshot: &C::Snapshot) -> Result<()> {
        // Every submit already rewrote the snapshot.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;
    use crate::testkit::{Counter, Kv, puts, replay};

    #[test]
    fn every_submit_is_in_the_snapshot_and_reloads() {
        let dir = TestDir::new("secs");
        let store = SnapshotEveryChangeStore::<Kv>::open(dir.path(), 6).unwrap();
        let all = puts(1, 7);
        store.append(&all[..3]).unwrap();
        store.append(&all[3..4]).unwrap();
        store.append(&all[4..]).unwrap();
        drop(store);
        let store = SnapshotEveryChangeStore::<Kv>::open(dir.path(), 6).unwrap();
        let (snapshot, records) = store.load().unwrap();
        assert!(records.is_empty());
        assert_eq!(snapshot, Some(replay(None, &all)));
        // It keeps accepting records after a restart.
        store.append(&puts(8, 1)).unwrap();
        assert_eq!(store.load().unwrap().0, Some(replay(None, &puts(1, 8))));
        drop(store);
        assert!(matches!(crate::FileStore::<Counter>::open(dir.path()), Err(Error::Config(_))));
    }

    #[test]
    fn a_record_that_does_not_fit_makes_it_refuse_further_work() {
        let dir = TestDir::new("secs-bad");
        let store = SnapshotEveryChangeStore::<Kv>::open(dir.path(), 1).unwrap();
        assert!(matches!(store.submit(&puts(5, 1)), Err(Error::InvalidChange { .. })));
        assert!(matches!(store.submit(&puts(1, 1)), Err(Error::StoreFailed(_))));
    }
}

//! [`FileStore`]: the embedded store, a directory with a write-ahead log and a snapshot.
//!
//! Layout of the directory:
//!
//! - `wal-<seq>.log`: log segments (format in `wal.rs`);
//! - `snapshot.json.gz`: the latest compacted snapshot (gzip-compressed JSON);
//! - `snapshot.json.gz.tmp`: a snapshot being written (removed at open).
//!
//! **Group commit.** [`submit`](Store::submit) encodes the changes and appends them to an
//! in-memory buffer (under a short lock). [`wait_durable`](Store::wait_durable) makes the
//! first waiting thread the *leader*: it takes the whole buffer, writes it with one
//! `write`, and calls `fdatasync` once; threads arriving meanwhile wait on a condition
//! variable, and the next leader takes everything they submitted in one go. Under load,
//! one fsync covers the changes of many threads.
//!
//! **Compaction.** [`compact`](Store::compact) writes the snapshot atomically (temporary
//! file, fsync, rename, directory fsync), starts a new log segment, and deletes the
//! segments whose changes the snapshot covers.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use super::fsutil::{fsync_dir, lock, read_snapshot, remove_stale_tmp, write_snapshot};
use super::wal::{self, encode_record, list_segments, segment_name};
use super::{Store, Ticket};
use crate::error::{Error, Result};
use crate::master::{Change, Snapshot};

/// Tunables of a [`FileStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStoreOptions {
    /// [`wants_compaction`](Store::wants_compaction) turns true once this many log bytes
    /// were written since the last compaction. Default 64 MiB.
    pub compact_after_bytes: u64,
    /// gzip level of snapshots, 0 (none) to 9 (best). Default 1: snapshots are written
    /// while the master serves, so speed matters more than size.
    pub snapshot_level: u32,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        FileStoreOptions {
            compact_after_bytes: 64 << 20,
            snapshot_level: 1,
        }
    }
}

/// Counters of a [`FileStore`] since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStoreStats {
    /// Non-empty [`submit`](Store::submit) calls (= log records).
    pub records: u64,
    /// Changes submitted.
    pub changes: u64,
    /// Log writes, each followed by one fsync (group commits).
    pub syncs: u64,
    /// Log bytes written.
    pub bytes: u64,
    /// Compactions done.
    pub compactions: u64,
}

/// The group-commit state.
struct Commit {
    /// Encoded records submitted but not yet taken by a leader.
    buf: Vec<u8>,
    /// Sequence number of the last change submitted.
    submitted: u64,
    /// Sequence number up to which everything is durable.
    durable: u64,
    /// Whether a leader is writing right now.
    flushing: bool,
    /// Set when a write failed: the store refuses all later work.
    failed: Option<String>,
    /// Log bytes submitted since the last compaction.
    bytes_since_compaction: u64,
}

/// The segment being appended to.
struct Segment {
    file: File,
    path: PathBuf,
    /// Bytes in the file.
    len: u64,
    /// Highest sequence number written to the log (or covered by the snapshot) so far.
    written: u64,
}

/// What a directory holds, as read at open or load.
struct Recovered {
    snapshot: Option<Snapshot>,
    changes: Vec<Change>,
    /// Highest sequence number found in the log or snapshot.
    last_seq: u64,
    /// The last segment, its valid length and, if its tail was torn, why.
    last_segment: Option<(PathBuf, u64, Option<String>)>,
}

/// The embedded durable store: write-ahead log with group commit plus compacted
/// snapshots, in one directory. See the [module documentation](self).
pub struct FileStore {
    dir: PathBuf,
    options: FileStoreOptions,
    commit: Mutex<Commit>,
    committed: Condvar,
    segment: Mutex<Segment>,
    /// Sequence number of the snapshot on disk (serializes compactions).
    snapshot_seq: Mutex<u64>,
    records: AtomicU64,
    changes: AtomicU64,
    syncs: AtomicU64,
    bytes: AtomicU64,
    compactions: AtomicU64,
}

impl FileStore {
    /// Opens (or creates) the store in `dir` with default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore> {
        FileStore::open_with(dir, FileStoreOptions::default())
    }

    /// Opens (or creates) the store in `dir`. A torn tail left by a crash is cut off here
    /// (and logged); damage anywhere else is [`Error::StoreCorrupt`].
    pub fn open_with(dir: impl AsRef<Path>, options: FileStoreOptions) -> Result<FileStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        remove_stale_tmp(&dir)?;
        let rec = recover(&dir)?;
        let snapshot_seq = rec.snapshot.as_ref().map_or(0, Snapshot::seq);
        let (file, path, len) = match rec.last_segment {
            Some((path, valid_len, torn)) => {
                let file = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
                if let Some(reason) = torn {
                    log::warn!(
                        "store {}: discarding the torn tail of {} from byte {valid_len} ({reason}); \
                         it held changes that were never acknowledged",
                        dir.display(),
                        path.display()
                    );
                    file.set_len(valid_len)
                        .and_then(|()| file.sync_all())
                        .map_err(|e| Error::io(format!("truncating {}", path.display()), e))?;
                }
                (file, path, valid_len)
            }
            None => {
                let (file, path) = create_segment(&dir, rec.last_seq + 1)?;
                (file, path, 0)
            }
        };
        Ok(FileStore {
            dir,
            options,
            commit: Mutex::new(Commit {
                buf: Vec::new(),
                submitted: rec.last_seq,
                durable: rec.last_seq,
                flushing: false,
                failed: None,
                bytes_since_compaction: len,
            }),
            committed: Condvar::new(),
            segment: Mutex::new(Segment {
                file,
                path,
                len,
                written: rec.last_seq,
            }),
            snapshot_seq: Mutex::new(snapshot_seq),
            records: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Counters since open.
    pub fn stats(&self) -> FileStoreStats {
        FileStoreStats {
            records: self.records.load(Ordering::Relaxed),
            changes: self.changes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            compactions: self.compactions.load(Ordering::Relaxed),
        }
    }

    /// Writes `buf` (records up to change `upto`) to the log and fsyncs it.
    fn write_batch(&self, buf: &[u8], upto: u64) -> Result<()> {
        let mut seg = lock(&self.segment);
        let path = seg.path.clone();
        seg.file
            .write_all(buf)
            .and_then(|()| seg.file.sync_data())
            .map_err(|e| Error::io(format!("appending to {}", path.display()), e))?;
        seg.len += buf.len() as u64;
        seg.written = upto;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

impl Store for FileStore {
    fn submit(&self, changes: &[Change]) -> Result<Ticket> {
        let mut record = Vec::new();
        if !changes.is_empty() {
            encode_record(changes, &mut record)?;
        }
        let mut c = lock(&self.commit);
        if let Some(why) = &c.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        for (expected, change) in (c.submitted + 1..).zip(changes) {
            if change.seq != expected {
                return Err(Error::InvalidArgument(format!(
                    "store {}: change {} submitted where change {expected} was expected",
                    self.dir.display(),
                    change.seq
                )));
            }
        }
        if let Some(last) = changes.last() {
            c.submitted = last.seq;
            c.buf.extend_from_slice(&record);
            c.bytes_since_compaction += record.len() as u64;
            self.records.fetch_add(1, Ordering::Relaxed);
            self.changes
                .fetch_add(changes.len() as u64, Ordering::Relaxed);
        }
        Ok(Ticket(c.submitted))
    }

    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        let mut c = lock(&self.commit);
        loop {
            if c.durable >= ticket.0 {
                return Ok(());
            }
            if let Some(why) = &c.failed {
                return Err(Error::StoreFailed(why.clone()));
            }
            if c.flushing {
                c = self
                    .committed
                    .wait(c)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // Become the leader: write everything submitted so far with one fsync.
            c.flushing = true;
            let buf = std::mem::take(&mut c.buf);
            let upto = c.submitted;
            drop(c);
            let result = self.write_batch(&buf, upto);
            c = lock(&self.commit);
            c.flushing = false;
            if c.buf.is_empty() && c.buf.capacity() < buf.capacity() {
                // Reuse the allocation for the next batch.
                let mut buf = buf;
                buf.clear();
                c.buf = buf;
            }
            match result {
                Ok(()) => c.durable = upto,
                Err(e) => {
                    c.failed = Some(e.to_string());
                    self.committed.notify_all();
                    return Err(e);
                }
            }
            self.committed.notify_all();
        }
    }

    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)> {
        // Hold the segment so no leader writes while we read.
        let _seg = lock(&self.segment);
        let rec = recover(&self.dir)?;
        Ok((rec.snapshot, rec.changes))
    }

    fn compact(&self, snapshot: &Snapshot) -> Result<()> {
        let mut on_disk = lock(&self.snapshot_seq);
        let seq = snapshot.seq();
        {
            let c = lock(&self.commit);
            if let Some(why) = &c.failed {
                return Err(Error::StoreFailed(why.clone()));
            }
            if seq > c.submitted {
                return Err(Error::InvalidArgument(format!(
                    "snapshot at change {seq} is ahead of the log (last change submitted: {})",
                    c.submitted
                )));
            }
        }
        if seq < *on_disk {
            return Err(Error::InvalidArgument(format!(
                "snapshot at change {seq} is older than the stored one (change {})",
                *on_disk
            )));
        }
        write_snapshot(&self.dir, snapshot, self.options.snapshot_level)?;
        *on_disk = seq;

        let mut seg = lock(&self.segment);
        if seg.len > 0 {
            // Every record written so far is at most `seg.written`; newer ones go to the
            // new segment, so its name bounds both.
            let (file, path) = create_segment(&self.dir, seg.written + 1)?;
            *seg = Segment {
                file,
                path,
                len: 0,
                written: seg.written,
            };
        }
        let segments = list_segments(&self.dir)?;
        let mut removed = 0;
        for pair in segments.windows(2) {
            let ((_, older), (next_first, _)) = (&pair[0], &pair[1]);
            if *older != seg.path && next_first - 1 <= seq {
                fs::remove_file(older)
                    .map_err(|e| Error::io(format!("removing {}", older.display()), e))?;
                removed += 1;
            }
        }
        drop(seg);
        if removed > 0 {
            fsync_dir(&self.dir)?;
        }
        lock(&self.commit).bytes_since_compaction = 0;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        log::info!(
            "store {}: compacted at change {seq}, removed {removed} log segments",
            self.dir.display()
        );
        Ok(())
    }

    fn wants_compaction(&self) -> bool {
        lock(&self.commit).bytes_since_compaction >= self.options.compact_after_bytes
    }
}

/// Creates an empty segment named for `first_seq` and makes its directory entry durable.
fn create_segment(dir: &Path, first_seq: u64) -> Result<(File, PathBuf)> {
    let path = dir.join(segment_name(first_seq));
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    fsync_dir(dir)?;
    Ok((file, path))
}

/// Reads the snapshot and every segment of `dir`, checking that the change numbers
/// follow each other. A torn tail of the last segment is reported, not an error.
fn recover(dir: &Path) -> Result<Recovered> {
    let snapshot = read_snapshot(dir)?;
    let snapshot_seq = snapshot.as_ref().map_or(0, Snapshot::seq);
    let segments = list_segments(dir)?;
    let mut changes = Vec::new();
    let mut prev: Option<u64> = None;
    let mut last_segment = None;
    for (i, (_, path)) in segments.iter().enumerate() {
        let data =
            fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let scan = wal::scan(path, &data, i + 1 == segments.len())?;
        for record in scan.records {
            for change in record.changes {
                // Change numbers grow by one; a gap is allowed only where the snapshot
                // covers it (a snapshot can be ahead of a log whose tail was torn).
                let covered = prev.unwrap_or(0).max(snapshot_seq);
                if prev.is_some_and(|p| change.seq <= p) || change.seq > covered + 1 {
                    return Err(Error::StoreCorrupt {
                        path: path.clone(),
                        offset: record.offset,
                        reason: format!(
                            "change {} follows change {} (snapshot at change {snapshot_seq})",
                            change.seq,
                            prev.unwrap_or(0)
                        ),
                    });
                }
                prev = Some(change.seq);
                if change.seq > snapshot_seq {
                    changes.push(change);
                }
            }
        }
        last_segment = Some((path.clone(), scan.valid_len, scan.torn));
    }
    Ok(Recovered {
        snapshot,
        changes,
        last_seq: prev.unwrap_or(0).max(snapshot_seq),
        last_segment,
    })
}

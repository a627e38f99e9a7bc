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
use std::io::{Seek, SeekFrom, Write};
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
    /// Log segments are extended with zeros this many bytes ahead of the write position,
    /// so that appending does not change the file size and an fsync needs no file-system
    /// journal commit (several times faster on ext4). 0 disables it. Default 16 MiB.
    pub preallocate_bytes: u64,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        FileStoreOptions { compact_after_bytes: 64 << 20, snapshot_level: 1, preallocate_bytes: 16 << 20 }
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
    /// End of the valid records: where the next record goes.
    len: u64,
    /// Size of the file (valid records, then zeros).
    allocated: u64,
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

/// The embedded durable store: a write-ahead log with group commit plus compacted
/// snapshots, in one directory.
///
/// Layout: log segments `wal-<first seq>.log` (records of length + CRC-32, see below),
/// the snapshot `snapshot.json.gz`, and `snapshot.json.gz.tmp` while one is written.
///
/// - **Group commit.** [`submit`](Store::submit) encodes the changes into an in-memory
///   buffer; the first thread to [`wait_durable`](Store::wait_durable) becomes the leader,
///   writes the whole buffer with one `write` and one `fdatasync`, then wakes the others;
///   whatever was submitted meanwhile goes out with the next leader's single fsync.
/// - **Crash safety.** Each record is `len | crc32(payload) | crc32(header) | payload`
///   and holds all changes of one `submit`. At open, a torn record at the end of the last
///   segment (a write interrupted by a crash, never acknowledged) is cut off; damage
///   anywhere else is [`Error::StoreCorrupt`] naming the file and byte offset.
/// - **Compaction.** [`compact`](Store::compact) writes the snapshot to a temporary file,
///   fsyncs it, renames it over the old one, fsyncs the directory, starts a new segment,
///   and deletes the segments the snapshot covers.
pub struct FileStore {
    dir: PathBuf,
    /// `dir/LOCK`, held with an exclusive `flock` while the store is open, so that two
    /// masters never write the same directory (released by the kernel if we die).
    _lock: File,
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

/// Takes the exclusive lock of a store directory, failing at once if it is held.
fn lock_dir(dir: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(Error::io(
            format!("locking store directory {} (is another master using it?)", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(file)
}

impl FileStore {
    /// Opens (or creates) the store in `dir` with default options. Fails if another
    /// `FileStore` (in any process) has the directory open.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore> {
        FileStore::open_with(dir, FileStoreOptions::default())
    }

    /// Opens (or creates) the store in `dir`. A torn tail left by a crash is cut off here
    /// (and logged); damage anywhere else is [`Error::StoreCorrupt`].
    pub fn open_with(dir: impl AsRef<Path>, options: FileStoreOptions) -> Result<FileStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock_file = lock_dir(&dir)?;
        remove_stale_tmp(&dir)?;
        let rec = recover(&dir)?;
        let snapshot_seq = rec.snapshot.as_ref().map_or(0, Snapshot::seq);
        let (file, path, len) = match rec.last_segment {
            Some((path, valid_len, torn)) => {
                let file = OpenOptions::new()
                    .write(true)
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
        let allocated =
            file.metadata().map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?.len();
        Ok(FileStore {
            dir,
            _lock: lock_file,
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
            segment: Mutex::new(Segment { file, path, len, allocated, written: rec.last_seq }),
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

    /// Writes `buf` (records up to change `upto`) to the log and fsyncs it, first
    /// extending the segment with zeros if the records would not fit.
    fn write_batch(&self, buf: &[u8], upto: u64) -> Result<()> {
        let mut guard = lock(&self.segment);
        let seg = &mut *guard;
        let end = seg.len + buf.len() as u64;
        let prealloc = self.options.preallocate_bytes;
        let result = (|| {
            if end > seg.allocated && prealloc > 0 {
                // One slow fsync (the file size changes) per `prealloc` bytes of log.
                let target = end + prealloc;
                let from = seg.allocated.max(end);
                seg.file.seek(SeekFrom::Start(from))?;
                let zeros = vec![0u8; (1 << 20).min(target - from) as usize];
                let mut at = from;
                while at < target {
                    let n = zeros.len().min((target - at) as usize);
                    seg.file.write_all(&zeros[..n])?;
                    at += n as u64;
                }
                seg.allocated = target;
            }
            seg.file.seek(SeekFrom::Start(seg.len))?;
            seg.file.write_all(buf)?;
            seg.file.sync_data()
        })();
        result.map_err(|e| Error::io(format!("appending to {}", seg.path.display()), e))?;
        seg.len = end;
        seg.allocated = seg.allocated.max(end);
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
            self.changes.fetch_add(changes.len() as u64, Ordering::Relaxed);
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
                c = self.committed.wait(c).unwrap_or_else(std::sync::PoisonError::into_inner);
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
        // Stop asking for compactions while this one runs.
        lock(&self.commit).bytes_since_compaction = 0;
        write_snapshot(&self.dir, snapshot, self.options.snapshot_level)?;
        *on_disk = seq;

        let mut seg = lock(&self.segment);
        if seg.len > 0 {
            // Every record written so far is at most `seg.written`; newer ones go to the
            // new segment, so its name bounds both.
            let (file, path) = create_segment(&self.dir, seg.written + 1)?;
            *seg = Segment { file, path, len: 0, allocated: 0, written: seg.written };
        }
        let segments = list_segments(&self.dir)?;
        let mut removed = 0;
        for pair in segments.windows(2) {
            let ((_, older), (next_first, _)) = (&pair[0], &pair[1]);
            if *older != seg.path && next_first - 1 <= seq {
                fs::remove_file(older).map_err(|e| Error::io(format!("removing {}", older.display()), e))?;
                removed += 1;
            }
        }
        drop(seg);
        if removed > 0 {
            fsync_dir(&self.dir)?;
        }
        self.compactions.fetch_add(1, Ordering::Relaxed);
        log::info!("store {}: compacted at change {seq}, removed {removed} log segments", self.dir.display());
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
        .truncate(false)
        .write(true)
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
        let data = fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
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
    Ok(Recovered { snapshot, changes, last_seq: prev.unwrap_or(0).max(snapshot_seq), last_segment })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_directory_is_used_by_one_store_at_a_time() {
        let dir = TestDir::new("file-lock");
        let first = FileStore::open(dir.path()).unwrap();
        let err = FileStore::open(dir.path()).err().expect("the directory is locked");
        assert!(err.to_string().contains("another master"), "{err}");
        drop(first);
        FileStore::open(dir.path()).unwrap();
    }
    use crate::master::{Ack, ChunkRef, DurableQueue, GetTask, Queue, QueueSettings, TaskId};
    use crate::store::testdir::TestDir;

    fn chunks(n: u64) -> Vec<ChunkRef> {
        (0..n)
            .map(|i| ChunkRef { path: format!("/data/f{}.rio", i / 4), index: i % 4, offset: 0, len: 10, records: 1 })
            .collect()
    }

    /// Small preallocation steps, so that tests extend segments often.
    fn opts() -> FileStoreOptions {
        FileStoreOptions { preallocate_bytes: 512, ..FileStoreOptions::default() }
    }

    fn settings() -> QueueSettings {
        QueueSettings { max_failures: 1, ..QueueSettings::default() }
    }

    /// Runs `op` on `q` and appends its changes to `store`.
    fn step<R>(q: &mut Queue, store: &dyn Store, op: impl FnOnce(&mut Queue) -> Result<crate::master::Output<R>>) -> R {
        let out = op(q).unwrap();
        store.append(&out.changes).unwrap();
        out.reply
    }

    /// A store holding a dataset of `n` tasks and `rounds` get + finish/fail operations;
    /// returns the queue after every operation (index 0: after set_dataset).
    fn build(dir: &Path, n: u64, rounds: usize) -> Vec<Queue> {
        let store = FileStore::open_with(dir, opts()).unwrap();
        let mut q = Queue::new(settings()).unwrap();
        step(&mut q, &store, |q| q.set_dataset(chunks(n), 1));
        let mut states = vec![q.clone()];
        for i in 0..rounds {
            let pass = q.pass();
            match step(&mut q, &store, |q| q.get_task(pass, i as u64)) {
                GetTask::Task(t) if i % 5 == 3 => {
                    step(&mut q, &store, |q| q.task_failed(t.id, t.epoch, "flaky"));
                }
                GetTask::Task(t) => {
                    step(&mut q, &store, |q| q.task_finished(t.id, t.epoch, i as u64 + 7));
                }
                other => panic!("{other:?}"),
            }
            states.push(q.clone());
        }
        states
    }

    fn reload(dir: &Path) -> Result<Queue> {
        let store = FileStore::open_with(dir, opts())?;
        let (snapshot, changes) = store.load()?;
        Queue::restore(settings(), snapshot, changes)
    }

    fn copy_dir(from: &Path, to: &Path) {
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }

    fn only_segment(dir: &Path) -> PathBuf {
        let segs = list_segments(dir).unwrap();
        assert_eq!(segs.len(), 1, "{segs:?}");
        segs[0].1.clone()
    }

    #[test]
    fn appended_changes_reload_to_the_same_state() {
        let dir = TestDir::new("reload");
        let states = build(dir.path(), 10, 30);
        let q = reload(dir.path()).unwrap();
        assert_eq!(q.snapshot(), states.last().unwrap().snapshot());
        assert!(q.pass() >= 1, "30 rounds over 10 tasks end a pass");
    }

    #[test]
    fn torn_tail_at_every_byte_of_the_last_record_is_discarded() {
        let dir = TestDir::new("torn-src");
        let states = build(dir.path(), 5, 6);
        let seg = only_segment(dir.path());
        let full = fs::read(&seg).unwrap();
        let scan = wal::scan(&seg, &full, true).unwrap();
        let last = scan.records.last().unwrap().offset as usize;
        let before_last = &states[states.len() - 1];
        // The state before the last record: replay everything but it.
        let all: Vec<Change> = scan.records.iter().flat_map(|r| r.changes.clone()).collect();
        let n_last = scan.records.last().unwrap().changes.len();
        let expected = Queue::restore(settings(), None, all[..all.len() - n_last].to_vec()).unwrap();
        assert_ne!(expected.snapshot(), before_last.snapshot());

        let end = scan.valid_len as usize;
        assert!(full[end..].iter().all(|b| *b == 0), "preallocated zeros follow");
        for cut in last..end {
            // A crash either left the file short (truncated) or left the unwritten part of
            // the record as the preallocated zeros it was (zeroed).
            for zeroed in [false, true] {
                let d = TestDir::new("torn");
                copy_dir(dir.path(), d.path());
                let seg = only_segment(d.path());
                if zeroed {
                    let mut data = full.clone();
                    data[cut..].fill(0);
                    fs::write(&seg, &data).unwrap();
                } else {
                    let f = OpenOptions::new().write(true).open(&seg).unwrap();
                    f.set_len(cut as u64).unwrap();
                }
                let what = format!("cut at {cut}, zeroed {zeroed}");
                let q = reload(d.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(q.snapshot(), expected.snapshot(), "{what}");
                // The torn bytes were removed at open: the store keeps working after them.
                let store = FileStore::open_with(d.path(), opts()).unwrap();
                let mut q = q;
                let pass = q.pass();
                step(&mut q, &store, |q| q.get_task(pass, 1000));
                step(&mut q, &store, |q| q.get_task(pass, 1001));
                drop(store);
                assert_eq!(reload(d.path()).unwrap().snapshot(), q.snapshot(), "{what}");
            }
        }
        // Uncut, the last record is there.
        assert_eq!(reload(dir.path()).unwrap().snapshot(), before_last.snapshot());
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_naming_file_and_offset() {
        let dir = TestDir::new("corrupt");
        build(dir.path(), 5, 6);
        let seg = only_segment(dir.path());
        let mut data = fs::read(&seg).unwrap();
        let scan = wal::scan(&seg, &data, true).unwrap();
        let victim = scan.records[2].offset as usize;
        data[victim + wal::HEADER_LEN + 5] ^= 0x20;
        fs::write(&seg, &data).unwrap();
        let err = match FileStore::open_with(dir.path(), opts()) {
            Err(e) => e,
            Ok(_) => panic!("a corrupt log opened"),
        };
        match &err {
            Error::StoreCorrupt { path, offset, .. } => {
                assert_eq!(path, &seg);
                assert_eq!(*offset, victim as u64);
            }
            other => panic!("unexpected error: {other}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&seg.display().to_string()) && msg.contains(&victim.to_string()), "{msg}");
        // The file was not touched by the failed open.
        assert_eq!(fs::read(&seg).unwrap(), data);
    }

    #[test]
    fn a_gap_in_the_change_numbers_is_an_error() {
        let dir = TestDir::new("gap");
        build(dir.path(), 5, 3);
        let seg = only_segment(dir.path());
        let data = fs::read(&seg).unwrap();
        let scan = wal::scan(&seg, &data, true).unwrap();
        // Drop record 1 (of several): change numbers jump.
        let (a, b) = (scan.records[1].offset as usize, scan.records[2].offset as usize);
        let mut cut = data[..a].to_vec();
        cut.extend_from_slice(&data[b..]);
        fs::write(&seg, &cut).unwrap();
        let err = FileStore::open_with(dir.path(), opts()).err().expect("gap detected");
        assert!(matches!(err, Error::StoreCorrupt { offset, .. } if offset == a as u64), "{err}");
    }

    #[test]
    fn snapshot_plus_log_reload_to_the_same_state_and_old_segments_go() {
        let dir = TestDir::new("compact");
        let store = FileStore::open_with(dir.path(), opts()).unwrap();
        let dq = DurableQueue::open(settings(), store, 0).unwrap();
        dq.set_dataset(chunks(20), 2).unwrap();
        fn work(dq: &DurableQueue<FileStore>, k: usize) {
            for i in 0..k {
                let pass = dq.read(Queue::pass).unwrap();
                if let GetTask::Task(t) = dq.get_task(pass, i as u64).unwrap() {
                    assert_eq!(dq.task_finished(t.id, t.epoch, i as u64 + 3).unwrap(), Ack::Accepted);
                }
            }
        }
        work(&dq, 7);
        dq.compact().unwrap();
        work(&dq, 5);
        dq.compact().unwrap();
        work(&dq, 4);
        let segs = list_segments(dir.path()).unwrap();
        assert_eq!(segs.len(), 1, "segments covered by the snapshot are deleted: {segs:?}");
        assert_eq!(dq.store().stats().compactions, 2);
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        let q = reload(dir.path()).unwrap();
        assert_eq!(q.snapshot(), live);
        // Restarting through DurableQueue works too and keeps going.
        let dq = DurableQueue::open(settings(), FileStore::open_with(dir.path(), opts()).unwrap(), 100).unwrap();
        assert_eq!(dq.read(Queue::snapshot).unwrap(), live);
        work(&dq, 3);
    }

    #[test]
    fn a_snapshot_ahead_of_a_torn_log_is_fine() {
        // Compaction may store changes that were submitted but not yet synced; if the
        // log then loses them, the snapshot covers the gap.
        let src = TestDir::new("ahead-src");
        let states = build(src.path(), 6, 4);
        let seg = only_segment(src.path());
        let data = fs::read(&seg).unwrap();
        let scan = wal::scan(&seg, &data, true).unwrap();
        let store = FileStore::open_with(src.path(), opts()).unwrap();
        store.compact(&states.last().unwrap().snapshot()).unwrap();
        drop(store);
        // Put back a log that lost all but its first two records.
        for (_, p) in list_segments(src.path()).unwrap() {
            fs::remove_file(p).unwrap();
        }
        fs::write(&seg, &data[..scan.records[2].offset as usize]).unwrap();
        let mut q = reload(src.path()).unwrap();
        assert_eq!(q.snapshot(), states.last().unwrap().snapshot());
        let store = FileStore::open_with(src.path(), opts()).unwrap();
        let pass = q.pass();
        step(&mut q, &store, |q| q.get_task(pass, 50));
        drop(store);
        assert_eq!(reload(src.path()).unwrap().snapshot(), q.snapshot());
    }

    #[test]
    fn compaction_refuses_an_older_snapshot_or_one_ahead_of_the_log() {
        let dir = TestDir::new("refuse");
        let states = build(dir.path(), 4, 2);
        let store = FileStore::open_with(dir.path(), opts()).unwrap();
        store.compact(&states[2].snapshot()).unwrap();
        assert!(matches!(store.compact(&states[1].snapshot()), Err(Error::InvalidArgument(_))));
        let mut ahead = states[2].clone();
        let _ = ahead.get_task(ahead.pass(), 0).unwrap();
        let _ = ahead.get_task(ahead.pass(), 0).unwrap();
        assert!(matches!(store.compact(&ahead.snapshot()), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn submit_checks_change_numbers() {
        let dir = TestDir::new("numbers");
        let states = build(dir.path(), 4, 1);
        let store = FileStore::open_with(dir.path(), opts()).unwrap();
        let mut q = states.last().unwrap().clone();
        let out = q.get_task(q.pass(), 0).unwrap();
        let mut wrong = out.changes.clone();
        wrong[0].seq += 1;
        assert!(matches!(store.submit(&wrong), Err(Error::InvalidArgument(_))));
        store.append(&out.changes).unwrap();
        assert!(matches!(store.submit(&out.changes), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn wants_compaction_after_the_configured_bytes() {
        let dir = TestDir::new("wants");
        let opts = FileStoreOptions { compact_after_bytes: 2000, ..opts() };
        let dq = DurableQueue::open(settings(), FileStore::open_with(dir.path(), opts).unwrap(), 0).unwrap();
        dq.set_dataset(chunks(50), 1).unwrap();
        let mut compacted = 0;
        for i in 0..40 {
            let _ = dq.get_task(0, i).unwrap();
            compacted += usize::from(dq.compact_if_wanted().unwrap());
        }
        assert!(compacted >= 2, "compacted {compacted} times");
        assert!(!dq.store().wants_compaction() || compacted > 0);
    }

    #[test]
    fn concurrent_appends_from_8_threads_are_all_durable_in_one_order() {
        let dir = TestDir::new("threads");
        let n = 400u64;
        let dq =
            Arc::new(DurableQueue::open(settings(), FileStore::open_with(dir.path(), opts()).unwrap(), 0).unwrap());
        dq.set_dataset(chunks(n), 1).unwrap();
        let acked: Vec<Vec<(TaskId, u64)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|w| {
                    let dq = Arc::clone(&dq);
                    s.spawn(move || {
                        let mut mine = Vec::new();
                        loop {
                            match dq.get_task(0, w).unwrap() {
                                GetTask::Task(t) => {
                                    assert_eq!(dq.task_finished(t.id, t.epoch, w + 1).unwrap(), Ack::Accepted);
                                    mine.push((t.id, t.epoch));
                                }
                                GetTask::NoMoreTasksNow => std::thread::yield_now(),
                                GetTask::PassFinished { .. } => return mine,
                                other => panic!("{other:?}"),
                            }
                        }
                    })
                })
                .collect();
            workers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut done: Vec<TaskId> = acked.iter().flatten().map(|(id, _)| *id).collect();
        done.sort();
        assert_eq!(done, (0..n).map(TaskId).collect::<Vec<_>>(), "each task finished once");
        let stats = dq.store().stats();
        assert_eq!(stats.records, 1 + 2 * n, "one record per state-changing call");
        assert!(stats.syncs < stats.records, "group commit shared fsyncs: {stats:?}");
        let live = dq.read(Queue::snapshot).unwrap();
        drop(dq);
        // Everything acknowledged is on disk, in an order that replays to the same state.
        let (_, changes) = FileStore::open_with(dir.path(), opts()).unwrap().load().unwrap();
        assert!(changes.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert_eq!(reload(dir.path()).unwrap().snapshot(), live);
        assert_eq!(live.pass(), 1);
    }

    #[test]
    fn a_leftover_temporary_snapshot_is_ignored_and_removed() {
        let dir = TestDir::new("tmp");
        let states = build(dir.path(), 3, 2);
        fs::write(dir.path().join(super::super::fsutil::SNAPSHOT_TMP), b"half a snapshot").unwrap();
        assert_eq!(reload(dir.path()).unwrap().snapshot(), states.last().unwrap().snapshot());
        assert!(!dir.path().join(super::super::fsutil::SNAPSHOT_TMP).exists());
    }

    #[test]
    fn a_damaged_snapshot_is_an_error() {
        let dir = TestDir::new("badsnap");
        let states = build(dir.path(), 3, 2);
        let store = FileStore::open_with(dir.path(), opts()).unwrap();
        store.compact(&states.last().unwrap().snapshot()).unwrap();
        drop(store);
        let path = dir.path().join(super::super::fsutil::SNAPSHOT_FILE);
        let mut data = fs::read(&path).unwrap();
        let mid = data.len() / 2;
        data[mid] ^= 0xff;
        fs::write(&path, &data).unwrap();
        let err = FileStore::open_with(dir.path(), opts()).err().expect("damage detected");
        assert!(matches!(&err, Error::StoreCorrupt { path: p, .. } if *p == path), "{err}");
    }
}

//! [`FileStore`]: the embedded store, a directory with a write-ahead log and a snapshot.
//!
//! Layout of the directory:
//!
//! - `FORMAT`: the [`Codec::FORMAT`] of the records stored (checked at open);
//! - `LOCK`: locked while a store has the directory open;
//! - `wal-<seq>.log`: log segments (format in `wal.rs`);
//! - `snapshot.gz`: the latest compacted snapshot (the codec's encoding, gzipped);
//! - `snapshot.gz.tmp`: a snapshot being written (removed at open).
//!
//! **Group commit.** [`submit`](Store::submit) encodes the records and appends them to an
//! in-memory buffer (under a short lock). [`wait_durable`](Store::wait_durable) makes the
//! first waiting thread the *leader*: it takes the whole buffer, writes it with one
//! `write`, and calls `fdatasync` once; threads arriving meanwhile wait on a condition
//! variable, and the next leader takes everything they submitted in one go. Under load,
//! one fsync covers the changes of many threads. With [`LogSync::Write`] a record counts as
//! durable once written to the kernel (it survives the process, not the machine), and a
//! thread of the store `fdatasync`s the log once per interval, off the waiters' path.
//!
//! **Compaction.** [`compact`](Store::compact) writes the snapshot atomically (temporary
//! file, fsync, rename, directory fsync), starts a new log segment, and deletes the
//! segments whose changes the snapshot covers.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::codec::check_numbering;
use super::fsutil::{
    LOCK_FILE, SNAPSHOT_FILE, claim_format, fsync_dir, lock, read_snapshot, remove_stale_tmp, write_snapshot_with,
};
use super::wal::{self, encode_record, list_segments, segment_name};
use super::{Codec, Loaded, Store, Ticket};
use warren_base::error::{Error, Result};

/// Tunables of a [`FileStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStoreOptions {
    /// [`wants_compaction`](Store::wants_compaction) turns true once this many log bytes
    /// were written since the last compaction. Default 64 MiB.
    pub compact_after_bytes: u64,
    /// ... and, if not 0, once the log since the last compaction holds at least this many
    /// times the bytes of the snapshot on disk: a large snapshot is not rewritten for a log
    /// much smaller than itself (what a restart replays stays in proportion). Default 0.
    pub compact_after_snapshots: u64,
    /// gzip level of snapshots, 0 (none) to 9 (best). Default 1: snapshots are written
    /// while the master serves, so speed matters more than size.
    pub snapshot_level: u32,
    /// With [`LogSync::Fsync`], log segments are extended with zeros this many bytes ahead
    /// of the write position, so that appending does not change the file size and an fsync
    /// needs no file-system journal commit (several times faster on ext4). 0 disables it.
    /// Not done with [`LogSync::Write`]: nobody waits for its syncs, and the zeros would
    /// double the bytes written. Default 16 MiB.
    pub preallocate_bytes: u64,
    /// When a log write counts as durable. Default [`LogSync::Fsync`].
    pub sync: LogSync,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        FileStoreOptions {
            compact_after_bytes: 64 << 20,
            compact_after_snapshots: 0,
            snapshot_level: 1,
            preallocate_bytes: 16 << 20,
            sync: LogSync::Fsync,
        }
    }
}

/// When a [`FileStore`]'s log write counts as durable, answering
/// [`wait_durable`](Store::wait_durable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogSync {
    /// Once `fdatasync` returned: a record survives the machine crashing or losing power.
    Fsync,
    /// Once `write` returned (the record is in the kernel's page cache): a record survives
    /// this process being killed, not the machine crashing. A thread of the store
    /// `fdatasync`s the log every `every` (at least 1 ms) if it was written to, and the
    /// log is synced before each compaction and when the store closes; a failed sync makes
    /// the store refuse further work, as a failed write does.
    Write {
        /// How often the log is synced.
        every: Duration,
    },
}

/// Counters of a [`FileStore`] since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStoreStats {
    /// Non-empty [`submit`](Store::submit) calls (= log records).
    pub submits: u64,
    /// Records submitted (one log record holds those of one submit).
    pub records: u64,
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
    /// An empty buffer with room, swapped for `buf` by a leader: submits encode into
    /// memory already mapped instead of a new allocation each time.
    spare: Vec<u8>,
    /// Sequence number of the last record submitted.
    submitted: u64,
    /// Sequence number up to which everything is durable.
    durable: u64,
    /// Whether a leader is writing right now.
    flushing: bool,
    /// Set when a write failed: the store refuses all later work.
    failed: Option<String>,
    /// Log bytes submitted since the last compaction.
    bytes_since_compaction: u64,
    /// Size of the snapshot on disk (0: none).
    snapshot_bytes: u64,
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
    /// Whether bytes were written since the last `fdatasync` began (only with
    /// [`LogSync::Write`]).
    unsynced: bool,
}

impl Segment {
    /// A segment whose valid records end at `len` of a file `allocated` bytes long.
    fn new(file: File, path: PathBuf, len: u64, allocated: u64, written: u64) -> Segment {
        Segment { file, path, len, allocated, written, unsynced: false }
    }

    /// `fdatasync`s the segment.
    fn sync(&mut self) -> Result<()> {
        self.unsynced = false;
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))
    }
}

/// The thread that syncs a [`LogSync::Write`] log: it stops (and is joined) when `stop` is
/// dropped.
struct Syncer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts syncing `segment` every `every`, counting syncs in `syncs` and putting the
    /// first failure in `failed`.
    fn start(
        dir: &Path,
        every: Duration,
        segment: Arc<Mutex<Segment>>,
        syncs: Arc<AtomicU64>,
        failed: Arc<Mutex<Option<String>>>,
    ) -> Result<Syncer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let every = every.max(Duration::from_millis(1));
        let name = format!("log-sync {}", dir.display());
        let thread = std::thread::Builder::new()
            .name("warren-log-sync".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    // Synced through a duplicate descriptor, so that writers do not wait.
                    let file = {
                        let mut seg = lock(&segment);
                        if !seg.unsynced {
                            continue;
                        }
                        seg.unsynced = false;
                        seg.file.try_clone().map(|f| (f, seg.path.clone()))
                    };
                    let synced = file.and_then(|(f, path)| {
                        f.sync_data()
                            .map_err(|e| std::io::Error::new(e.kind(), format!("syncing {}: {e}", path.display())))
                    });
                    match synced {
                        Ok(()) => {
                            syncs.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            log::error!("{name}: {e}");
                            lock(&failed).get_or_insert_with(|| e.to_string());
                            return;
                        }
                    }
                }
            })
            .map_err(|e| Error::io("starting the log's sync thread".to_string(), e))?;
        Ok(Syncer { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a directory holds, as read at open or load.
struct Recovered<C: Codec> {
    snapshot: Option<C::Snapshot>,
    records: Vec<C::Record>,
    /// Highest sequence number found in the log or snapshot.
    last_seq: u64,
    /// The last segment, its valid length and, if its tail was torn, why.
    last_segment: Option<(PathBuf, u64, Option<String>)>,
}

/// The embedded durable store: a write-ahead log with group commit plus compacted
/// snapshots, in one directory.
///
/// Layout: the format marker `FORMAT`, log segments `wal-<first seq>.log` (records of
/// length + CRC-32, see below), the snapshot `snapshot.gz`, and `snapshot.gz.tmp` while one
/// is written. `C` is the format of the records and snapshots (see [`Codec`]).
///
/// - **Group commit.** [`submit`](Store::submit) encodes the changes into an in-memory
///   buffer; the first thread to [`wait_durable`](Store::wait_durable) becomes the leader,
///   writes the whole buffer with one `write` and one `fdatasync`, then wakes the others;
///   whatever was submitted meanwhile goes out with the next leader's single fsync.
/// - **Crash safety.** Each log record is `len | crc32(payload) | crc32(header) | payload`
///   and holds all records of one `submit`. At open, a torn record at the end of the last
///   segment (a write interrupted by a crash, never acknowledged) is cut off; damage
///   anywhere else is [`Error::StoreCorrupt`] naming the file and byte offset.
/// - **Compaction.** [`compact`](Store::compact) writes the snapshot to a temporary file,
///   fsyncs it, renames it over the old one, fsyncs the directory, starts a new segment,
///   and deletes the segments the snapshot covers.
pub struct FileStore<C: Codec> {
    dir: PathBuf,
    /// `dir/LOCK`, held with an exclusive `flock` while the store is open, so that two
    /// services never write the same directory (released by the kernel if we die).
    _lock: File,
    options: FileStoreOptions,
    commit: Mutex<Commit>,
    committed: Condvar,
    segment: Arc<Mutex<Segment>>,
    /// The thread syncing the log ([`LogSync::Write`] only), stopped before the last sync.
    syncer: Option<Syncer>,
    /// Why the syncing thread failed, if it did.
    sync_failed: Arc<Mutex<Option<String>>>,
    /// Sequence number of the snapshot on disk (serializes compactions).
    snapshot_seq: Mutex<u64>,
    /// What `open` read (the snapshot and the records after it), handed to the first
    /// `load` instead of reading and decoding everything again (a parameter server's 64 MiB
    /// shard took as long again); dropped by the first submit or compaction.
    opened: Mutex<Option<Loaded<C>>>,
    submits: AtomicU64,
    records: AtomicU64,
    syncs: Arc<AtomicU64>,
    bytes: AtomicU64,
    compactions: AtomicU64,
    format: PhantomData<fn() -> C>,
}

/// Takes the exclusive lock of a store directory, failing at once if it is held.
fn lock_dir(dir: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(Error::io(
            format!("locking store directory {} (is another master or service using it?)", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(file)
}

impl<C: Codec> FileStore<C> {
    /// Opens (or creates) the store in `dir` with default options. Fails if another
    /// `FileStore` (in any process) has the directory open.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore<C>> {
        FileStore::open_with(dir, FileStoreOptions::default())
    }

    /// Opens (or creates) the store in `dir`. A torn tail left by a crash is cut off here
    /// (and logged); damage anywhere else is [`Error::StoreCorrupt`]; a directory holding
    /// another format than `C` is [`Error::Config`] naming both.
    pub fn open_with(dir: impl AsRef<Path>, options: FileStoreOptions) -> Result<FileStore<C>> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock_file = lock_dir(&dir)?;
        remove_stale_tmp(&dir)?;
        claim_format::<C>(&dir)?;
        let Recovered { snapshot, records, last_seq, last_segment } = recover::<C>(&dir)?;
        let snapshot_seq = snapshot.as_ref().map_or(0, C::snapshot_seq);
        let (file, path, len) = match last_segment {
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
                let (file, path) = create_segment(&dir, last_seq + 1)?;
                (file, path, 0)
            }
        };
        let allocated =
            file.metadata().map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?.len();
        let segment = Arc::new(Mutex::new(Segment::new(file, path, len, allocated, last_seq)));
        let syncs = Arc::new(AtomicU64::new(0));
        let sync_failed = Arc::new(Mutex::new(None));
        let snapshot_bytes = snapshot_size(&dir);
        let syncer = match options.sync {
            LogSync::Fsync => None,
            LogSync::Write { every } => {
                Some(Syncer::start(&dir, every, segment.clone(), syncs.clone(), sync_failed.clone())?)
            }
        };
        Ok(FileStore {
            dir,
            _lock: lock_file,
            options,
            commit: Mutex::new(Commit {
                buf: Vec::new(),
                spare: Vec::new(),
                submitted: last_seq,
                durable: last_seq,
                flushing: false,
                failed: None,
                bytes_since_compaction: len,
                snapshot_bytes,
            }),
            committed: Condvar::new(),
            segment,
            syncer,
            sync_failed,
            snapshot_seq: Mutex::new(snapshot_seq),
            opened: Mutex::new(Some((snapshot, records))),
            submits: AtomicU64::new(0),
            records: AtomicU64::new(0),
            syncs,
            bytes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            format: PhantomData,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Counters since open.
    pub fn stats(&self) -> FileStoreStats {
        FileStoreStats {
            submits: self.submits.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            compactions: self.compactions.load(Ordering::Relaxed),
        }
    }

    /// Writes `buf` (log records up to record `upto`) to the log and, with
    /// [`LogSync::Fsync`], fsyncs it, first extending the segment with zeros if the records
    /// would not fit.
    fn write_batch(&self, buf: &[u8], upto: u64) -> Result<()> {
        let mut guard = lock(&self.segment);
        let seg = &mut *guard;
        let end = seg.len + buf.len() as u64;
        let prealloc = match self.options.sync {
            LogSync::Fsync => self.options.preallocate_bytes,
            LogSync::Write { .. } => 0,
        };
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
            match self.options.sync {
                LogSync::Fsync => seg.file.sync_data(),
                LogSync::Write { .. } => Ok(()),
            }
        })();
        result.map_err(|e| Error::io(format!("appending to {}", seg.path.display()), e))?;
        seg.len = end;
        seg.allocated = seg.allocated.max(end);
        seg.written = upto;
        match self.options.sync {
            LogSync::Fsync => {
                self.syncs.fetch_add(1, Ordering::Relaxed);
            }
            LogSync::Write { .. } => seg.unsynced = true,
        }
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Makes a failure of the syncing thread the store's.
    fn take_sync_failure(&self, c: &mut Commit) {
        if let Some(why) = lock(&self.sync_failed).take() {
            c.failed.get_or_insert(why);
        }
    }

    /// [`wants_compaction`](Store::wants_compaction) for a service that knows its next
    /// snapshot will be about `snapshot_bytes`: with
    /// [`compact_after_snapshots`](FileStoreOptions::compact_after_snapshots), the log is
    /// measured against the larger of that and the snapshot on disk, so that the first
    /// compaction (no snapshot on disk yet) and those of a growing state wait for a log in
    /// proportion to what they will write.
    pub fn wants_compaction_for(&self, snapshot_bytes: u64) -> bool {
        let c = lock(&self.commit);
        let by_snapshot = c.snapshot_bytes.max(snapshot_bytes).saturating_mul(self.options.compact_after_snapshots);
        c.bytes_since_compaction >= self.options.compact_after_bytes.max(by_snapshot)
    }

    /// Whether [`wait_durable`](Store::wait_durable) waits for the disk ([`LogSync::Fsync`]),
    /// or only for a `write` to the kernel, which takes no longer than copying the records.
    pub fn waits_for_disk(&self) -> bool {
        self.options.sync == LogSync::Fsync
    }

    /// [`compact`](Store::compact) with a snapshot already encoded: `encoded` is what
    /// [`Codec::encode_snapshot`] writes for a snapshot covering every record up to `seq`.
    /// A service encodes it while it holds its state still (one copy of the state, into a
    /// buffer it can reuse) and has it written without holding anything.
    pub fn compact_encoded(&self, seq: u64, encoded: &[u8]) -> Result<()> {
        self.compact_with(seq, |out| out.write_all(encoded))
    }

    /// Stores the snapshot covering every record up to `seq` that `encode` writes, and drops
    /// the log records it covers.
    fn compact_with(
        &self,
        seq: u64,
        encode: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<()> {
        let mut on_disk = lock(&self.snapshot_seq);
        {
            let c = lock(&self.commit);
            if let Some(why) = &c.failed {
                return Err(Error::StoreFailed(why.clone()));
            }
            if seq > c.submitted {
                return Err(Error::InvalidArgument(format!(
                    "snapshot at record {seq} is ahead of the log (last record submitted: {})",
                    c.submitted
                )));
            }
        }
        if seq < *on_disk {
            return Err(Error::InvalidArgument(format!(
                "snapshot at record {seq} is older than the stored one (record {})",
                *on_disk
            )));
        }
        lock(&self.opened).take();
        // Stop asking for compactions while this one runs.
        lock(&self.commit).bytes_since_compaction = 0;
        write_snapshot_with(&self.dir, self.options.snapshot_level, encode)?;
        *on_disk = seq;
        lock(&self.commit).snapshot_bytes = snapshot_size(&self.dir);

        let mut seg = lock(&self.segment);
        // The segment left behind, if written to without a sync since: its records after the
        // snapshot must reach the disk, as only the current segment is synced from then on.
        let mut left_unsynced = None;
        if seg.len > 0 {
            // Every record written so far is at most `seg.written`; newer ones go to the
            // new segment, so its name bounds both.
            let (file, path) = create_segment(&self.dir, seg.written + 1)?;
            let written = seg.written;
            let old = std::mem::replace(&mut *seg, Segment::new(file, path, 0, 0, written));
            left_unsynced = old.unsynced.then_some(old);
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
        if let Some(mut old) = left_unsynced {
            // Without the lock: writers go on meanwhile.
            old.sync()?;
        }
        if removed > 0 {
            fsync_dir(&self.dir)?;
        }
        self.compactions.fetch_add(1, Ordering::Relaxed);
        log::info!("store {}: compacted at record {seq}, removed {removed} log segments", self.dir.display());
        Ok(())
    }
}

impl<C: Codec> Drop for FileStore<C> {
    fn drop(&mut self) {
        if self.syncer.take().is_some() {
            let mut seg = lock(&self.segment);
            if seg.unsynced {
                if let Err(e) = seg.sync() {
                    log::error!("store {}: {e}", self.dir.display());
                }
            }
        }
    }
}

impl<C: Codec> Store<C> for FileStore<C> {
    fn submit(&self, records: &[C::Record]) -> Result<Ticket> {
        let mut c = lock(&self.commit);
        self.take_sync_failure(&mut c);
        if let Some(why) = &c.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        check_numbering::<C>(&self.dir.display(), c.submitted, records)?;
        if let Some(last) = records.last() {
            // Encoded straight into the buffer the next leader writes: one copy.
            let start = c.buf.len();
            if let Err(e) = encode_record::<C>(records, &mut c.buf) {
                c.buf.truncate(start);
                return Err(e);
            }
            lock(&self.opened).take();
            c.submitted = C::seq(last);
            c.bytes_since_compaction += (c.buf.len() - start) as u64;
            self.submits.fetch_add(1, Ordering::Relaxed);
            self.records.fetch_add(records.len() as u64, Ordering::Relaxed);
        }
        Ok(Ticket(c.submitted))
    }

    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        let mut c = lock(&self.commit);
        self.take_sync_failure(&mut c);
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
            let spare = std::mem::take(&mut c.spare);
            let buf = std::mem::replace(&mut c.buf, spare);
            let upto = c.submitted;
            drop(c);
            let result = self.write_batch(&buf, upto);
            c = lock(&self.commit);
            c.flushing = false;
            if c.spare.capacity() < buf.capacity() {
                // Kept for the next leader to swap in.
                let mut buf = buf;
                buf.clear();
                c.spare = buf;
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

    fn load(&self) -> Result<Loaded<C>> {
        if let Some(opened) = lock(&self.opened).take() {
            return Ok(opened);
        }
        // Hold the segment so no leader writes while we read.
        let _seg = lock(&self.segment);
        let rec = recover::<C>(&self.dir)?;
        Ok((rec.snapshot, rec.records))
    }

    fn compact(&self, snapshot: &C::Snapshot) -> Result<()> {
        self.compact_with(C::snapshot_seq(snapshot), |out| C::encode_snapshot(snapshot, out))
    }

    fn wants_compaction(&self) -> bool {
        self.wants_compaction_for(0)
    }
}

/// The size of the snapshot in `dir` (0: none, or unreadable).
fn snapshot_size(dir: &Path) -> u64 {
    fs::metadata(dir.join(SNAPSHOT_FILE)).map_or(0, |m| m.len())
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

/// Reads the snapshot and every segment of `dir`, checking that the record numbers
/// follow each other. A torn tail of the last segment is reported, not an error.
fn recover<C: Codec>(dir: &Path) -> Result<Recovered<C>> {
    let snapshot = read_snapshot::<C>(dir)?;
    let snapshot_seq = snapshot.as_ref().map_or(0, C::snapshot_seq);
    let segments = list_segments(dir)?;
    let mut records = Vec::new();
    let mut prev: Option<u64> = None;
    let mut last_segment = None;
    for (i, (_, path)) in segments.iter().enumerate() {
        let data = fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let scan = wal::scan::<C>(path, &data, i + 1 == segments.len())?;
        for logged in scan.records {
            for record in logged.records {
                // Record numbers grow by one; a gap is allowed only where the snapshot
                // covers it (a snapshot can be ahead of a log whose tail was torn).
                let seq = C::seq(&record);
                let covered = prev.unwrap_or(0).max(snapshot_seq);
                if prev.is_some_and(|p| seq <= p) || seq > covered + 1 {
                    return Err(Error::StoreCorrupt {
                        path: path.clone(),
                        offset: logged.offset,
                        reason: format!(
                            "record {seq} follows record {} (snapshot at record {snapshot_seq})",
                            prev.unwrap_or(0)
                        ),
                    });
                }
                prev = Some(seq);
                if seq > snapshot_seq {
                    records.push(record);
                }
            }
        }
        last_segment = Some((path.clone(), scan.valid_len, scan.torn));
    }
    Ok(Recovered { snapshot, records, last_seq: prev.unwrap_or(0).max(snapshot_seq), last_segment })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Replay;
    use crate::testdir::TestDir;
    use crate::testkit::{Counter, Kv, KvNext, Put, Table, puts, replay};

    /// Small preallocation steps, so that tests extend segments often.
    fn opts() -> FileStoreOptions {
        FileStoreOptions { preallocate_bytes: 512, ..FileStoreOptions::default() }
    }

    fn open(dir: &Path) -> Result<FileStore<Kv>> {
        FileStore::open_with(dir, opts())
    }

    /// Appends `n` records in submits of 1, 2 and 3 records; returns the table after each
    /// submit (index 0: empty).
    fn build(dir: &Path, n: u64) -> Vec<Table> {
        let store = open(dir).unwrap();
        let all = puts(1, n);
        let mut states = vec![Table::default()];
        let mut at = 0;
        for size in [1usize, 2, 3].into_iter().cycle() {
            if at == all.len() {
                break;
            }
            let batch = &all[at..(at + size).min(all.len())];
            store.append(batch).unwrap();
            at += batch.len();
            states.push(replay(None, &all[..at]));
        }
        states
    }

    fn reload(dir: &Path) -> Result<Table> {
        let (snapshot, records) = open(dir)?.load()?;
        Ok(replay(snapshot, &records))
    }

    #[test]
    fn a_load_after_writes_sees_them_although_open_had_read_the_store_already() {
        let dir = TestDir::new("file-store-load-after-open");
        build(dir.path(), 5);
        let store = open(dir.path()).unwrap();
        let all = puts(1, 8);
        store.append(&all[5..7]).unwrap();
        let (snapshot, records) = store.load().unwrap();
        assert_eq!(replay(snapshot, &records), replay(None, &all[..7]), "the appended records are loaded");
        store.compact(&replay(None, &all[..7])).unwrap();
        store.append(&all[7..]).unwrap();
        let (snapshot, records) = store.load().unwrap();
        assert_eq!(replay(snapshot, &records), replay(None, &all), "after a compaction and another append");
        let reopened = open_again(store, dir.path());
        let (snapshot, records) = reopened.load().unwrap();
        assert_eq!(replay(snapshot, &records), replay(None, &all), "what open read, handed to the first load");
    }

    /// With `LogSync::Write` a record is answered once written: another reader of the
    /// directory (a restarted process) sees it before any fsync; the log is fsynced when
    /// its interval is up, before a compaction, and at close.
    #[test]
    fn a_written_record_is_answered_before_its_fsync_and_synced_later() {
        let dir = TestDir::new("file-store-log-sync-write");
        let lazy = FileStoreOptions { sync: LogSync::Write { every: Duration::from_secs(3600) }, ..opts() };
        let store = FileStore::<Kv>::open_with(dir.path(), lazy).unwrap();
        let all = puts(1, 6);
        for r in &all[..4] {
            store.append(std::slice::from_ref(r)).unwrap();
        }
        assert_eq!(store.stats().syncs, 0, "no fsync within the interval");
        let copy = TestDir::new("file-store-log-sync-write-copy");
        copy_dir(dir.path(), copy.path());
        fs::remove_file(copy.path().join(LOCK_FILE)).unwrap();
        assert_eq!(reload(copy.path()).unwrap(), replay(None, &all[..4]), "the written records are readable at once");
        store.compact(&replay(None, &all[..3])).unwrap();
        store.append(&all[4..]).unwrap();
        assert!(lock(&store.segment).unsynced, "written to the new segment since");
        drop(store);
        assert_eq!(reload(dir.path()).unwrap(), replay(None, &all), "closed, then opened again");

        let often = FileStoreOptions { sync: LogSync::Write { every: Duration::from_millis(5) }, ..opts() };
        let store = FileStore::<Kv>::open_with(dir.path(), often).unwrap();
        store.append(&puts(7, 2)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.stats().syncs == 0 {
            assert!(std::time::Instant::now() < deadline, "the syncing thread synced nothing in 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!lock(&store.segment).unsynced);
    }

    /// Closes `store` (releasing the directory's lock) and opens it again.
    fn open_again(store: FileStore<Kv>, dir: &Path) -> FileStore<Kv> {
        drop(store);
        open(dir).unwrap()
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

    fn scan(path: &Path, data: &[u8]) -> wal::Scan<Put> {
        wal::scan::<Kv>(path, data, true).unwrap()
    }

    #[test]
    fn a_directory_is_used_by_one_store_at_a_time() {
        let dir = TestDir::new("file-lock");
        let first = FileStore::<Kv>::open(dir.path()).unwrap();
        let err = FileStore::<Kv>::open(dir.path()).err().expect("the directory is locked");
        assert!(err.to_string().contains("another master"), "{err}");
        drop(first);
        FileStore::<Kv>::open(dir.path()).unwrap();
    }

    #[test]
    fn appended_records_reload_to_the_same_state() {
        let dir = TestDir::new("reload");
        let states = build(dir.path(), 40);
        let (snapshot, records) = open(dir.path()).unwrap().load().unwrap();
        assert!(snapshot.is_none());
        assert_eq!(records, puts(1, 40), "every record, in order, as submitted");
        assert_eq!(&reload(dir.path()).unwrap(), states.last().unwrap());
    }

    #[test]
    fn a_store_of_another_format_refuses_to_open_and_is_left_untouched() {
        let dir = TestDir::new("format");
        build(dir.path(), 6);
        let files = || {
            let mut v: Vec<(std::ffi::OsString, Vec<u8>)> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap())
                .map(|e| (e.file_name(), fs::read(e.path()).unwrap()))
                .collect();
            v.sort();
            v
        };
        let before = files();
        // A Put's JSON decodes as a Tick: only the format marker tells the logs apart.
        let err = FileStore::<Counter>::open(dir.path()).err().expect("a kv log opened as a counter log");
        let msg = err.to_string();
        assert!(matches!(err, Error::Config(_)), "{msg}");
        assert!(msg.contains(Kv::FORMAT) && msg.contains(Counter::FORMAT), "{msg}");
        assert_eq!(before, files(), "the failed open changed nothing");
        assert_eq!(reload(dir.path()).unwrap().seq, 6);

        // Data without a marker (an earlier build's directory) is refused, not adopted.
        fs::remove_file(dir.path().join(super::super::fsutil::FORMAT_FILE)).unwrap();
        let err = open(dir.path()).err().expect("data without a format marker");
        assert!(matches!(&err, Error::Config(m) if m.contains("FORMAT") && m.contains(Kv::FORMAT)), "{err}");
    }

    #[test]
    fn a_store_of_an_earlier_format_its_codec_reads_opens_and_is_marked_with_the_new_one() {
        let dir = TestDir::new("format-next");
        let before = build(dir.path(), 6);
        let marker = || fs::read_to_string(dir.path().join(super::super::fsutil::FORMAT_FILE)).unwrap();
        assert_eq!(marker().trim_end(), Kv::FORMAT);
        {
            let store = FileStore::<KvNext>::open_with(dir.path(), opts()).unwrap();
            let (snapshot, records) = store.load().unwrap();
            assert_eq!(replay(snapshot, &records), *before.last().unwrap());
            store.append(&puts(7, 1)).unwrap();
        }
        assert_eq!(marker().trim_end(), KvNext::FORMAT);
        // A build that reads only the earlier format now refuses the directory, naming both.
        let err = open(dir.path()).err().expect("the earlier format's codec refuses the newer directory");
        assert!(matches!(&err, Error::Config(m) if m.contains(Kv::FORMAT) && m.contains(KvNext::FORMAT)), "{err}");
    }

    #[test]
    fn torn_tail_at_every_byte_of_the_last_record_is_discarded() {
        let dir = TestDir::new("torn-src");
        let states = build(dir.path(), 9);
        let seg = only_segment(dir.path());
        let full = fs::read(&seg).unwrap();
        let scan = scan(&seg, &full);
        let last = scan.records.last().unwrap().offset as usize;
        // The state before the last log record.
        let expected = &states[states.len() - 2];
        assert_ne!(expected, states.last().unwrap());

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
                let table = reload(d.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(&table, expected, "{what}");
                // The torn bytes were removed at open: the store keeps working after them.
                let store = open(d.path()).unwrap();
                let more = puts(expected.seq + 1, 2);
                store.append(&more[..1]).unwrap();
                store.append(&more[1..]).unwrap();
                drop(store);
                assert_eq!(reload(d.path()).unwrap(), replay(Some(expected.clone()), &more), "{what}");
            }
        }
        // Uncut, the last record is there.
        assert_eq!(&reload(dir.path()).unwrap(), states.last().unwrap());
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_naming_file_and_offset() {
        let dir = TestDir::new("corrupt");
        build(dir.path(), 9);
        let seg = only_segment(dir.path());
        let mut data = fs::read(&seg).unwrap();
        let victim = scan(&seg, &data).records[2].offset as usize;
        data[victim + wal::HEADER_LEN + 5] ^= 0x20;
        fs::write(&seg, &data).unwrap();
        let err = match open(dir.path()) {
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
    fn a_gap_in_the_record_numbers_is_an_error() {
        let dir = TestDir::new("gap");
        build(dir.path(), 6);
        let seg = only_segment(dir.path());
        let data = fs::read(&seg).unwrap();
        let scan = scan(&seg, &data);
        // Drop log record 1 (of several): record numbers jump.
        let (a, b) = (scan.records[1].offset as usize, scan.records[2].offset as usize);
        let mut cut = data[..a].to_vec();
        cut.extend_from_slice(&data[b..]);
        fs::write(&seg, &cut).unwrap();
        let err = open(dir.path()).err().expect("gap detected");
        assert!(matches!(err, Error::StoreCorrupt { offset, .. } if offset == a as u64), "{err}");
    }

    #[test]
    fn snapshot_plus_log_reload_to_the_same_state_and_old_segments_go() {
        let dir = TestDir::new("compact");
        let store = open(dir.path()).unwrap();
        let all = puts(1, 30);
        for (i, r) in all.iter().enumerate() {
            store.append(std::slice::from_ref(r)).unwrap();
            if i == 11 || i == 21 {
                store.compact(&replay(None, &all[..=i])).unwrap();
            }
        }
        let segs = list_segments(dir.path()).unwrap();
        assert_eq!(segs.len(), 1, "segments covered by the snapshot are deleted: {segs:?}");
        assert_eq!(store.stats().compactions, 2);
        drop(store);
        let (snapshot, records) = open(dir.path()).unwrap().load().unwrap();
        assert_eq!(snapshot.as_ref().map(|s| s.seq), Some(22));
        assert_eq!(records, all[22..], "only the records after the snapshot are read back");
        assert_eq!(replay(snapshot, &records), replay(None, &all));
        // Restarting keeps going.
        let store = open(dir.path()).unwrap();
        store.append(&puts(31, 3)).unwrap();
        drop(store);
        assert_eq!(reload(dir.path()).unwrap(), replay(None, &puts(1, 33)));
    }

    #[test]
    fn a_snapshot_ahead_of_a_torn_log_is_fine() {
        // Compaction may store records that were submitted but not yet synced; if the
        // log then loses them, the snapshot covers the gap.
        let src = TestDir::new("ahead-src");
        let states = build(src.path(), 8);
        let seg = only_segment(src.path());
        let data = fs::read(&seg).unwrap();
        let scan = scan(&seg, &data);
        let store = open(src.path()).unwrap();
        store.compact(states.last().unwrap()).unwrap();
        drop(store);
        // Put back a log that lost all but its first two log records.
        for (_, p) in list_segments(src.path()).unwrap() {
            fs::remove_file(p).unwrap();
        }
        fs::write(&seg, &data[..scan.records[2].offset as usize]).unwrap();
        assert_eq!(&reload(src.path()).unwrap(), states.last().unwrap());
        let store = open(src.path()).unwrap();
        store.append(&puts(9, 1)).unwrap();
        drop(store);
        assert_eq!(reload(src.path()).unwrap(), replay(None, &puts(1, 9)));
    }

    #[test]
    fn compaction_refuses_an_older_snapshot_or_one_ahead_of_the_log() {
        let dir = TestDir::new("refuse");
        let states = build(dir.path(), 6);
        let store = open(dir.path()).unwrap();
        store.compact(&states[2]).unwrap();
        assert!(matches!(store.compact(&states[1]), Err(Error::InvalidArgument(_))));
        let ahead = replay(Some(states.last().unwrap().clone()), &puts(7, 2));
        assert!(matches!(store.compact(&ahead), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn submit_checks_record_numbers() {
        let dir = TestDir::new("numbers");
        build(dir.path(), 4);
        let store = open(dir.path()).unwrap();
        let mut wrong = puts(5, 2);
        wrong[1].seq += 1;
        assert!(matches!(store.submit(&wrong), Err(Error::InvalidArgument(_))));
        assert!(matches!(store.submit(&puts(6, 1)), Err(Error::InvalidArgument(_))));
        store.append(&puts(5, 2)).unwrap();
        assert!(matches!(store.submit(&puts(5, 2)), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn wants_compaction_after_the_configured_bytes() {
        let dir = TestDir::new("wants");
        let store =
            FileStore::<Kv>::open_with(dir.path(), FileStoreOptions { compact_after_bytes: 2000, ..opts() }).unwrap();
        let all = puts(1, 120);
        let mut compacted = 0;
        for (i, r) in all.iter().enumerate() {
            store.append(std::slice::from_ref(r)).unwrap();
            if store.wants_compaction() {
                store.compact(&replay(None, &all[..=i])).unwrap();
                compacted += 1;
                assert!(!store.wants_compaction(), "a compaction resets the count");
            }
        }
        // ~45 bytes per log record: one compaction per ~44 records.
        assert!((2..=3).contains(&compacted), "compacted {compacted} times");
    }

    #[test]
    fn an_expected_snapshot_larger_than_the_one_on_disk_defers_compaction() {
        let dir = TestDir::new("wants-expected");
        let options = FileStoreOptions { compact_after_bytes: 100, compact_after_snapshots: 2, ..opts() };
        let store = FileStore::<Kv>::open_with(dir.path(), options).unwrap();
        let all = puts(1, 200);
        let mut appended = 0;
        while !store.wants_compaction() {
            store.append(std::slice::from_ref(&all[appended])).unwrap();
            appended += 1;
        }
        let logged = lock(&store.commit).bytes_since_compaction;
        assert!(!store.wants_compaction_for(logged), "a snapshot as large as the log wants twice the log");
        assert!(store.wants_compaction_for(logged / 2), "a snapshot of half the log is due");
        assert!(store.wants_compaction_for(0), "none expected: by the configured bytes alone");
    }

    #[test]
    fn wants_compaction_only_once_the_log_outgrows_the_snapshot_as_told() {
        let dir = TestDir::new("wants-snapshots");
        let options = FileStoreOptions { compact_after_bytes: 100, compact_after_snapshots: 3, ..opts() };
        let store = FileStore::<Kv>::open_with(dir.path(), options.clone()).unwrap();
        let all = puts(1, 400);
        store.append(&all[..10]).unwrap();
        assert!(store.wants_compaction(), "no snapshot yet: by bytes alone");
        store.compact(&replay(None, &all[..10])).unwrap();
        let snapshot = snapshot_size(dir.path());
        assert!(snapshot > 0);
        let mut appended = 10;
        while !store.wants_compaction() {
            store.append(std::slice::from_ref(&all[appended])).unwrap();
            appended += 1;
        }
        let logged = lock(&store.commit).bytes_since_compaction;
        assert!(logged >= 3 * snapshot && logged >= 100, "asked at {logged} log bytes, snapshot {snapshot}");
        drop(store);
        let reopened = FileStore::<Kv>::open_with(dir.path(), options).unwrap();
        assert!(reopened.wants_compaction(), "the snapshot's size is known again at open");
    }

    #[test]
    fn concurrent_appends_from_8_threads_are_all_durable_in_one_order() {
        let dir = TestDir::new("threads");
        let store = Arc::new(open(dir.path()).unwrap());
        // The protocol of `Store`: number and submit under the state's lock, wait outside.
        let table = Arc::new(Mutex::new(Table::default()));
        let per_thread = 60;
        std::thread::scope(|s| {
            for w in 0..8 {
                let (store, table) = (Arc::clone(&store), Arc::clone(&table));
                s.spawn(move || {
                    for i in 0..per_thread {
                        let ticket = {
                            let mut t = table.lock().unwrap();
                            let put = Put { seq: t.seq + 1, key: format!("w{w}"), value: i };
                            Kv::apply(&mut t, &put).unwrap();
                            store.submit(&[put]).unwrap()
                        };
                        store.wait_durable(ticket).unwrap();
                    }
                });
            }
        });
        let stats = store.stats();
        assert_eq!(stats.submits, 8 * per_thread as u64);
        assert!(stats.syncs < stats.submits, "group commit shared fsyncs: {stats:?}");
        let live = table.lock().unwrap().clone();
        drop(store);
        // Everything acknowledged is on disk, in an order that replays to the same state.
        assert_eq!(reload(dir.path()).unwrap(), live);
        assert!((0..8).all(|w| live.rows[&format!("w{w}")] == per_thread - 1));
    }

    #[test]
    fn a_leftover_temporary_snapshot_is_ignored_and_removed() {
        let dir = TestDir::new("tmp");
        let states = build(dir.path(), 4);
        let tmp = dir.path().join(super::super::fsutil::SNAPSHOT_TMP);
        fs::write(&tmp, b"half a snapshot").unwrap();
        assert_eq!(&reload(dir.path()).unwrap(), states.last().unwrap());
        assert!(!tmp.exists());
    }

    #[test]
    fn a_damaged_snapshot_is_an_error() {
        let dir = TestDir::new("badsnap");
        let states = build(dir.path(), 4);
        let store = open(dir.path()).unwrap();
        store.compact(states.last().unwrap()).unwrap();
        drop(store);
        let path = dir.path().join(super::super::fsutil::SNAPSHOT_FILE);
        let mut data = fs::read(&path).unwrap();
        let mid = data.len() / 2;
        data[mid] ^= 0xff;
        fs::write(&path, &data).unwrap();
        let err = open(dir.path()).err().expect("damage detected");
        assert!(matches!(&err, Error::StoreCorrupt { path: p, .. } if *p == path), "{err}");
    }
}

//! A server's durable state: a write-ahead log of the requests that changed it, and
//! checkpoints of its whole shard (parameters and optimizer state) with the trainers' clocks
//! and the pushes it holds back, in one generic [`FileStore`] (one directory per server
//! index); and the policy deciding when to checkpoint (every `K` applied steps or `T`
//! seconds, whichever comes first).
//!
//! **The log.** A server logs every request that changes its state ([`LogRecord`]: a push
//! with its gradients, a commit, an abort, a resume, a leave, a join, the job's definition)
//! and answers it only once the record is durable (the store's group commit: requests
//! waiting at once share one fsync). A checkpoint names the last record it includes and
//! cuts the log there. A restarted server loads its checkpoint and replays the records after
//! it through the same state machine, so it is back at the state it last acknowledged (or a
//! little later: records written, their answers lost), never earlier: no trainer needs to
//! keep a push for it, and a push is applied once, being known by its trainer and step (a
//! step already counted is a no-op).
//!
//! The format is binary: the parameter server's message encoding (`floats.rs`: the arrays as
//! little-endian bytes, a JSON header pointing into them), in the store's gzip container at
//! level 0 (stored, CRC-checked; floats hardly compress). The server encodes the snapshot
//! under its lock (one copy of the shard, into a buffer it reuses) and writes, fsyncs and
//! renames it on another thread, without the lock. Format 3 writes a sparse table's rows as whole arrays (keys,
//! parameters and state, update counts: see `rows.rs`), where format 2 had a JSON map entry
//! per row. Format 5 writes a `u64` array whose elements all fit in 32 bits (keys, bag ends,
//! update counts) as `u32`s; format 4 is read as it is (its directory is then marked
//! format 5, refused by builds that read only format 4); a directory of an older format is
//! refused, naming both formats.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::consistency::Clocks;
use super::proto::Grad;
use super::proto::{JobSpec, Request};
use super::shard::Shard;
use warren_base::error::{Error, Result};
use warren_store::{Codec, FileStore, FileStoreOptions, LogSync, Store};

/// Everything a restarted server needs to go on where the checkpoint was taken.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The server's index (checked on load).
    pub index: usize,
    /// Number of servers (checked on load).
    pub servers: usize,
    /// The job.
    pub job: JobSpec,
    /// The shard: parameters and optimizer state.
    pub shard: Shard,
    /// The trainers' clocks and the pushes held back (sync).
    pub clocks: Clocks<Vec<Grad>>,
    /// Pushes taken since the job started, up to this checkpoint.
    pub pushes: u64,
    /// Trainers' pushes lost (async, SSP: skipped by a resume), up to this checkpoint.
    pub lost: u64,
    /// The last [`LogRecord`] this checkpoint includes (0: none).
    pub seq: u64,
}

/// A [`Checkpoint`] borrowing the server's state, for encoding it while the server holds the
/// state still: the same fields in the same order, so the same encoding.
#[derive(Serialize)]
pub(crate) struct CheckpointRef<'a> {
    /// [`Checkpoint::index`].
    pub index: usize,
    /// [`Checkpoint::servers`].
    pub servers: usize,
    /// [`Checkpoint::job`].
    pub job: &'a JobSpec,
    /// [`Checkpoint::shard`].
    pub shard: &'a Shard,
    /// [`Checkpoint::clocks`].
    pub clocks: &'a Clocks<Vec<Grad>>,
    /// [`Checkpoint::pushes`].
    pub pushes: u64,
    /// [`Checkpoint::lost`].
    pub lost: u64,
    /// [`Checkpoint::seq`].
    pub seq: u64,
}

impl CheckpointRef<'_> {
    /// The checkpoint's encoding: one copy of the shard, into a buffer of the pool.
    pub fn encode(&self) -> EncodedCheckpoint {
        let started = std::time::Instant::now();
        let frame = super::floats::encode_narrow_frame(self);
        EncodedCheckpoint {
            encoding: started.elapsed(),
            seq: self.seq,
            clocks: (0..self.clocks.trainers()).map(|t| self.clocks.clock(t)).collect(),
            rows: self.shard.rows(),
            frame,
        }
    }
}

/// A checkpoint encoded as [`CheckpointCodec`] stores it, to be written without the server's
/// lock.
pub(crate) struct EncodedCheckpoint {
    /// The last log record it includes.
    pub seq: u64,
    /// The trainers' clocks it holds (for the server's log).
    pub clocks: Vec<u64>,
    /// The shard's rows (for the server's log).
    pub rows: usize,
    /// The encoding.
    pub frame: Vec<u8>,
    /// How long encoding it took (the server's lock held).
    pub encoding: Duration,
}

impl EncodedCheckpoint {
    /// Stores it in `store` as its checkpoint, then gives its buffer back to the pool: the
    /// next checkpoint encodes into memory already mapped instead of faulting in as many
    /// fresh pages.
    pub fn write(self, store: &FileStore<CheckpointCodec>) -> Result<()> {
        let written = store.compact_encoded(self.seq, &self.frame);
        warren_wire::pool::BYTES.give(self.frame);
        written
    }
}

/// One logged request that changed a server's state, replayed after a restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Its number: the first record of a server's log is 1, each next one the previous + 1.
    pub seq: u64,
    /// The trainer that sent it (`None`: an observer's definition of the job).
    pub trainer: Option<u32>,
    /// The request, as it was carried out.
    pub req: Request,
}

/// The store format of a server: log records of requests, and checkpoints as snapshots.
pub struct CheckpointCodec;

impl Codec for CheckpointCodec {
    type Record = LogRecord;
    type Snapshot = Checkpoint;
    const FORMAT: &'static str = "warren.ps.shard/5";
    const READS: &'static [&'static str] = &["warren.ps.shard/4"];
    fn seq(r: &LogRecord) -> u64 {
        r.seq
    }
    fn snapshot_seq(c: &Checkpoint) -> u64 {
        c.seq
    }
    fn encode_records(records: &[LogRecord], out: &mut Vec<u8>) -> Result<()> {
        // The message encoding: gradients as little-endian arrays, not JSON numbers.
        // Keys and bag ends as `u32`s where they fit: about a third fewer bytes a push.
        super::floats::encode_narrow_frame_into(&records, out);
        Ok(())
    }
    fn decode_records(bytes: &[u8]) -> std::result::Result<Vec<LogRecord>, warren_store::DecodeError> {
        Ok(super::proto::decode(&mut bytes.to_vec())?)
    }
    fn encode_snapshot(snapshot: &Checkpoint, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        // The frame (a shard's size) goes back to the pool: the next checkpoint encodes into
        // memory already mapped instead of faulting in as many fresh pages.
        let frame = super::floats::encode_narrow_frame(snapshot);
        let written = out.write_all(&frame);
        warren_wire::pool::BYTES.give(frame);
        written
    }
    fn decode_snapshot(bytes: &[u8]) -> std::result::Result<Checkpoint, warren_store::DecodeError> {
        Ok(super::proto::decode(&mut bytes.to_vec())?)
    }
}

/// When to checkpoint: every `every_steps` steps applied (by the slowest trainer's clock in
/// async and SSP modes), or `every` time, whichever comes first.
#[derive(Clone, Debug)]
pub struct CheckpointPolicy {
    /// Directory holding one sub-directory per server index.
    pub dir: PathBuf,
    /// Steps between checkpoints (0: only by time).
    pub every_steps: u64,
    /// Time between checkpoints (zero: only by steps).
    pub every: Duration,
    /// When a logged request counts as durable, so that it may be answered.
    pub log_sync: LogSync,
}

/// The default [`CheckpointPolicy::log_sync`]: a request is answered once its record is
/// written to the kernel (it survives the server process being killed), and the log is
/// `fdatasync`ed every [`LOG_SYNC_EVERY`].
pub const DEFAULT_LOG_SYNC: LogSync = LogSync::Write { every: LOG_SYNC_EVERY };

/// The longest a logged request waits for its `fdatasync` with [`LogSync::Write`].
pub const LOG_SYNC_EVERY: Duration = Duration::from_secs(1);

/// Parses a `--log-sync` value: `write` ([`DEFAULT_LOG_SYNC`]) or `fsync`.
pub fn parse_log_sync(s: &str) -> Result<LogSync> {
    match s {
        "write" => Ok(DEFAULT_LOG_SYNC),
        "fsync" => Ok(LogSync::Fsync),
        other => Err(Error::Config(format!(
            "log sync {other:?} is not one of \"write\" (a request is answered once its record is \
             written to the kernel: it survives the server process being killed) or \"fsync\" \
             (once it is on disk: it survives the machine crashing, at the cost of a disk flush)"
        ))),
    }
}

impl CheckpointPolicy {
    /// Whether a checkpoint is due at `applied` steps, the last one taken at `last_steps`,
    /// `since` ago.
    pub fn due(&self, applied: u64, last_steps: u64, since: Duration) -> bool {
        if applied <= last_steps {
            return false;
        }
        (self.every_steps > 0 && applied - last_steps >= self.every_steps)
            || (!self.every.is_zero() && since >= self.every)
    }
}

/// How many times its shard's checkpoint a server's log may hold before the log asks for a
/// checkpoint. A checkpoint writes the whole shard while the log holds only what changed, so
/// checkpointing less often costs less a step (each one costs a copy of the shard under the
/// lock and writing it), at the price of a longer replay after a restart and as much more
/// disk.
pub const LOG_TO_SHARD: u64 = 4;

/// Server `index`'s checkpoint store under `dir`, its log synced as `sync` says.
pub fn open(dir: &Path, index: usize, sync: LogSync) -> Result<FileStore<CheckpointCodec>> {
    let options = FileStoreOptions {
        snapshot_level: 0,
        sync,
        compact_after_snapshots: LOG_TO_SHARD,
        ..FileStoreOptions::default()
    };
    FileStore::open_with(dir.join(format!("server-{index}")), options)
}

/// The latest checkpoint in `store`, checked against the server's place in the job, and the
/// records logged after it.
pub fn load(
    store: &FileStore<CheckpointCodec>,
    index: usize,
    servers: usize,
) -> Result<(Option<Checkpoint>, Vec<LogRecord>)> {
    let (snapshot, records) = store.load()?;
    match snapshot {
        Some(c) if c.index != index || c.servers != servers => Err(Error::Config(format!(
            "checkpoint in {} is of server {} of {}, not server {index} of {servers}",
            store.dir().display(),
            c.index,
            c.servers
        ))),
        other => Ok((other, records)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_due_by_steps_or_time() {
        let p = CheckpointPolicy {
            dir: PathBuf::new(),
            every_steps: 5,
            every: Duration::from_secs(10),
            log_sync: DEFAULT_LOG_SYNC,
        };
        assert!(!p.due(4, 0, Duration::ZERO));
        assert!(p.due(5, 0, Duration::ZERO));
        assert!(p.due(1, 0, Duration::from_secs(10)));
        assert!(!p.due(3, 3, Duration::from_secs(99)), "nothing new since the last one");
        let steps_only = CheckpointPolicy { every: Duration::ZERO, ..p.clone() };
        assert!(!steps_only.due(4, 0, Duration::from_secs(99)));
    }

    #[test]
    fn a_push_is_logged_with_32_bit_keys_and_format_4_records_still_read() {
        let push = |keys: Vec<u64>| LogRecord {
            seq: 3,
            trainer: Some(1),
            req: Request::Push {
                step: 2,
                grads: vec![Grad::SparseBags { table: "emb".into(), keys, ends: vec![2, 3], values: vec![0.5; 8] }]
                    .into(),
            },
        };
        let narrow = push(vec![5, 1 << 20, u32::MAX as u64]);
        let mut log = Vec::new();
        CheckpointCodec::encode_records(std::slice::from_ref(&narrow), &mut log).unwrap();
        let mut v4 = Vec::new();
        crate::floats::encode_frame_into(&std::slice::from_ref(&narrow), &mut v4);
        // 4 bytes fewer per key and bag end, 2 more (`,4`) per array in the header.
        assert_eq!(v4.len() - log.len(), 4 * (3 + 2) - 2 * 2, "keys and bag ends narrowed");
        assert_eq!(CheckpointCodec::decode_records(&log).unwrap(), vec![narrow.clone()]);
        assert_eq!(CheckpointCodec::decode_records(&v4).unwrap(), vec![narrow], "format 4");
        let wide = push(vec![5, u64::MAX, 7]);
        log.clear();
        CheckpointCodec::encode_records(std::slice::from_ref(&wide), &mut log).unwrap();
        assert_eq!(CheckpointCodec::decode_records(&log).unwrap(), vec![wide]);
    }

    #[test]
    fn log_sync_is_write_or_fsync_and_anything_else_names_both() {
        assert_eq!(parse_log_sync("write").unwrap(), DEFAULT_LOG_SYNC);
        assert_eq!(parse_log_sync("fsync").unwrap(), LogSync::Fsync);
        let e = parse_log_sync("always").unwrap_err().to_string();
        assert!(e.contains("\"always\"") && e.contains("\"write\"") && e.contains("\"fsync\""), "{e}");
    }
}

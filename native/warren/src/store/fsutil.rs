//! File-system helpers shared by the stores: directory fsync, atomic snapshot files.

use std::fs::{self, File};
use std::io::{BufWriter, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::error::{Error, Result};
use crate::master::Snapshot;

/// File name of the snapshot inside a store directory.
pub(crate) const SNAPSHOT_FILE: &str = "snapshot.json.gz";
/// Where a snapshot is written before it is renamed over [`SNAPSHOT_FILE`].
pub(crate) const SNAPSHOT_TMP: &str = "snapshot.json.gz.tmp";

/// Locks a mutex whose data stays consistent even if a holder panicked (every critical
/// section of the stores leaves it consistent at each step).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes the directory entries of `dir` (created, renamed, removed files) durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("fsync of directory {}", dir.display()), e))
}

/// Writes `snapshot` as gzip-compressed JSON to `dir/SNAPSHOT_FILE` atomically: a temporary
/// file, fsync, rename over the old one, fsync of the directory. A crash at any point
/// leaves either the old or the new snapshot in place.
pub(crate) fn write_snapshot(dir: &Path, snapshot: &Snapshot, level: u32) -> Result<()> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let io = |what: &str, path: &Path| {
        let what = format!("{what} {}", path.display());
        move |e| Error::io(what, e)
    };
    let file = File::create(&tmp).map_err(io("creating", &tmp))?;
    // Buffer before the compressor: serde_json makes many tiny writes, and feeding those
    // to the deflate stream one by one is several times slower.
    let mut out = BufWriter::with_capacity(1 << 20, GzEncoder::new(file, Compression::new(level)));
    serde_json::to_writer(&mut out, snapshot).map_err(|e| Error::io(format!("writing {}", tmp.display()), e.into()))?;
    let file = out.into_inner().map_err(|e| e.into_error()).and_then(GzEncoder::finish).map_err(io("writing", &tmp))?;
    file.sync_all().map_err(io("fsync of", &tmp))?;
    drop(file);
    let dst = dir.join(SNAPSHOT_FILE);
    fs::rename(&tmp, &dst).map_err(io("renaming the snapshot to", &dst))?;
    fsync_dir(dir)
}

/// Reads the snapshot of a store directory, `None` if there is none yet.
pub(crate) fn read_snapshot(dir: &Path) -> Result<Option<Snapshot>> {
    let path = dir.join(SNAPSHOT_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    let corrupt = |path: &PathBuf, reason: String| Error::StoreCorrupt { path: path.clone(), offset: 0, reason };
    let mut json = Vec::new();
    // Reading to the end makes the decoder check the gzip trailer (CRC-32 and length).
    GzDecoder::new(file).read_to_end(&mut json).map_err(|e| corrupt(&path, format!("bad gzip stream: {e}")))?;
    let snapshot = serde_json::from_slice(&json).map_err(|e| corrupt(&path, format!("bad snapshot: {e}")))?;
    Ok(Some(snapshot))
}

/// Removes a leftover temporary snapshot (from a crash during compaction).
pub(crate) fn remove_stale_tmp(dir: &Path) -> Result<()> {
    let tmp = dir.join(SNAPSHOT_TMP);
    match fs::remove_file(&tmp) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("removing {}", tmp.display()), e)),
    }
}

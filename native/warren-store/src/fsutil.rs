//! File-system helpers shared by the directory stores: directory fsync, atomic snapshot
//! files, the format marker.

use std::fs::{self, File};
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use super::Codec;
use super::stored_gz::StoredGz;
use warren_base::error::{Error, Result};

/// File name of the snapshot inside a store directory (the codec's encoding, gzipped).
pub(crate) const SNAPSHOT_FILE: &str = "snapshot.gz";
/// Where a snapshot is written before it is renamed over [`SNAPSHOT_FILE`].
pub(crate) const SNAPSHOT_TMP: &str = "snapshot.gz.tmp";
/// The lock file of a store directory (see `FileStore`).
pub(crate) const LOCK_FILE: &str = "LOCK";
/// File holding the [`Codec::FORMAT`] of what the directory stores.
pub(crate) const FORMAT_FILE: &str = "FORMAT";
/// Where the format marker is written before it is renamed over [`FORMAT_FILE`].
const FORMAT_TMP: &str = "FORMAT.tmp";

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

/// Writes `snapshot` gzip-compressed to `dir/SNAPSHOT_FILE` atomically: a temporary file,
/// fsync, rename over the old one, fsync of the directory. A crash at any point leaves
/// either the old or the new snapshot in place.
pub(crate) fn write_snapshot<C: Codec>(dir: &Path, snapshot: &C::Snapshot, level: u32) -> Result<()> {
    write_snapshot_with(dir, level, |out| C::encode_snapshot(snapshot, out))
}

/// [`write_snapshot`] of what `encode` writes (a codec's snapshot encoding).
pub(crate) fn write_snapshot_with(
    dir: &Path,
    level: u32,
    encode: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let io = |what: &str, path: &Path| {
        let what = format!("{what} {}", path.display());
        move |e| Error::io(what, e)
    };
    let file = File::create(&tmp).map_err(io("creating", &tmp))?;
    // Buffer before the compressor: encoders (serde_json) make many tiny writes, and
    // feeding those to the deflate stream one by one is several times slower. (A large
    // write goes past the buffer, straight from the caller's bytes.)
    let file = if level == 0 {
        // Stored blocks: no compressor copying the bytes first.
        let mut out = BufWriter::with_capacity(1 << 20, StoredGz::new(file).map_err(io("writing", &tmp))?);
        encode(&mut out).map_err(io("writing", &tmp))?;
        out.into_inner().map_err(|e| e.into_error()).and_then(StoredGz::finish)
    } else {
        let mut out = BufWriter::with_capacity(1 << 20, GzEncoder::new(file, Compression::new(level)));
        encode(&mut out).map_err(io("writing", &tmp))?;
        out.into_inner().map_err(|e| e.into_error()).and_then(GzEncoder::finish)
    };
    let file = file.map_err(io("writing", &tmp))?;
    file.sync_all().map_err(io("fsync of", &tmp))?;
    drop(file);
    let dst = dir.join(SNAPSHOT_FILE);
    fs::rename(&tmp, &dst).map_err(io("renaming the snapshot to", &dst))?;
    fsync_dir(dir)
}

/// Reads the snapshot of a store directory, `None` if there is none yet.
pub(crate) fn read_snapshot<C: Codec>(dir: &Path) -> Result<Option<C::Snapshot>> {
    let path = dir.join(SNAPSHOT_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    let corrupt = |path: &PathBuf, reason: String| Error::StoreCorrupt { path: path.clone(), offset: 0, reason };
    // At least the file's size (all of it when stored uncompressed, level 0): no regrowth
    // and copying of a large snapshot while it is read.
    let mut bytes = Vec::with_capacity(file.metadata().map_or(0, |m| m.len() as usize));
    // Reading to the end makes the decoder check the gzip trailer (CRC-32 and length).
    GzDecoder::new(file).read_to_end(&mut bytes).map_err(|e| corrupt(&path, format!("bad gzip stream: {e}")))?;
    let snapshot = C::decode_snapshot(&bytes).map_err(|e| corrupt(&path, format!("bad snapshot: {e}")))?;
    Ok(Some(snapshot))
}

/// Removes leftover temporary files (from a crash during a compaction or a creation).
pub(crate) fn remove_stale_tmp(dir: &Path) -> Result<()> {
    for name in [SNAPSHOT_TMP, FORMAT_TMP] {
        let tmp = dir.join(name);
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("removing {}", tmp.display()), e)),
        }
    }
    Ok(())
}

/// Makes sure `dir` stores records of format `C`: a directory with no format marker and
/// nothing else (but its `LOCK` and temporary files) gets one, written atomically, as does a
/// directory of an earlier format that `C` [reads](Codec::READS); a marker naming another
/// format, or data without a marker, is [`Error::Config`] naming the formats.
pub(crate) fn claim_format<C: Codec>(dir: &Path) -> Result<()> {
    let path = dir.join(FORMAT_FILE);
    let is_empty = || -> Result<bool> {
        let listing = |e| Error::io(format!("listing {}", dir.display()), e);
        for entry in fs::read_dir(dir).map_err(listing)? {
            let name = entry.map_err(listing)?.file_name();
            if ![LOCK_FILE, FORMAT_TMP, SNAPSHOT_TMP].iter().any(|n| name == *n) {
                return Ok(false);
            }
        }
        Ok(true)
    };
    let write_marker = || -> Result<()> {
        let tmp = dir.join(FORMAT_TMP);
        let mut file = File::create(&tmp).map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
        std::io::Write::write_all(&mut file, format!("{}\n", C::FORMAT).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        fs::rename(&tmp, &path)
            .map_err(|e| Error::io(format!("renaming {} to {}", tmp.display(), path.display()), e))?;
        fsync_dir(dir)
    };
    match fs::read_to_string(&path) {
        Ok(found) if found.trim_end() == C::FORMAT => Ok(()),
        Ok(found) if C::READS.contains(&found.trim_end()) => {
            log::info!(
                "store {}: format {:?} is read as {:?}, which it becomes from now on",
                dir.display(),
                found.trim_end(),
                C::FORMAT
            );
            write_marker()
        }
        Ok(found) => Err(Error::Config(format!(
            "store {} holds records of format {:?}, not {:?}: it belongs to another service (or an \
             incompatible version); give this one its own directory",
            dir.display(),
            found.trim_end(),
            C::FORMAT
        ))),
        Err(e) if e.kind() == ErrorKind::NotFound && is_empty()? => write_marker(),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::Config(format!(
            "store {} has data but no {FORMAT_FILE} file naming its format (written by an earlier Warren \
             build, or not a store); expected {:?}",
            dir.display(),
            C::FORMAT
        ))),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

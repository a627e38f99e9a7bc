//! The shared-memory segment of one link: a file in `/dev/shm` that both ends map, holding
//! two byte rings (one per direction) and their counters.
//!
//! The connecting end creates the file (`O_EXCL`, mode 0600, a random name), sends its name
//! over the authenticated TCP link, and unlinks it once the peer answered: after that only the
//! two mappings keep the memory, and it is freed when both ends are gone (a killed process
//! included). Layout: a 4 KiB header (magic, ring capacity, then each counter on a cache line
//! of its own so that the two ends do not share one; each end's pid and mapping address, and
//! per ring the loan its writer may post, see `super::ShmEnd::lend`), ring 0 (connector to
//! acceptor), ring 1.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::error::{Error, Result};

/// Where segments are created: a tmpfs on Linux.
pub(crate) const DIR: &str = "/dev/shm";

/// Prefix of segment file names (the rest is the creator's pid and a random suffix).
const PREFIX: &str = "warren-";

/// "WRNSHM01": a file that does not start with it is not a segment.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"WRNSHM01");

/// Bytes before the first ring.
const HEADER: usize = 4096;

/// Distance between counters (two cache lines: adjacent-line prefetch stays off the other's).
const LINE: usize = 128;

/// Smallest and largest ring capacity accepted (a power of two in between).
pub(crate) const MIN_RING: usize = crate::config::MIN_SHM_RING;
/// See [`MIN_RING`].
pub(crate) const MAX_RING: usize = crate::config::MAX_SHM_RING;

/// A mapped segment. The data areas are only touched through raw pointers (the other process
/// writes them concurrently); the counters are atomics.
pub(crate) struct Segment {
    base: *mut u8,
    len: usize,
    cap: usize,
    /// The file while it still has a name (creator only, until [`Segment::unlink`]).
    path: Option<PathBuf>,
}

// SAFETY: the mapping is owned by this value and stays valid until it is dropped; shared
// state in it is only accessed through atomics or raw-pointer copies.
unsafe impl Send for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("cap", &self.cap).field("path", &self.path).finish()
    }
}

impl Segment {
    /// Creates a segment with two rings of `cap` bytes (a power of two) under [`DIR`].
    pub(crate) fn create(cap: usize) -> Result<Segment> {
        check_cap(cap)?;
        let name = format!("{PREFIX}{}-{:016x}", std::process::id(), rand::random::<u64>());
        let path = Path::new(DIR).join(&name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io(format!("creating shared-memory segment {}", path.display()), e))?;
        let len = HEADER + 2 * cap;
        // Reserved, not only sized: touching an unbacked page of a full tmpfs would be a SIGBUS;
        // this way a full /dev/shm is an error here, and the link stays on TCP.
        let seg = match reserve(&file, len).and_then(|()| map(&file, len)) {
            Ok(base) => Segment { base, len, cap, path: Some(path) },
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(Error::io(format!("sizing and mapping shared-memory segment {}", path.display()), e));
            }
        };
        // A fresh file reads as zeros: the counters start at 0; the magic goes last.
        seg.word(8).store(cap as u64, std::sync::atomic::Ordering::Relaxed);
        seg.word(0).store(MAGIC, std::sync::atomic::Ordering::Release);
        Ok(seg)
    }

    /// The file name the peer opens ([`Segment::open`]).
    pub(crate) fn name(&self) -> String {
        let p = self.path.as_ref().expect("only a created segment has a name");
        p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// Removes the file's name (the mappings stay). Called once the peer has answered.
    pub(crate) fn unlink(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Removes the file of the segment named `name`, if it is one (mapped, it stays).
    pub(crate) fn remove(name: &str) {
        if valid_name(name) {
            let _ = std::fs::remove_file(Path::new(DIR).join(name));
        }
    }

    /// Opens and maps the segment named `name` (as sent by the creator), checking that it is
    /// one: a clear error for a name outside [`DIR`], a short file or a wrong header.
    pub(crate) fn open(name: &str) -> Result<Segment> {
        if !valid_name(name) {
            return Err(Error::Protocol(format!("{name:?} is not a shared-memory segment name")));
        }
        let path = Path::new(DIR).join(name);
        let what = || format!("shared-memory segment {}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", what()), e))?;
        let len = file.metadata().map_err(|e| Error::io(format!("reading {}", what()), e))?.len() as usize;
        if len < HEADER + 2 * MIN_RING {
            return Err(Error::Protocol(format!("{} is too short ({len} bytes)", what())));
        }
        let base = map(&file, len).map_err(|e| Error::io(format!("mapping {}", what()), e))?;
        let mut seg = Segment { base, len, cap: 0, path: None };
        let ord = std::sync::atomic::Ordering::Acquire;
        let (magic, cap) = (seg.word(0).load(ord), seg.word(8).load(ord) as usize);
        if magic != MAGIC || check_cap(cap).is_err() || HEADER + 2 * cap != len {
            return Err(Error::Protocol(format!("{} has no valid header (capacity {cap}, {len} bytes)", what())));
        }
        seg.cap = cap;
        Ok(seg)
    }

    /// Capacity of each ring in bytes (a power of two).
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// The count of bytes ever written into ring `r`.
    pub(crate) fn tail(&self, r: usize) -> &AtomicU64 {
        self.word(LINE + 2 * LINE * r)
    }

    /// The count of bytes ever read from ring `r`.
    pub(crate) fn head(&self, r: usize) -> &AtomicU64 {
        self.word(2 * LINE + 2 * LINE * r)
    }

    /// Set by end `e` before it blocks waiting for data (`WAITS_DATA`) or for room
    /// (`WAITS_ROOM`): the other end wakes it once it has written, or read, some.
    pub(crate) fn sleeping(&self, e: usize, waits: usize) -> &AtomicU32 {
        debug_assert!(e < 2 && waits < 2);
        // SAFETY: in bounds (HEADER > 9 lines), aligned, and valid as long as `self`.
        unsafe { &*(self.base.add(5 * LINE + LINE * (2 * e + waits)) as *const AtomicU32) }
    }

    /// The pid of end `e`'s process (0 until that end is set up).
    pub(crate) fn pid(&self, e: usize) -> &AtomicU64 {
        self.word(9 * LINE + 8 * e)
    }

    /// The address at which end `e` maps the segment (read by the peer to probe whether it can
    /// read this process's memory).
    pub(crate) fn mapped_at(&self, e: usize) -> &AtomicU64 {
        self.word(9 * LINE + 16 + 8 * e)
    }

    /// Nonzero once end `e` has found that it can read its peer's memory: its peer may lend.
    pub(crate) fn can_borrow(&self, e: usize) -> &AtomicU64 {
        self.word(9 * LINE + 32 + 8 * e)
    }

    /// This mapping's first byte.
    pub(crate) fn base(&self) -> *const u8 {
        self.base
    }

    /// The loan of ring `r`'s writer: the address of the lent bytes in its memory, and the
    /// `lent` count at its first byte (a loan grows at its end while open).
    pub(crate) fn loan(&self, r: usize) -> (&AtomicU64, &AtomicU64) {
        (self.word((10 + 2 * r) * LINE), self.word((10 + 2 * r) * LINE + 8))
    }

    /// The count of bytes ever lent by ring `r`'s writer (published after the loan's address
    /// and start).
    pub(crate) fn lent(&self, r: usize) -> &AtomicU64 {
        self.word((10 + 2 * r) * LINE + 16)
    }

    /// Set by ring `r`'s writer to one more than the start of a loan it takes back (it leaves
    /// the call): the reader discards what it copied of it.
    pub(crate) fn revoked(&self, r: usize) -> &AtomicU64 {
        self.word((10 + 2 * r) * LINE + 24)
    }

    /// The count of lent bytes of ring `r` ever copied by its reader.
    pub(crate) fn borrowed(&self, r: usize) -> &AtomicU64 {
        self.word((11 + 2 * r) * LINE)
    }

    /// The first byte of ring `r`'s data.
    pub(crate) fn data(&self, r: usize) -> *mut u8 {
        // SAFETY: HEADER + 2 cap == len, so both rings are inside the mapping.
        unsafe { self.base.add(HEADER + r * self.cap) }
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= HEADER && off % 8 == 0);
        // SAFETY: in the header, 8-aligned (the mapping is page-aligned), valid as long as `self`.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.unlink();
        // SAFETY: `base` and `len` are the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// A segment name: our prefix, then letters, digits and dashes only (no path).
fn valid_name(name: &str) -> bool {
    name.len() <= 64 && name.starts_with(PREFIX) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn check_cap(cap: usize) -> Result<()> {
    if cap.is_power_of_two() && (MIN_RING..=MAX_RING).contains(&cap) {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "a shared-memory ring of {cap} bytes is not a power of two in {MIN_RING}..={MAX_RING}"
        )))
    }
}

fn reserve(file: &File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on an open descriptor.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) } {
        0 => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

fn map(file: &File, len: usize) -> std::io::Result<*mut u8> {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of an open file; the kernel picks the address.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

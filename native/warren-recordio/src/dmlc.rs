//! Reads dmlc RecordIO (`.rec` files of MXNet and XGBoost).
//!
//! A file is a sequence of parts, each: magic `0xced7230a` (u32 LE), `lrec` (u32 LE: upper
//! 3 bits the continuation flag `cflag`, lower 29 bits the part length), the part bytes,
//! then zero padding to a multiple of 4. A record containing the magic number at a 4-aligned
//! position is written as several parts split around each such magic, which is dropped:
//! `cflag` 0 is a whole record, 1 the first part, 2 a middle part, 3 the last part; the
//! reader puts the magic back between parts. There is no checksum and no chunking.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::Path;
use warren_base::error::{Error, Result};

/// Magic number before every part.
pub const DMLC_MAGIC: u32 = 0xced7_230a;

/// Default limit on a logical record's size (1 GiB); longer records are reported as corrupt.
pub const DEFAULT_MAX_DMLC_RECORD: usize = 1 << 30;

const LEN_MASK: u32 = (1 << 29) - 1;

/// Reads the records of a dmlc RecordIO stream in order.
#[derive(Debug)]
pub struct DmlcReader<R> {
    src: R,
    name: String,
    /// Total length if known (files): lets a bad length be caught before reading.
    len: Option<u64>,
    /// Byte offset of the next part header.
    offset: u64,
    /// Index of the next logical record.
    record: u64,
    max_record: usize,
    done: bool,
}

impl DmlcReader<BufReader<File>> {
    /// Opens a `.rec` file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ctx = || format!("opening dmlc RecordIO file {}", path.display());
        let file = File::open(path).map_err(|e| Error::io(ctx(), e))?;
        let len = file.metadata().map_err(|e| Error::io(ctx(), e))?.len();
        Ok(DmlcReader::new(BufReader::with_capacity(1 << 20, file), path.display().to_string(), Some(len)))
    }
}

impl<R: Read> DmlcReader<R> {
    /// Reads from `src`; `name` appears in errors; `len` is the stream's total length if
    /// known (it tightens the checks on length fields).
    pub fn new(src: R, name: impl Into<String>, len: Option<u64>) -> Self {
        DmlcReader {
            src,
            name: name.into(),
            len,
            offset: 0,
            record: 0,
            max_record: DEFAULT_MAX_DMLC_RECORD,
            done: false,
        }
    }

    /// Sets the limit on a logical record's size (default [`DEFAULT_MAX_DMLC_RECORD`]).
    pub fn with_max_record(mut self, bytes: usize) -> Self {
        self.max_record = bytes;
        self
    }

    /// Reads the next record into `buf` (cleared first). Returns `Ok(false)` at the end of
    /// the stream. Errors name the file, the record index and the offset of the bad part;
    /// after an error the reader is at its end.
    pub fn read_record(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        buf.clear();
        if self.done {
            return Ok(false);
        }
        let r = self.read_parts(buf);
        match r {
            Ok(true) => self.record += 1,
            Ok(false) | Err(_) => self.done = true,
        }
        r
    }

    fn read_parts(&mut self, buf: &mut Vec<u8>) -> Result<bool> {
        let mut first = true;
        loop {
            let part_offset = self.offset;
            let corrupt = |reason: String| Error::Corrupt {
                file: self.name.clone(),
                chunk: self.record,
                offset: part_offset,
                reason,
            };
            let mut head = [0u8; 8];
            let got = read_full(&mut self.src, &mut head)
                .map_err(|e| Error::io(format!("reading dmlc RecordIO file {}", self.name), e))?;
            if got == 0 && first {
                return Ok(false);
            }
            if got == 0 {
                return Err(corrupt("the file ends inside a multi-part record".into()));
            }
            if got < head.len() {
                return Err(corrupt(format!("truncated header: the file ends {got} bytes into an 8-byte part header")));
            }
            let magic = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            let lrec = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
            if magic != DMLC_MAGIC {
                return Err(corrupt(format!("bad magic number {magic:#010x} (expected {DMLC_MAGIC:#010x})")));
            }
            let cflag = lrec >> 29;
            let len = (lrec & LEN_MASK) as usize;
            match (first, cflag) {
                (true, 0 | 1) | (false, 2 | 3) => {}
                (true, 2 | 3) => {
                    return Err(corrupt(format!("continuation part (cflag {cflag}) without a start part")));
                }
                (false, 0 | 1) => {
                    return Err(corrupt(format!("a multi-part record is interrupted by a new record (cflag {cflag})")));
                }
                _ => return Err(corrupt(format!("invalid cflag {cflag}"))),
            }
            let padded = len.next_multiple_of(4);
            let body_offset = part_offset + 8;
            if let Some(total) = self.len {
                let left = total.saturating_sub(body_offset);
                if padded as u64 > left {
                    return Err(corrupt(format!(
                        "truncated part: lrec gives {len} bytes ({padded} padded) but the file has {left} left"
                    )));
                }
            }
            if buf.len() + len > self.max_record {
                return Err(corrupt(format!("record is over the reader's limit of {} bytes", self.max_record)));
            }
            let start = buf.len();
            // Grows with the bytes actually read, so a lying length cannot allocate much.
            let got = (&mut self.src)
                .take(padded as u64)
                .read_to_end(buf)
                .map_err(|e| Error::io(format!("reading dmlc RecordIO file {}", self.name), e))?;
            if got < padded {
                return Err(corrupt(format!(
                    "truncated part: lrec gives {len} bytes ({padded} padded) but only {got} follow"
                )));
            }
            buf.truncate(start + len);
            self.offset = body_offset + padded as u64;
            first = false;
            if cflag == 0 || cflag == 3 {
                return Ok(true);
            }
            buf.extend_from_slice(&DMLC_MAGIC.to_le_bytes());
        }
    }
}

impl<R: Read> Iterator for DmlcReader<R> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut buf = Vec::new();
        match self.read_record(&mut buf) {
            Ok(true) => Some(Ok(buf)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// Reads until `buf` is full or the end of the stream; returns the bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

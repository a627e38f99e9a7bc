//! RecordIO: the chunked record files the master splits into tasks.
//!
//! The format is PaddlePaddle's Go `recordio`, byte for byte: a file is a sequence of chunks,
//! each a 20-byte header (see [`header`]) then a payload holding the chunk's records as
//! `u32 length (LE) + bytes`, compressed as a whole (none, Snappy framing format, or gzip).
//! The header carries a CRC-32 of the compressed payload, so corruption is detected per chunk
//! and a file can be split on chunk boundaries without reading payloads.
//!
//! - [`header`]: the chunk header and compressor codes (no I/O).
//! - [`chunk`]: framing, compression and checked decoding of a payload (no I/O).
//! - [`writer`]: [`Writer`], which cuts chunks at a size limit.
//! - [`index`]: [`Index`], the chunk table read from headers only.
//! - [`reader`]: [`Reader`]: any chunk, any record range, or all records, through the index.
//! - [`dmlc`]: [`DmlcReader`] for dmlc `.rec` files (MXNet, XGBoost), a second input format.
//!
//! [`open`] detects the format of a file and returns its records through one iterator type.
//!
//! Readers never panic on bad input and never allocate from a length field that has not been
//! checked against the file size or a documented limit ([`DEFAULT_MAX_CHUNK_PAYLOAD`],
//! [`DEFAULT_MAX_DMLC_RECORD`]); damage is reported as [`warren_base::error::Error::Corrupt`] naming the
//! file, the chunk and its byte offset.
#![deny(missing_docs)]

pub mod chunk;
pub mod dmlc;
pub mod header;
pub mod index;
pub mod reader;
pub mod writer;

pub use chunk::Chunk;
pub use dmlc::{DEFAULT_MAX_DMLC_RECORD, DMLC_MAGIC, DmlcReader};
pub use header::{ChunkHeader, Compressor, HEADER_LEN, MAGIC};
pub use index::{ChunkInfo, Index};
pub use reader::{DEFAULT_MAX_CHUNK_PAYLOAD, Reader, Records};
pub use writer::{DEFAULT_MAX_CHUNK_BYTES, Writer, WriterOptions};

use std::fs::File;
use std::io::Read;
use std::path::Path;
use warren_base::error::{Error, Result};

/// The record iterator every input format is read through.
pub type RecordIter = Box<dyn Iterator<Item = Result<Vec<u8>>> + Send>;

/// The on-disk formats Warren reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PaddlePaddle RecordIO (chunk magic `0x01020304`). An empty file counts as this.
    Paddle,
    /// dmlc RecordIO (magic `0xced7230a`).
    Dmlc,
}

impl Format {
    /// The format a file starting with `head` is in, from its first 4 bytes; `None` if they
    /// are neither magic number. Fewer than 4 bytes: `Paddle` if empty, else `None`.
    pub fn detect(head: &[u8]) -> Option<Format> {
        if head.is_empty() {
            return Some(Format::Paddle);
        }
        let magic = u32::from_le_bytes(head.get(..4)?.try_into().ok()?);
        match magic {
            MAGIC => Some(Format::Paddle),
            DMLC_MAGIC => Some(Format::Dmlc),
            _ => None,
        }
    }

    /// The format of the file at `path`, from its magic number.
    pub fn of_file(path: impl AsRef<Path>) -> Result<Format> {
        let path = path.as_ref();
        let mut head = Vec::with_capacity(4);
        File::open(path)
            .and_then(|f| f.take(4).read_to_end(&mut head))
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        Format::detect(&head).ok_or_else(|| Error::Corrupt {
            file: path.display().to_string(),
            chunk: 0,
            offset: 0,
            reason: format!(
                "not a RecordIO file: starts with {head:02x?}, expected the magic number \
                 {MAGIC:#010x} (PaddlePaddle) or {DMLC_MAGIC:#010x} (dmlc), little-endian"
            ),
        })
    }
}

/// Opens a PaddlePaddle RecordIO or dmlc `.rec` file (detected from its magic number) and
/// returns its records in order.
pub fn open(path: impl AsRef<Path>) -> Result<RecordIter> {
    let path = path.as_ref();
    Ok(match Format::of_file(path)? {
        Format::Paddle => Box::new(Reader::open(path)?.records()),
        Format::Dmlc => Box::new(DmlcReader::open(path)?),
    })
}

//! Writes RecordIO files: buffers records into a chunk and writes the chunk (header, then
//! compressed payload) when the next record would push it over the size limit.

use super::chunk::{compress, frame_record};
use super::header::{ChunkHeader, Compressor};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use warren_base::error::{Error, Result};

/// Default limit on the record bytes of one chunk (32 MiB), as in PaddlePaddle.
pub const DEFAULT_MAX_CHUNK_BYTES: usize = 32 << 20;

/// How a [`Writer`] cuts and compresses chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// A chunk is written out before a record that would make the sum of its record lengths
    /// (length fields and compression not counted) exceed this. A single record larger than
    /// the limit gets a chunk of its own. Same rule as PaddlePaddle's writer.
    pub max_chunk_bytes: usize,
    /// How each chunk is compressed.
    pub compressor: Compressor,
}

impl Default for WriterOptions {
    /// 32 MiB chunks, Snappy: PaddlePaddle's defaults.
    fn default() -> Self {
        WriterOptions { max_chunk_bytes: DEFAULT_MAX_CHUNK_BYTES, compressor: Compressor::Snappy }
    }
}

/// Writes records into a RecordIO stream.
///
/// Call [`Writer::finish`] at the end: it writes the last chunk. A writer dropped without
/// it loses the records of the unfinished chunk (and logs a warning), since errors could
/// not be reported from `drop`.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: Option<W>,
    name: String,
    opts: WriterOptions,
    /// Uncompressed payload of the current chunk (framed records).
    payload: Vec<u8>,
    /// Reused buffer for the compressed payload.
    compressed: Vec<u8>,
    /// Records and record bytes in the current chunk.
    num_records: u32,
    record_bytes: usize,
    chunks_written: u64,
    records_written: u64,
    bytes_written: u64,
}

impl Writer<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes to it.
    pub fn create(path: impl AsRef<Path>, opts: WriterOptions) -> Result<Self> {
        let path = path.as_ref();
        let file =
            File::create(path).map_err(|e| Error::io(format!("creating RecordIO file {}", path.display()), e))?;
        Ok(Writer::new(BufWriter::new(file), path.display().to_string(), opts))
    }
}

impl<W: Write> Writer<W> {
    /// Writes to `out`; `name` (a path or any label) appears in error messages.
    pub fn new(out: W, name: impl Into<String>, opts: WriterOptions) -> Self {
        Writer {
            out: Some(out),
            name: name.into(),
            opts,
            payload: Vec::new(),
            compressed: Vec::new(),
            num_records: 0,
            record_bytes: 0,
            chunks_written: 0,
            records_written: 0,
            bytes_written: 0,
        }
    }

    /// Appends one record (any bytes, possibly empty, at most `u32::MAX` bytes).
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        if u32::try_from(record.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "RecordIO record of {} bytes is over the format's limit of {} bytes",
                record.len(),
                u32::MAX
            )));
        }
        let over_limit = self.record_bytes.saturating_add(record.len()) > self.opts.max_chunk_bytes;
        // The header's 32-bit fields bound a chunk whatever the limit: keep the framed
        // payload and the record count representable.
        let over_format = self.payload.len() + 4 + record.len() > u32::MAX as usize || self.num_records == u32::MAX;
        if self.num_records > 0 && (over_limit || over_format) {
            self.write_chunk()?;
        }
        frame_record(&mut self.payload, record);
        self.num_records += 1;
        self.record_bytes += record.len();
        Ok(())
    }

    /// Ends the current chunk now (if it has records) and flushes the underlying writer.
    pub fn flush(&mut self) -> Result<()> {
        self.write_chunk()?;
        let Some(out) = self.out.as_mut() else {
            return Err(closed(&self.name));
        };
        out.flush().map_err(|e| Error::io(format!("flushing RecordIO file {}", self.name), e))
    }

    /// Writes the last chunk, flushes, and returns the underlying writer.
    pub fn finish(mut self) -> Result<W> {
        self.flush()?;
        self.out.take().ok_or_else(|| closed(&self.name))
    }

    /// Chunks written so far.
    pub fn chunks_written(&self) -> u64 {
        self.chunks_written
    }

    /// Records written so far, counting those still buffered in the current chunk.
    pub fn records_written(&self) -> u64 {
        self.records_written + u64::from(self.num_records)
    }

    /// Bytes handed to the underlying writer so far (headers and compressed payloads).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Compresses and writes the current chunk, if it has any record.
    fn write_chunk(&mut self) -> Result<()> {
        if self.num_records == 0 {
            return Ok(());
        }
        let chunk = self.chunks_written;
        compress(&self.payload, self.opts.compressor, &mut self.compressed)
            .map_err(|e| Error::io(format!("compressing chunk {chunk} of RecordIO file {}", self.name), e))?;
        let payload_len = u32::try_from(self.compressed.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "chunk {chunk} of RecordIO file {} compresses to {} bytes, over the format's \
                 limit of {} bytes: lower max_chunk_bytes",
                self.name,
                self.compressed.len(),
                u32::MAX
            ))
        })?;
        let header = ChunkHeader {
            checksum: crc32fast::hash(&self.compressed),
            compressor_code: self.opts.compressor.code(),
            payload_len,
            num_records: self.num_records,
        };
        let Some(out) = self.out.as_mut() else {
            return Err(closed(&self.name));
        };
        out.write_all(&header.encode())
            .and_then(|()| out.write_all(&self.compressed))
            .map_err(|e| Error::io(format!("writing chunk {chunk} of RecordIO file {}", self.name), e))?;
        self.chunks_written += 1;
        self.records_written += u64::from(self.num_records);
        self.bytes_written += (super::header::HEADER_LEN + self.compressed.len()) as u64;
        self.payload.clear();
        self.num_records = 0;
        self.record_bytes = 0;
        Ok(())
    }
}

impl<W: Write> Drop for Writer<W> {
    fn drop(&mut self) {
        if self.out.is_some() && self.num_records > 0 {
            log::warn!(
                "RecordIO writer for {} dropped without finish(): {} buffered records not written",
                self.name,
                self.num_records
            );
        }
    }
}

fn closed(name: &str) -> Error {
    Error::InvalidArgument(format!("RecordIO writer for {name} is already finished"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{HEADER_LEN, MAGIC};

    fn chunk_record_counts(bytes: &[u8]) -> Vec<u32> {
        let mut counts = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = ChunkHeader::decode(bytes[pos..pos + HEADER_LEN].try_into().unwrap()).unwrap();
            counts.push(h.num_records);
            pos += HEADER_LEN + h.payload_len as usize;
        }
        counts
    }

    #[test]
    fn chunks_are_cut_like_paddle() {
        let opts = WriterOptions { max_chunk_bytes: 10, compressor: Compressor::None };
        let mut w = Writer::new(Vec::new(), "mem", opts);
        // 4+4 = 8 <= 10; +4 = 12 > 10 -> cut before the third; 20 alone; then 0-byte records.
        for r in [&[1u8; 4][..], &[2; 4], &[3; 4], &[4; 20], b"", b""] {
            w.write(r).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(chunk_record_counts(&bytes), vec![2, 1, 1, 2]);
        assert_eq!(u32::from_le_bytes(bytes[..4].try_into().unwrap()), MAGIC);
    }

    #[test]
    fn nothing_written_writes_nothing() {
        let w = Writer::new(Vec::new(), "mem", WriterOptions::default());
        assert!(w.finish().unwrap().is_empty());
    }

    #[test]
    fn flush_cuts_a_chunk() {
        let mut w = Writer::new(Vec::new(), "mem", WriterOptions::default());
        w.write(b"a").unwrap();
        w.flush().unwrap();
        w.flush().unwrap(); // no empty chunk
        w.write(b"b").unwrap();
        assert_eq!(w.records_written(), 2);
        let bytes = w.finish().unwrap();
        assert_eq!(chunk_record_counts(&bytes), vec![1, 1]);
    }
}

//! The chunk table of a RecordIO file, built from the chunk headers alone: the reader seeks
//! over every payload, so indexing costs one 20-byte read per chunk whatever the file size.

use super::header::{ChunkHeader, Compressor, HEADER_LEN};
use serde::Serialize;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use warren_base::error::{Error, Result};

/// Where one chunk is and what its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkInfo {
    /// Byte offset of the chunk header in the file.
    pub offset: u64,
    /// The decoded header.
    #[serde(flatten)]
    pub header: ChunkHeader,
    /// Index in the file of the chunk's first record.
    pub first_record: u64,
}

impl ChunkInfo {
    /// Byte offset of the payload (just after the header).
    pub fn payload_offset(&self) -> u64 {
        self.offset + HEADER_LEN as u64
    }

    /// Bytes the chunk takes in the file, header included.
    pub fn total_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.header.payload_len)
    }

    /// Number of records in the chunk.
    pub fn num_records(&self) -> u64 {
        u64::from(self.header.num_records)
    }
}

/// The chunk table of one RecordIO file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Index {
    file: String,
    file_len: u64,
    num_records: u64,
    chunks: Vec<ChunkInfo>,
}

impl Index {
    /// Reads every chunk header of `src` from its start, seeking over the payloads.
    ///
    /// Fails with [`Error::Corrupt`] (naming `name`, the chunk and its offset) on a bad magic
    /// number, an unknown compressor, a header cut short by the end of the file, a payload
    /// that would run past the end of the file, or (for uncompressed chunks) a record count
    /// the payload has no room for. Checksums are not verified here: see
    /// [`super::Reader::verify`].
    pub fn load<R: Read + Seek>(src: &mut R, name: &str) -> Result<Index> {
        let io_err = |e| Error::io(format!("indexing RecordIO file {name}"), e);
        let file_len = src.seek(SeekFrom::End(0)).map_err(io_err)?;
        let mut chunks = Vec::new();
        let mut offset = 0u64;
        let mut num_records = 0u64;
        while offset < file_len {
            let chunk = chunks.len() as u64;
            let corrupt = |reason: String| Error::Corrupt { file: name.to_string(), chunk, offset, reason };
            let left = file_len - offset;
            if left < HEADER_LEN as u64 {
                return Err(corrupt(format!(
                    "truncated header: the file ends {left} bytes into a {HEADER_LEN}-byte chunk header"
                )));
            }
            let mut buf = [0u8; HEADER_LEN];
            src.seek(SeekFrom::Start(offset)).map_err(io_err)?;
            match src.read_exact(&mut buf) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    return Err(corrupt("truncated header: the file shrank while indexing".into()));
                }
                Err(e) => return Err(io_err(e)),
            }
            let header = ChunkHeader::decode(&buf).map_err(|bad| {
                corrupt(format!("bad magic number {:#010x} (expected {:#010x})", bad.0, super::header::MAGIC))
            })?;
            let compressor = header
                .compressor()
                .ok_or_else(|| corrupt(format!("unknown compressor code {}", header.compressor_code)))?;
            let payload_left = left - HEADER_LEN as u64;
            if u64::from(header.payload_len) > payload_left {
                return Err(corrupt(format!(
                    "truncated payload: the header gives {} payload bytes but the file has {payload_left} left",
                    header.payload_len
                )));
            }
            if compressor == Compressor::None && u64::from(header.num_records) * 4 > u64::from(header.payload_len) {
                return Err(corrupt(format!(
                    "header claims {} records but the uncompressed payload has only {} bytes",
                    header.num_records, header.payload_len
                )));
            }
            let info = ChunkInfo { offset, header, first_record: num_records };
            num_records += info.num_records();
            offset += info.total_len();
            chunks.push(info);
        }
        Ok(Index { file: name.to_string(), file_len, num_records, chunks })
    }

    /// The file name given to [`Index::load`].
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Size of the file in bytes when it was indexed.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Total number of records in the file.
    pub fn num_records(&self) -> u64 {
        self.num_records
    }

    /// Number of chunks.
    pub fn num_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// All chunks in file order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Chunk `i`, or `None` past the end.
    pub fn chunk(&self, i: usize) -> Option<&ChunkInfo> {
        self.chunks.get(i)
    }

    /// The chunk holding record `record` and the record's position in it, or `None` if
    /// `record >= num_records()`.
    pub fn locate(&self, record: u64) -> Option<(usize, usize)> {
        if record >= self.num_records {
            return None;
        }
        // The last chunk starting at or before `record`. An empty chunk shares its
        // `first_record` with the chunk after it, so it is never the last such chunk while
        // `record < num_records`. Chunk 0 starts at 0, so the count is at least 1.
        let i = self.chunks.partition_point(|c| c.first_record <= record) - 1;
        let c = &self.chunks[i];
        debug_assert!(record < c.first_record + c.num_records());
        Some((i, (record - c.first_record) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compressor, Writer, WriterOptions};
    use std::io::Cursor;

    fn file(counts: &[usize]) -> Vec<u8> {
        let opts = WriterOptions { max_chunk_bytes: 1 << 20, compressor: Compressor::None };
        let mut w = Writer::new(Vec::new(), "mem", opts);
        for &n in counts {
            for i in 0..n {
                w.write(format!("r{i}").as_bytes()).unwrap();
            }
            w.flush().unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn offsets_and_counts() {
        let bytes = file(&[3, 1, 2]);
        let idx = Index::load(&mut Cursor::new(&bytes), "mem").unwrap();
        assert_eq!(idx.num_chunks(), 3);
        assert_eq!(idx.num_records(), 6);
        assert_eq!(idx.file_len(), bytes.len() as u64);
        let c = idx.chunks();
        assert_eq!(c[0].offset, 0);
        assert_eq!(c[1].offset, c[0].total_len());
        assert_eq!(c[2].offset, c[1].offset + c[1].total_len());
        assert_eq!(c[2].offset + c[2].total_len(), bytes.len() as u64);
        assert_eq!(c.iter().map(|c| c.first_record).collect::<Vec<_>>(), vec![0, 3, 4]);
        assert_eq!(idx.locate(0), Some((0, 0)));
        assert_eq!(idx.locate(2), Some((0, 2)));
        assert_eq!(idx.locate(3), Some((1, 0)));
        assert_eq!(idx.locate(5), Some((2, 1)));
        assert_eq!(idx.locate(6), None);
    }

    #[test]
    fn empty_file_has_no_chunks() {
        let idx = Index::load(&mut Cursor::new(Vec::new()), "empty").unwrap();
        assert_eq!(idx.num_chunks(), 0);
        assert_eq!(idx.num_records(), 0);
        assert_eq!(idx.locate(0), None);
    }

    #[test]
    fn truncations_name_chunk_and_offset() {
        let bytes = file(&[2, 2]);
        let idx = Index::load(&mut Cursor::new(&bytes), "mem").unwrap();
        let second = idx.chunks()[1].offset;
        // Cut inside the second header.
        let e = Index::load(&mut Cursor::new(&bytes[..second as usize + 7]), "f.rio").unwrap_err();
        match e {
            Error::Corrupt { file, chunk, offset, reason } => {
                assert_eq!((file.as_str(), chunk, offset), ("f.rio", 1, second));
                assert!(reason.contains("truncated header"), "{reason}");
            }
            other => panic!("{other}"),
        }
        // Cut inside the second payload.
        let e = Index::load(&mut Cursor::new(&bytes[..bytes.len() - 1]), "f.rio").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("f.rio") && msg.contains("chunk 1") && msg.contains(&format!("offset {second}")), "{msg}");
        assert!(msg.contains("truncated payload"), "{msg}");
    }
}

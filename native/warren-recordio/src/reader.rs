//! Reads RecordIO files through their [`Index`]: any chunk, any record range, or all records.

use super::chunk::{self, Chunk};
use super::index::Index;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use warren_base::error::{Error, Result};

/// Default limit on a chunk's compressed and on its decompressed payload (1 GiB). A longer
/// length field is reported as corruption instead of being allocated.
pub const DEFAULT_MAX_CHUNK_PAYLOAD: usize = 1 << 30;

/// A RecordIO file opened for reading, with its chunk table.
#[derive(Debug)]
pub struct Reader<R> {
    src: R,
    index: Index,
    max_payload: usize,
    /// Reused buffer for stored (compressed) payloads.
    scratch: Vec<u8>,
}

impl Reader<File> {
    /// Opens `path` and indexes it (headers only).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(format!("opening RecordIO file {}", path.display()), e))?;
        Reader::new(file, path.display().to_string())
    }
}

impl<R: Read + Seek> Reader<R> {
    /// Indexes `src` (headers only); `name` (a path or any label) appears in errors.
    pub fn new(mut src: R, name: impl Into<String>) -> Result<Self> {
        let index = Index::load(&mut src, &name.into())?;
        Ok(Reader { src, index, max_payload: DEFAULT_MAX_CHUNK_PAYLOAD, scratch: Vec::new() })
    }

    /// Sets the limit on a chunk's compressed and decompressed payload size (default
    /// [`DEFAULT_MAX_CHUNK_PAYLOAD`]). Chunks over it are reported as corrupt.
    pub fn with_max_chunk_payload(mut self, bytes: usize) -> Self {
        self.max_payload = bytes;
        self
    }

    /// The chunk table.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Reads, verifies (checksum, decompression, record framing) and decodes chunk `i`.
    pub fn read_chunk(&mut self, i: usize) -> Result<Chunk> {
        let mut chunk = Chunk::default();
        self.read_chunk_into(i, &mut chunk)?;
        Ok(chunk)
    }

    /// Like [`Reader::read_chunk`], but decodes into `chunk`, reusing its buffers: reading a
    /// file chunk by chunk this way allocates nothing once the buffers have grown. On error
    /// `chunk` is left empty.
    pub fn read_chunk_into(&mut self, i: usize, chunk: &mut Chunk) -> Result<()> {
        let info = *self.index.chunk(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: no chunk {i} (the file has {})",
                self.index.file(),
                self.index.num_chunks()
            ))
        })?;
        let file = self.index.file();
        let corrupt =
            |reason: String| Error::Corrupt { file: file.to_string(), chunk: i as u64, offset: info.offset, reason };
        let len = info.header.payload_len as usize;
        if len > self.max_payload {
            return Err(corrupt(format!(
                "payload of {len} bytes is over the reader's limit of {} bytes",
                self.max_payload
            )));
        }
        let io_err = |e| Error::io(format!("reading chunk {i} of RecordIO file {file}"), e);
        self.src.seek(SeekFrom::Start(info.payload_offset())).map_err(io_err)?;
        // `len` was checked against the file size when indexing and against the limit above.
        self.scratch.resize(len, 0);
        match self.src.read_exact(&mut self.scratch) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                return Err(corrupt("truncated payload: the file shrank after indexing".into()));
            }
            Err(e) => return Err(io_err(e)),
        }
        chunk::decode_into(&info.header, &mut self.scratch, self.max_payload, chunk).map_err(corrupt)
    }

    /// Reads and checks every chunk; returns the number of records. The first bad chunk is
    /// reported as [`Error::Corrupt`].
    pub fn verify(&mut self) -> Result<u64> {
        let mut chunk = Chunk::default();
        for i in 0..self.index.num_chunks() {
            self.read_chunk_into(i, &mut chunk)?;
        }
        Ok(self.index.num_records())
    }

    /// An iterator over all records.
    pub fn records(self) -> Records<R> {
        let n = self.index.num_records();
        self.records_range(0..n)
    }

    /// An iterator over the records in `range` (record indices in the file), clamped to the
    /// file. Only the chunks holding those records are read.
    pub fn records_range(self, range: Range<u64>) -> Records<R> {
        let end = range.end.min(self.index.num_records());
        let next = range.start.min(end);
        let cursor = self.index.locate(next).unwrap_or((self.index.num_chunks(), 0));
        Records { reader: self, next, end, cursor, chunk: Chunk::default(), loaded: None }
    }

    /// Gives back the underlying reader.
    pub fn into_inner(self) -> R {
        self.src
    }
}

/// Iterator over the records of a [`Reader`], chunk by chunk. After an error it ends.
#[derive(Debug)]
pub struct Records<R> {
    reader: Reader<R>,
    /// Index in the file of the next record, and the end of the range.
    next: u64,
    end: u64,
    /// (chunk, record in chunk) of the next record.
    cursor: (usize, usize),
    /// The decoded chunk, and which chunk it is.
    chunk: Chunk,
    loaded: Option<usize>,
}

impl<R> Records<R> {
    /// The chunk table of the file being read.
    pub fn index(&self) -> &Index {
        &self.reader.index
    }
}

impl<R: Read + Seek> Iterator for Records<R> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        loop {
            let (ci, ri) = self.cursor;
            let in_chunk = self.reader.index.chunks()[ci].num_records() as usize;
            if ri < in_chunk {
                break;
            }
            self.cursor = (ci + 1, 0);
        }
        let (ci, ri) = self.cursor;
        if self.loaded != Some(ci) {
            self.loaded = None;
            if let Err(e) = self.reader.read_chunk_into(ci, &mut self.chunk) {
                self.end = self.next;
                return Some(Err(e));
            }
            self.loaded = Some(ci);
        }
        let record = self.chunk.get(ri).map(<[u8]>::to_vec);
        // A decoded chunk holds exactly the header's count, so `ri` is in range.
        debug_assert!(record.is_some());
        self.cursor.1 += 1;
        self.next += 1;
        record.map(Ok)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.end - self.next).unwrap_or(usize::MAX);
        (0, Some(left))
    }
}

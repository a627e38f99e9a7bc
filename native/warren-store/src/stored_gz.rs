//! A gzip stream of *stored* (uncompressed) deflate blocks, written straight from the
//! caller's bytes: what gzip level 0 writes, without a compressor copying every byte into
//! its own buffers first. A snapshot of floats hardly compresses, so stores that keep
//! snapshots at level 0 write them this way; any gzip reader reads the result.

use std::io::{self, IoSlice, Write};

/// The gzip header: magic, deflate, no flags, no time, no extra flags, unknown system.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The largest payload of one stored deflate block.
const BLOCK: usize = 65_535;

/// Writes a gzip stream of stored blocks to `W`: one block per 64 KiB of each write, its
/// 5-byte block header and the caller's bytes in one vectored write.
pub(crate) struct StoredGz<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> StoredGz<W> {
    /// A stream into `out`, its header written.
    pub(crate) fn new(mut out: W) -> io::Result<StoredGz<W>> {
        out.write_all(&HEADER)?;
        Ok(StoredGz { out, crc: crc32fast::Hasher::new(), len: 0 })
    }

    /// Ends the stream (a final empty block, the CRC-32 and length of what was written) and
    /// gives `W` back.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        let mut tail = [0u8; 13];
        tail[..5].copy_from_slice(&[1, 0, 0, 0xff, 0xff]);
        tail[5..9].copy_from_slice(&self.crc.clone().finalize().to_le_bytes());
        tail[9..].copy_from_slice(&(self.len as u32).to_le_bytes());
        self.out.write_all(&tail)?;
        Ok(self.out)
    }

    /// Writes one stored block of `chunk` (at most [`BLOCK`] bytes).
    fn block(&mut self, chunk: &[u8]) -> io::Result<()> {
        let n = chunk.len() as u16;
        let mut head = [0u8; 5];
        head[1..3].copy_from_slice(&n.to_le_bytes());
        head[3..].copy_from_slice(&(!n).to_le_bytes());
        let (mut head, mut chunk) = (&head[..], chunk);
        while !head.is_empty() || !chunk.is_empty() {
            let written = self.out.write_vectored(&[IoSlice::new(head), IoSlice::new(chunk)])?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            let from_head = written.min(head.len());
            head = &head[from_head..];
            chunk = &chunk[written - from_head..];
        }
        Ok(())
    }
}

impl<W: Write> Write for StoredGz<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for chunk in buf.chunks(BLOCK) {
            self.block(chunk)?;
            self.crc.update(chunk);
            self.len += chunk.len() as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use flate2::read::GzDecoder;

    use super::*;

    /// Accepts at most `n` bytes a write, to exercise partial vectored writes.
    struct Trickle(Vec<u8>, usize);

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn any_gzip_reader_reads_it_back_whatever_the_write_sizes() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (trickle, pieces) in [(usize::MAX, vec![0, 1, 70_000, 200_000]), (3, vec![0, 5, 65_535, 131_071, 200_000])]
        {
            let mut gz = StoredGz::new(Trickle(Vec::new(), trickle)).unwrap();
            for w in pieces.windows(2) {
                gz.write_all(&data[w[0]..w[1]]).unwrap();
            }
            let bytes = gz.finish().unwrap().0;
            let mut back = Vec::new();
            GzDecoder::new(&bytes[..]).read_to_end(&mut back).unwrap();
            assert_eq!(back, data, "writes {pieces:?}");
        }
        let empty = StoredGz::new(Vec::new()).unwrap().finish().unwrap();
        let mut back = Vec::new();
        GzDecoder::new(&empty[..]).read_to_end(&mut back).unwrap();
        assert!(back.is_empty());
    }
}

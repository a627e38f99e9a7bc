//! A chunk's payload: records framed as `u32 length (LE) + bytes`, then compressed.
//!
//! The writer frames and compresses a payload here; the reader checks the checksum,
//! decompresses under a size limit and splits the records into a [`Chunk`]. No I/O.

use super::header::{ChunkHeader, Compressor};
use std::io::{self, Read, Write};

/// The records of one decoded chunk, held in one buffer.
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    data: Vec<u8>,
    /// `(start, end)` of each record in `data`.
    spans: Vec<(usize, usize)>,
}

impl Chunk {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the chunk holds no record.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Record `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.spans.get(i).map(|&(s, e)| &self.data[s..e])
    }

    /// The records in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.spans.iter().map(|&(s, e)| &self.data[s..e])
    }

    /// Copies the records out.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

/// Appends the framing of one record (`u32` LE length, then the bytes) to `payload`.
/// The caller guarantees `record.len() <= u32::MAX`.
pub(crate) fn frame_record(payload: &mut Vec<u8>, record: &[u8]) {
    debug_assert!(u32::try_from(record.len()).is_ok());
    payload.extend_from_slice(&(record.len() as u32).to_le_bytes());
    payload.extend_from_slice(record);
}

/// Compresses an uncompressed payload into `out` (cleared first).
pub(crate) fn compress(payload: &[u8], compressor: Compressor, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    match compressor {
        Compressor::None => out.extend_from_slice(payload),
        Compressor::Snappy => {
            let mut enc = snap::write::FrameEncoder::new(&mut *out);
            enc.write_all(payload)?;
            enc.flush()?;
        }
        Compressor::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(&mut *out, flate2::Compression::default());
            enc.write_all(payload)?;
            enc.finish()?;
        }
    }
    Ok(())
}

/// Checks, decompresses and splits a chunk payload read from a file into `out`, reusing
/// `out`'s buffers (and, for uncompressed chunks, swapping `stored` with them).
///
/// `max_decoded` bounds the decompressed size (a gzip or Snappy payload can expand without
/// limit). On failure `out` is left empty and the reason is returned; the caller adds the
/// file, chunk and offset.
pub(crate) fn decode_into(
    header: &ChunkHeader,
    stored: &mut Vec<u8>,
    max_decoded: usize,
    out: &mut Chunk,
) -> Result<(), String> {
    out.data.clear();
    out.spans.clear();
    let r = decode_data(header, stored, max_decoded, &mut out.data)
        .and_then(|()| split(&out.data, header.num_records, &mut out.spans));
    if r.is_err() {
        out.data.clear();
        out.spans.clear();
    }
    r
}

/// Checks, decompresses and splits a chunk payload into a new [`Chunk`].
#[cfg(test)]
fn decode(header: &ChunkHeader, mut stored: Vec<u8>, max_decoded: usize) -> Result<Chunk, String> {
    let mut out = Chunk::default();
    decode_into(header, &mut stored, max_decoded, &mut out)?;
    Ok(out)
}

fn decode_data(
    header: &ChunkHeader,
    stored: &mut Vec<u8>,
    max_decoded: usize,
    data: &mut Vec<u8>,
) -> Result<(), String> {
    let actual = crc32fast::hash(stored);
    if actual != header.checksum {
        return Err(format!(
            "checksum mismatch: header has {:#010x}, payload of {} bytes has {:#010x}",
            header.checksum,
            stored.len(),
            actual
        ));
    }
    let compressor =
        header.compressor().ok_or_else(|| format!("unknown compressor code {}", header.compressor_code))?;
    match compressor {
        Compressor::None => {
            std::mem::swap(stored, data);
            Ok(())
        }
        Compressor::Snappy => decompress(snap::read::FrameDecoder::new(&stored[..]), max_decoded, "snappy", data),
        Compressor::Gzip => decompress(flate2::read::MultiGzDecoder::new(&stored[..]), max_decoded, "gzip", data),
    }
}

fn decompress(src: impl Read, max_decoded: usize, what: &str, out: &mut Vec<u8>) -> Result<(), String> {
    let limit = u64::try_from(max_decoded).unwrap_or(u64::MAX).saturating_add(1);
    src.take(limit).read_to_end(out).map_err(|e| format!("{what} payload does not decompress: {e}"))?;
    if out.len() > max_decoded {
        return Err(format!("{what} payload decompresses to more than the limit of {max_decoded} bytes"));
    }
    Ok(())
}

/// Splits an uncompressed payload into exactly `num_records` framed records.
fn split(data: &[u8], num_records: u32, spans: &mut Vec<(usize, usize)>) -> Result<(), String> {
    let n = num_records as usize;
    // Every record takes at least its 4-byte length, so this bounds the allocation below.
    if n > data.len() / 4 {
        return Err(format!("header claims {n} records but the uncompressed payload has only {} bytes", data.len()));
    }
    spans.reserve(n);
    let mut pos = 0usize;
    for i in 0..n {
        let Some(len_bytes) = data.get(pos..pos + 4) else {
            return Err(format!("record {i}: payload ends at byte {pos} inside its length field"));
        };
        let len = u32::from_le_bytes(len_bytes.try_into().expect("4 bytes")) as usize;
        let start = pos + 4;
        let left = data.len() - start;
        if len > left {
            return Err(format!("record {i}: length {len} at payload byte {pos} exceeds the {left} bytes left"));
        }
        spans.push((start, start + len));
        pos = start + len;
    }
    if pos != data.len() {
        return Err(format!("{} trailing bytes after the last of {n} records", data.len() - pos));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload_of(records: &[&[u8]]) -> Vec<u8> {
        let mut p = Vec::new();
        for r in records {
            frame_record(&mut p, r);
        }
        p
    }

    fn header_for(compressed: &[u8], c: Compressor, n: u32) -> ChunkHeader {
        ChunkHeader {
            checksum: crc32fast::hash(compressed),
            compressor_code: c.code(),
            payload_len: compressed.len() as u32,
            num_records: n,
        }
    }

    #[test]
    fn round_trip_each_compressor() {
        let records: [&[u8]; 4] = [b"hello", b"", b"world!", &[0u8; 1000]];
        let payload = payload_of(&records);
        for c in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
            let mut out = Vec::new();
            compress(&payload, c, &mut out).unwrap();
            let h = header_for(&out, c, 4);
            let chunk = decode(&h, out, 1 << 20).unwrap();
            assert_eq!(chunk.len(), 4);
            assert_eq!(chunk.to_vecs(), records.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn snappy_uses_the_framing_format() {
        let mut out = Vec::new();
        compress(&payload_of(&[b"abc"]), Compressor::Snappy, &mut out).unwrap();
        // Stream identifier chunk: type 0xff, length 6, "sNaPpY".
        assert_eq!(&out[..10], b"\xff\x06\x00\x00sNaPpY");
    }

    #[test]
    fn checksum_mismatch_is_reported() {
        let p = payload_of(&[b"abc"]);
        let mut h = header_for(&p, Compressor::None, 1);
        h.checksum ^= 1;
        let e = decode(&h, p, 1 << 20).unwrap_err();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn absurd_record_count_and_length_are_rejected() {
        let p = payload_of(&[b"abc"]);
        let h = header_for(&p, Compressor::None, u32::MAX);
        assert!(decode(&h, p.clone(), 1 << 20).unwrap_err().contains("claims"));

        let mut bad = p.clone();
        bad[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let h = header_for(&bad, Compressor::None, 1);
        assert!(decode(&h, bad, 1 << 20).unwrap_err().contains("exceeds"));

        let mut trailing = p;
        trailing.push(0);
        let h = header_for(&trailing, Compressor::None, 1);
        assert!(decode(&h, trailing, 1 << 20).unwrap_err().contains("trailing"));
    }

    #[test]
    fn decompression_is_capped() {
        let p = payload_of(&[&[0u8; 100_000]]);
        for c in [Compressor::Snappy, Compressor::Gzip] {
            let mut out = Vec::new();
            compress(&p, c, &mut out).unwrap();
            let h = header_for(&out, c, 1);
            let e = decode(&h, out, 50_000).unwrap_err();
            assert!(e.contains("limit"), "{e}");
        }
    }

    #[test]
    fn garbage_compressed_payload_is_an_error() {
        let junk = b"definitely not compressed".to_vec();
        for c in [Compressor::Snappy, Compressor::Gzip] {
            let h = header_for(&junk, c, 1);
            let e = decode(&h, junk.clone(), 1 << 20).unwrap_err();
            assert!(e.contains("does not decompress"), "{e}");
        }
    }
}

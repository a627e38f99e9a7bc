//! The write-ahead log format of [`FileStore`](super::FileStore).
//!
//! The log is a series of *segment* files `wal-<first seq, 20 digits>.log`; the number is a
//! lower bound of the sequence numbers inside and an upper bound (+1) of those in the
//! previous segment. A segment is a series of records:
//!
//! ```text
//! +-----------+---------------+---------------+------------------------------+
//! | len: u32  | payload crc32 | header crc32  | payload: JSON array of       |
//! | LE        | u32 LE        | of bytes 0..8 | the records of one submit,   |
//! |           |               |               | as the codec encodes them    |
//! +-----------+---------------+---------------+------------------------------+
//! ```
//!
//! One log record holds all the records of one [`submit`](super::Store::submit), so an
//! operation's records survive a crash together or not at all.
//!
//! Segments are *preallocated*: filled with zeros ahead of the write position, so that
//! appending a record does not change the file size and `fdatasync` needs no journal
//! commit (several times faster on ext4). A run of zeros where a record header should be
//! is therefore the normal end of the log (a header is never all zeros: its checksum of
//! eight zero bytes is not zero), whatever bytes the codec's payloads hold.
//!
//! Reading tells a *torn tail* (the end of the last segment, written but not yet synced
//! when the machine stopped, hence never acknowledged) from *corruption* (damage to data
//! that was synced). In the last segment, a bad record is torn, and discarded, when:
//!
//! - the file ends inside it (incomplete header, or fewer payload bytes than announced);
//! - its header is valid but its payload checksum is not, and only zeros follow it;
//! - its header is invalid and only zeros follow the header.
//!
//! Anything else is corruption, an error naming the file and offset: e.g. a bad checksum
//! followed by more records. (A power cut that tears a multi-page write in its middle and
//! persists later pages of that same unacknowledged write would also be reported here; no
//! acknowledged change is lost then, but an operator must look, and the error says where.)

use std::path::{Path, PathBuf};

use super::Codec;
use warren_base::error::{Error, Result};

/// Bytes of a record header.
pub(crate) const HEADER_LEN: usize = 12;

/// Name of the segment whose first change has sequence number `first_seq` (or later).
pub(crate) fn segment_name(first_seq: u64) -> String {
    format!("wal-{first_seq:020}.log")
}

/// The first sequence number encoded in a segment file name.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segments of a store directory, oldest first.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        if let Some(first) = entry.file_name().to_str().and_then(parse_segment_name) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Appends one log record holding `records` to `out`.
pub(crate) fn encode_record<C: Codec>(records: &[C::Record], out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    C::encode_records(records, out)?;
    let payload_len = out.len() - start - HEADER_LEN;
    let len = u32::try_from(payload_len)
        .map_err(|_| Error::InvalidArgument(format!("a log record of {payload_len} bytes is too large")))?;
    let payload_crc = crc32fast::hash(&out[start + HEADER_LEN..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32fast::hash(&out[start..start + 8]);
    out[start + 8..start + 12].copy_from_slice(&header_crc.to_le_bytes());
    Ok(())
}

/// One log record read back.
pub(crate) struct Record<R> {
    /// Byte offset of the log record in its file.
    pub(crate) offset: u64,
    /// The records of the submit it holds.
    pub(crate) records: Vec<R>,
}

/// What a segment holds.
pub(crate) struct Scan<R> {
    /// The valid log records, in order.
    pub(crate) records: Vec<Record<R>>,
    /// Length of the valid prefix of the file: where the next record goes.
    pub(crate) valid_len: u64,
    /// Why the bytes after `valid_len` were discarded, if they are not just zeros.
    pub(crate) torn: Option<String>,
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == 0)
}

/// Reads the records of segment `path` whose bytes are `data`. A torn tail is accepted
/// only if `is_last` (the segment being written when the store stopped).
pub(crate) fn scan<C: Codec>(path: &Path, data: &[u8], is_last: bool) -> Result<Scan<C::Record>> {
    let mut records = Vec::new();
    let mut off = 0usize;
    let corrupt =
        |offset: usize, reason: String| Error::StoreCorrupt { path: path.to_path_buf(), offset: offset as u64, reason };
    let torn = |records, offset: usize, reason: String| {
        if is_last {
            Ok(Scan { records, valid_len: offset as u64, torn: Some(reason) })
        } else {
            Err(corrupt(offset, format!("{reason} in a segment that is not the last")))
        }
    };
    while off < data.len() {
        let rest = &data[off..];
        if all_zero(rest) {
            // Preallocated space: the normal end of the log.
            return Ok(Scan { records, valid_len: off as u64, torn: None });
        }
        if rest.len() < HEADER_LEN {
            return torn(records, off, format!("incomplete record header ({} bytes)", rest.len()));
        }
        if crc32fast::hash(&rest[..8]) != u32_at(rest, 8) {
            if all_zero(&rest[HEADER_LEN..]) {
                return torn(records, off, "partly written record header".into());
            }
            return Err(corrupt(off, "record header checksum mismatch".into()));
        }
        let len = u32_at(rest, 0) as usize;
        if rest.len() - HEADER_LEN < len {
            return torn(
                records,
                off,
                format!("incomplete record ({} of {len} payload bytes)", rest.len() - HEADER_LEN),
            );
        }
        let payload = &rest[HEADER_LEN..HEADER_LEN + len];
        if crc32fast::hash(payload) != u32_at(rest, 4) {
            if all_zero(&rest[HEADER_LEN + len..]) {
                return torn(records, off, "payload checksum mismatch in the last record".into());
            }
            return Err(corrupt(off, "record payload checksum mismatch".into()));
        }
        let decoded = C::decode_records(payload).map_err(|e| corrupt(off, format!("undecodable record: {e}")))?;
        records.push(Record { offset: off as u64, records: decoded });
        off += HEADER_LEN + len;
    }
    Ok(Scan { records, valid_len: off as u64, torn: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{Kv, Put, puts};

    fn change(seq: u64) -> Put {
        puts(seq, 1).remove(0)
    }

    fn encode_record(records: &[Put], out: &mut Vec<u8>) -> Result<()> {
        super::encode_record::<Kv>(records, out)
    }

    fn scan(path: &Path, data: &[u8], is_last: bool) -> Result<Scan<Put>> {
        super::scan::<Kv>(path, data, is_last)
    }

    fn log(n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut buf = Vec::new();
        let mut starts = Vec::new();
        for seq in 1..=n {
            starts.push(buf.len());
            encode_record(&[change(seq)], &mut buf).unwrap();
        }
        (buf, starts)
    }

    fn seqs(scan: &Scan<Put>) -> Vec<u64> {
        scan.records.iter().flat_map(|r| r.records.iter().map(|c| c.seq)).collect()
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_name(42), "wal-00000000000000000042.log");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(42));
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_segment_name("wal-42.log"), None);
        assert_eq!(parse_segment_name("snapshot.json.gz"), None);
    }

    #[test]
    fn reads_back_what_was_written() {
        let (buf, starts) = log(5);
        let scan = scan(Path::new("x"), &buf, true).unwrap();
        assert_eq!(seqs(&scan), vec![1, 2, 3, 4, 5]);
        assert_eq!(scan.valid_len, buf.len() as u64);
        assert!(scan.torn.is_none());
        let offsets: Vec<u64> = scan.records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, starts.iter().map(|s| *s as u64).collect::<Vec<_>>());
    }

    #[test]
    fn multi_change_records_stay_together() {
        let mut buf = Vec::new();
        encode_record(&[change(1), change(2)], &mut buf).unwrap();
        let whole = buf.len();
        encode_record(&[change(3)], &mut buf).unwrap();
        let read = scan(Path::new("x"), &buf, true).unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.records[0].records.len(), 2);
        let cut = scan(Path::new("x"), &buf[..whole - 1], true).unwrap();
        assert!(cut.records.is_empty(), "a torn record loses all its changes");
    }

    #[test]
    fn every_truncation_of_the_last_record_is_a_torn_tail() {
        let (buf, starts) = log(4);
        let last = *starts.last().unwrap();
        for cut in last..buf.len() {
            let read = scan(Path::new("x"), &buf[..cut], true).unwrap();
            assert_eq!(seqs(&read), vec![1, 2, 3], "cut at {cut}");
            assert_eq!(read.valid_len, last as u64);
            assert_eq!(read.torn.is_some(), cut > last);
        }
    }

    #[test]
    fn torn_tail_in_an_older_segment_is_corruption() {
        let (buf, _) = log(2);
        let err = scan(Path::new("old.log"), &buf[..buf.len() - 1], false).err().unwrap();
        assert!(matches!(err, Error::StoreCorrupt { .. }), "{err}");
    }

    #[test]
    fn zeros_after_the_last_record_are_preallocated_space() {
        let (mut buf, _) = log(2);
        let end = buf.len();
        buf.extend_from_slice(&[0; 100]);
        let read = scan(Path::new("x"), &buf, true).unwrap();
        assert_eq!(seqs(&read), vec![1, 2]);
        assert_eq!(read.valid_len, end as u64);
        assert!(read.torn.is_none());
        // Also in an older segment (compaction rotates a preallocated segment).
        assert!(scan(Path::new("x"), &buf, false).is_ok());
    }

    #[test]
    fn a_record_partly_written_into_preallocated_space_is_torn() {
        let (full, starts) = log(4);
        let last = starts[3];
        // The record's bytes from `cut` on never reached the disk: zeros instead.
        for cut in last + 1..full.len() {
            let mut buf = full.clone();
            buf[cut..].fill(0);
            buf.extend_from_slice(&[0; 64]);
            let read = scan(Path::new("x"), &buf, true).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert_eq!(seqs(&read), vec![1, 2, 3], "cut at {cut}");
            assert_eq!(read.valid_len, last as u64);
            assert!(read.torn.is_some(), "cut at {cut}");
        }
    }

    #[test]
    fn bad_checksum_of_the_final_record_is_torn() {
        let (mut buf, _) = log(3);
        let n = buf.len();
        buf[n - 2] ^= 0x55;
        let scan = scan(Path::new("x"), &buf, true).unwrap();
        assert_eq!(seqs(&scan), vec![1, 2]);
    }

    #[test]
    fn damage_in_the_middle_is_an_error_naming_file_and_offset() {
        let (buf, starts) = log(5);
        // A flipped payload byte, and a flipped length byte, in record 2 (of 5).
        for at in [starts[1] + HEADER_LEN + 3, starts[1] + 1] {
            let mut bad = buf.clone();
            bad[at] ^= 0x01;
            let err = scan(Path::new("/d/wal.log"), &bad, true).err().expect("corruption detected");
            match &err {
                Error::StoreCorrupt { path, offset, .. } => {
                    assert_eq!(path, Path::new("/d/wal.log"));
                    assert_eq!(*offset, starts[1] as u64);
                }
                other => panic!("unexpected error {other}"),
            }
            let msg = err.to_string();
            assert!(msg.contains("/d/wal.log") && msg.contains(&starts[1].to_string()), "{msg}");
        }
    }
}

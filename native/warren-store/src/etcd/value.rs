//! The bytes of one etcd log key, and how a flush is cut into keys: pure functions, no I/O.
//!
//! A flush takes the submits queued since the last one, each a codec-encoded payload
//! holding the records of one [`submit`](crate::Store::submit). It is written as one
//! key `log/<last seq>` in one transaction, whatever the number of submits (so etcd's
//! `--max-txn-ops` never matters: one put per transaction). Only when the submits together
//! exceed the byte budget of a request (etcd's `--max-request-bytes`) is the flush cut into
//! several keys, one transaction each, and then only between submits: the records of one
//! submit always share a key, hence a transaction.
//!
//! A value is a tag byte and a body: tag 0, the body as is; tag 1, the body gzipped (bodies
//! over [`COMPRESS_LOG_BYTES`]). The body is a series of frames, `len: u32 LE | payload`,
//! one per submit.

use std::io::{Read, Write};
use std::ops::Range;

use warren_base::error::{Error, Result};

/// Log values whose body is larger than this (bytes) are stored gzipped.
pub const COMPRESS_LOG_BYTES: usize = 64 * 1024;

const PLAIN: u8 = 0;
const GZIPPED: u8 = 1;

/// The records of one submit, encoded, waiting to be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Sequence number of its first record.
    pub(crate) first: u64,
    /// Sequence number of its last record.
    pub(crate) last: u64,
    /// The codec's encoding of its records.
    pub(crate) payload: Vec<u8>,
}

/// Bytes an entry takes in a value body.
fn framed_len(e: &Entry) -> usize {
    4 + e.payload.len()
}

/// Cuts `entries` into runs of consecutive entries whose bodies stay within `budget`
/// bytes; an entry larger than the budget gets a run of its own (a submit is never
/// split). One run is one key, one transaction.
pub(crate) fn pieces(entries: &[Entry], budget: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, e) in entries.iter().enumerate() {
        let n = framed_len(e);
        if i > start && bytes + n > budget {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += n;
    }
    if start < entries.len() {
        out.push(start..entries.len());
    }
    out
}

/// The value of the key holding `entries`.
pub(crate) fn encode(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(entries.iter().map(framed_len).sum());
    for e in entries {
        let len = u32::try_from(e.payload.len())
            .map_err(|_| Error::InvalidArgument(format!("a submit of {} bytes is too large", e.payload.len())))?;
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&e.payload);
    }
    if body.len() <= COMPRESS_LOG_BYTES {
        body.insert(0, PLAIN);
        return Ok(body);
    }
    let mut enc = flate2::write::GzEncoder::new(vec![GZIPPED], flate2::Compression::fast());
    enc.write_all(&body).and_then(|()| enc.finish()).map_err(|e| Error::io("gzip-compressing a log value for etcd", e))
}

/// The payloads (one per submit) of a value written by [`encode`].
pub(crate) fn decode(value: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
    let body = match value.split_first() {
        Some((&PLAIN, rest)) => rest.to_vec(),
        Some((&GZIPPED, rest)) => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(rest).read_to_end(&mut out).map_err(|e| format!("bad gzip stream: {e}"))?;
            out
        }
        Some((tag, _)) => return Err(format!("unknown value tag {tag}")),
        None => return Err("empty value".into()),
    };
    let mut payloads = Vec::new();
    let mut rest = &body[..];
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(format!("a frame header cut short ({} bytes)", rest.len()));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(format!("a frame of {len} bytes with {} left", tail.len()));
        }
        payloads.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    Ok(payloads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(first: u64, n: u64, bytes: usize) -> Entry {
        Entry { first, last: first + n - 1, payload: vec![b'x'; bytes] }
    }

    #[test]
    fn a_flush_within_the_budget_is_one_piece_however_many_submits() {
        let entries: Vec<Entry> = (0..500).map(|i| entry(i * 3 + 1, 3, 40)).collect();
        assert_eq!(pieces(&entries, 1 << 20), vec![0..500], "500 submits (more than --max-txn-ops) in one key");
        assert!(pieces(&[], 100).is_empty());
    }

    #[test]
    fn pieces_cut_between_submits_and_stay_within_the_budget() {
        let entries: Vec<Entry> = (0..50).map(|i| entry(i + 1, 1, 10 + (i as usize * 7) % 30)).collect();
        let budget = 100;
        let ps = pieces(&entries, budget);
        // Consecutive, covering, each within the budget (no entry here exceeds it alone).
        assert_eq!(ps.first().unwrap().start, 0);
        assert_eq!(ps.last().unwrap().end, 50);
        assert!(ps.windows(2).all(|w| w[0].end == w[1].start));
        for p in &ps {
            assert!(entries[p.clone()].iter().map(framed_len).sum::<usize>() <= budget, "{p:?}");
        }
        // Greedy: adding the next entry would have exceeded the budget.
        for w in ps.windows(2) {
            let with_next: usize = entries[w[0].start..=w[0].end].iter().map(framed_len).sum();
            assert!(with_next > budget);
        }
    }

    #[test]
    fn an_entry_over_the_budget_gets_a_piece_of_its_own() {
        let entries = vec![entry(1, 1, 10), entry(2, 5, 500), entry(7, 1, 10), entry(8, 1, 10)];
        assert_eq!(pieces(&entries, 100), vec![0..1, 1..2, 2..4]);
    }

    #[test]
    fn values_round_trip_plain_and_gzipped() {
        for (n, bytes) in [(1, 5), (3, 0), (40, 100), (10, 20_000)] {
            let entries: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    first: i + 1,
                    last: i + 1,
                    payload: (0..bytes).map(|b| (b % 251) as u8 ^ i as u8).collect(),
                })
                .collect();
            let value = encode(&entries).unwrap();
            let body: usize = entries.iter().map(framed_len).sum();
            assert_eq!(value[0], if body > COMPRESS_LOG_BYTES { GZIPPED } else { PLAIN }, "{n} x {bytes}");
            let back = decode(&value).unwrap();
            assert_eq!(back, entries.iter().map(|e| e.payload.clone()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        let value = encode(&[entry(1, 1, 30), entry(2, 1, 30)]).unwrap();
        for cut in 0..value.len() - 1 {
            let r = decode(&value[..cut]);
            // Every strict prefix either fails or (cut at a frame boundary) holds fewer frames.
            assert!(r.as_ref().map_or(true, |p| p.len() < 2), "cut {cut}: {r:?}");
        }
        assert!(decode(&[7, 1, 2]).unwrap_err().contains("tag 7"));
        let mut gz = encode(&(0..2000).map(|i| entry(i + 1, 1, 100)).collect::<Vec<_>>()).unwrap();
        let mid = gz.len() / 2;
        gz[mid] ^= 0xff;
        assert!(decode(&gz).is_err());
    }
}

//! RecordIO: round trips, bytes built independently of the writer, dmlc `.rec` files, and
//! bad input (every error names the file, chunk and offset; nothing panics).
//!
//! Test names start with `recordio_` so that `cargo test -p warren recordio` selects them.

use proptest::prelude::*;
use std::io::{Cursor, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use warren::error::Error;
use warren::recordio::{self, Compressor, DmlcReader, Format, Reader, Writer, WriterOptions};

const ALL: [Compressor; 3] = [Compressor::None, Compressor::Snappy, Compressor::Gzip];

/// A fresh path under the system temp directory (removed when dropped).
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("warren-recordio-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempPath(dir.join(name))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn write_mem(records: &[Vec<u8>], compressor: Compressor, max_chunk_bytes: usize) -> Vec<u8> {
    let opts = WriterOptions { max_chunk_bytes, compressor };
    let mut w = Writer::new(Vec::new(), "mem", opts);
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap()
}

fn read_mem(bytes: &[u8]) -> warren::error::Result<Vec<Vec<u8>>> {
    Reader::new(Cursor::new(bytes), "mem")?.records().collect()
}

fn sample_records(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 5 {
            0 => Vec::new(),
            1 => format!("record number {i}").into_bytes(),
            2 => vec![(i % 251) as u8; i % 3000],
            3 => (0..(i % 97)).map(|k| (k * 31 + i) as u8).collect(),
            _ => b"\x04\x03\x02\x01 magic inside".to_vec(),
        })
        .collect()
}

/// A chunk built by hand, not by the crate: header fields, then `payload` as stored.
fn hand_chunk(compressor_code: u32, stored: &[u8], num_records: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0x0102_0304u32.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(stored).to_le_bytes());
    out.extend_from_slice(&compressor_code.to_le_bytes());
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    out.extend_from_slice(&num_records.to_le_bytes());
    out.extend_from_slice(stored);
    out
}

fn hand_payload(records: &[&[u8]]) -> Vec<u8> {
    let mut p = Vec::new();
    for r in records {
        p.extend_from_slice(&(r.len() as u32).to_le_bytes());
        p.extend_from_slice(r);
    }
    p
}

fn expect_corrupt(r: warren::error::Result<impl std::fmt::Debug>) -> (String, u64, u64, String) {
    match r {
        Err(Error::Corrupt { file, chunk, offset, reason }) => (file, chunk, offset, reason),
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

#[test]
fn recordio_round_trip_every_compressor() {
    let records = sample_records(500);
    for c in ALL {
        for max in [1, 100, 10_000, 1 << 25] {
            let bytes = write_mem(&records, c, max);
            assert_eq!(read_mem(&bytes).unwrap(), records, "{c} max {max}");
        }
    }
}

#[test]
fn recordio_empty_records_and_empty_file() {
    for c in ALL {
        let empties = vec![Vec::new(); 7];
        let bytes = write_mem(&empties, c, 0);
        let r = Reader::new(Cursor::new(&bytes), "mem").unwrap();
        // Paddle's rule counts record bytes only: empty records never fill a chunk, even
        // with a limit of 0.
        assert_eq!(r.index().num_chunks(), 1);
        assert_eq!(r.records().collect::<Result<Vec<_>, _>>().unwrap(), empties);

        // ... while once a chunk holds a byte over the limit, every record starts a new one.
        let mixed = vec![b"a".to_vec(), Vec::new(), b"b".to_vec(), Vec::new()];
        let bytes = write_mem(&mixed, c, 0);
        assert_eq!(Reader::new(Cursor::new(&bytes), "mem").unwrap().index().num_chunks(), 4);
        assert_eq!(read_mem(&bytes).unwrap(), mixed);
    }
    assert!(write_mem(&[], Compressor::Snappy, 100).is_empty());
    assert_eq!(read_mem(&[]).unwrap(), Vec::<Vec<u8>>::new());
}

#[test]
fn recordio_many_chunks_ranges_and_direct_chunk_reads() {
    let records = sample_records(3000);
    let bytes = write_mem(&records, Compressor::Snappy, 4096);
    let mut r = Reader::new(Cursor::new(&bytes), "mem").unwrap();
    let idx = r.index().clone();
    assert!(idx.num_chunks() > 100, "{} chunks", idx.num_chunks());
    assert_eq!(idx.num_records(), 3000);
    for ci in [0, 1, idx.num_chunks() / 2, idx.num_chunks() - 1] {
        let info = idx.chunks()[ci];
        let chunk = r.read_chunk(ci).unwrap();
        assert_eq!(chunk.len() as u64, info.num_records());
        let first = info.first_record as usize;
        assert_eq!(chunk.to_vecs(), records[first..first + chunk.len()]);
    }
    for (start, end) in [(0, 0), (0, 1), (17, 2345), (2999, 3000), (2500, 99_999), (5000, 6000)] {
        let r = Reader::new(Cursor::new(&bytes), "mem").unwrap();
        let got: Vec<_> = r.records_range(start..end).collect::<Result<_, _>>().unwrap();
        let (s, e) = (start.min(3000) as usize, end.min(3000) as usize);
        assert_eq!(got, records[s.min(e)..e], "{start}..{end}");
    }
    assert!(r.read_chunk(idx.num_chunks()).is_err());
}

#[test]
fn recordio_files_and_format_detection() {
    let records = sample_records(50);
    let path = TempPath::new("a.recordio");
    let mut w = Writer::create(&path.0, WriterOptions::default()).unwrap();
    for r in &records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(Format::of_file(&path.0).unwrap(), Format::Paddle);
    let got: Vec<_> = recordio::open(&path.0).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, records);
    assert_eq!(Reader::open(&path.0).unwrap().verify().unwrap(), 50);
}

/// Bytes built independently of the writer are read, and for compressor none the writer
/// produces exactly them.
#[test]
fn recordio_matches_independently_built_bytes() {
    let a: [&[u8]; 3] = [b"alpha", b"", b"\x00\x01\x02"];
    let b: [&[u8]; 1] = [b"second chunk"];
    let mut expected = hand_chunk(0, &hand_payload(&a), 3);
    expected.extend(hand_chunk(0, &hand_payload(&b), 1));

    // Record bytes of chunk one: 5 + 0 + 3 = 8; adding 12 more would exceed 10.
    let all: Vec<Vec<u8>> = a.iter().chain(b.iter()).map(|r| r.to_vec()).collect();
    assert_eq!(write_mem(&all, Compressor::None, 10), expected);
    assert_eq!(read_mem(&expected).unwrap(), all);

    // Snappy (framing format) and gzip payloads made directly with the codec crates.
    let payload = hand_payload(&a);
    let mut snappy = snap::write::FrameEncoder::new(Vec::new());
    snappy.write_all(&payload).unwrap();
    let snappy = snappy.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&payload).unwrap();
    let gz = gz.finish().unwrap();
    let mut file = hand_chunk(1, &snappy, 3);
    file.extend(hand_chunk(2, &gz, 3));
    let want: Vec<Vec<u8>> = a.iter().chain(a.iter()).map(|r| r.to_vec()).collect();
    assert_eq!(read_mem(&file).unwrap(), want);
}

#[test]
fn recordio_corrupt_checksum_names_file_chunk_offset() {
    for c in ALL {
        let records = sample_records(200);
        let mut bytes = write_mem(&records, c, 2000);
        let idx = Reader::new(Cursor::new(&bytes), "mem").unwrap().index().clone();
        let victim = idx.chunks()[3];
        bytes[victim.payload_offset() as usize + 2] ^= 0x40;
        let mut r = Reader::new(Cursor::new(&bytes), "data/x.recordio").unwrap();
        let (file, chunk, offset, reason) = expect_corrupt(r.verify());
        assert_eq!((file.as_str(), chunk, offset), ("data/x.recordio", 3, victim.offset));
        assert!(reason.contains("checksum mismatch"), "{reason}");
        // Iterating yields the good records of chunks 0..3, then the error, then stops.
        let r = Reader::new(Cursor::new(&bytes), "data/x.recordio").unwrap();
        let items: Vec<_> = r.records().collect();
        let good = victim.first_record as usize;
        assert_eq!(items.len(), good + 1);
        assert!(items[..good].iter().all(|x| x.is_ok()));
        let msg = items[good].as_ref().unwrap_err().to_string();
        assert!(msg.contains("data/x.recordio") && msg.contains("chunk 3"), "{msg}");
        assert!(msg.contains(&format!("byte offset {}", victim.offset)), "{msg}");
    }
}

#[test]
fn recordio_truncated_header_and_payload() {
    let bytes = write_mem(&sample_records(100), Compressor::Gzip, 1000);
    let idx = Reader::new(Cursor::new(&bytes), "mem").unwrap().index().clone();
    let last = *idx.chunks().last().unwrap();
    let n = idx.num_chunks() as u64 - 1;
    for cut in [1, 19] {
        let (_, chunk, offset, reason) =
            expect_corrupt(Reader::new(Cursor::new(&bytes[..last.offset as usize + cut]), "t"));
        assert_eq!((chunk, offset), (n, last.offset));
        assert!(reason.contains("truncated header"), "{reason}");
    }
    for cut in [20, 21, last.total_len() as usize - 1] {
        let (_, chunk, offset, reason) =
            expect_corrupt(Reader::new(Cursor::new(&bytes[..last.offset as usize + cut]), "t"));
        assert_eq!((chunk, offset), (n, last.offset));
        assert!(reason.contains("truncated payload"), "{reason}");
    }
}

#[test]
fn recordio_absurd_length_fields() {
    let payload = hand_payload(&[b"abc", b"defg"]);
    // payload size far past the end of the file
    let mut f = hand_chunk(0, &payload, 2);
    f[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, _, _, reason) = expect_corrupt(Reader::new(Cursor::new(&f), "t"));
    assert!(reason.contains("truncated payload"), "{reason}");
    // record count the payload cannot hold, for each compressor
    let f = hand_chunk(0, &payload, u32::MAX);
    let (_, _, _, reason) = expect_corrupt(Reader::new(Cursor::new(&f), "t"));
    assert!(reason.contains("claims"), "{reason}");
    let mut snappy = snap::write::FrameEncoder::new(Vec::new());
    snappy.write_all(&payload).unwrap();
    let f = hand_chunk(1, &snappy.into_inner().unwrap(), 1 << 30);
    let (_, _, _, reason) = expect_corrupt(read_mem(&f));
    assert!(reason.contains("claims"), "{reason}");
    // record length inside a payload with a valid checksum
    let mut bad = payload.clone();
    bad[..4].copy_from_slice(&0xfff0_0000u32.to_le_bytes());
    let (_, _, _, reason) = expect_corrupt(read_mem(&hand_chunk(0, &bad, 2)));
    assert!(reason.contains("record 0") && reason.contains("exceeds"), "{reason}");
    // unknown compressor
    let (_, _, _, reason) = expect_corrupt(Reader::new(Cursor::new(&hand_chunk(7, &payload, 2)), "t"));
    assert!(reason.contains("unknown compressor code 7"), "{reason}");
    // the reader's payload limit
    let f = hand_chunk(0, &payload, 2);
    let r = Reader::new(Cursor::new(&f), "t").unwrap().with_max_chunk_payload(8);
    let (_, _, _, reason) = expect_corrupt(r.records().collect::<Result<Vec<_>, _>>());
    assert!(reason.contains("limit"), "{reason}");
}

#[test]
fn recordio_garbage_files() {
    let garbage = TempPath::new("garbage.bin");
    std::fs::write(&garbage.0, b"GIF89a this is not a record file").unwrap();
    let msg = recordio::open(&garbage.0).err().expect("garbage rejected").to_string();
    assert!(msg.contains("garbage.bin") && msg.contains("not a RecordIO file"), "{msg}");
    let (_, chunk, offset, reason) = expect_corrupt(Reader::open(&garbage.0));
    assert_eq!((chunk, offset), (0, 0));
    assert!(reason.contains("bad magic"), "{reason}");

    // A good chunk followed by junk: the junk is named as chunk 1 at its offset.
    let mut f = write_mem(&sample_records(5), Compressor::None, 1 << 20);
    let good_len = f.len() as u64;
    f.extend_from_slice(&[0xab; 40]);
    let (_, chunk, offset, _) = expect_corrupt(Reader::new(Cursor::new(&f), "t"));
    assert_eq!((chunk, offset), (1, good_len));

    let tiny = TempPath::new("tiny.bin");
    std::fs::write(&tiny.0, b"\x04\x03").unwrap();
    assert!(recordio::open(&tiny.0).is_err());
}

// ---------------------------------------------------------------------------------------
// dmlc RecordIO

const DMLC_MAGIC: u32 = 0xced7_230a;

/// A dmlc writer written for the tests from the format description: split the record around
/// every 4-aligned occurrence of the magic, drop the magic, flag the parts, pad to 4.
fn dmlc_encode(records: &[Vec<u8>]) -> Vec<u8> {
    let magic = DMLC_MAGIC.to_le_bytes();
    let mut out = Vec::new();
    let part = |out: &mut Vec<u8>, cflag: u32, data: &[u8]| {
        out.extend_from_slice(&magic);
        out.extend_from_slice(&((cflag << 29) | data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        out.resize(out.len() + (4 - data.len() % 4) % 4, 0);
    };
    for r in records {
        let mut start = 0;
        let mut i = 0;
        while i + 4 <= r.len() {
            if r[i..i + 4] == magic {
                part(&mut out, if start == 0 { 1 } else { 2 }, &r[start..i]);
                start = i + 4;
            }
            i += 4;
        }
        part(&mut out, if start == 0 { 0 } else { 3 }, &r[start..]);
    }
    out
}

fn dmlc_records() -> Vec<Vec<u8>> {
    let m = DMLC_MAGIC.to_le_bytes();
    let cat = |parts: &[&[u8]]| parts.concat();
    vec![
        b"hello".to_vec(),
        Vec::new(),
        b"abcd".to_vec(),
        cat(&[&m]),                                // only the magic
        cat(&[b"1234", &m, b"tail"]),              // aligned magic in the middle
        cat(&[&m, &m, b"xy"]),                     // leading, consecutive magics
        cat(&[b"12345678", &m]),                   // trailing magic
        cat(&[b"1", &m, b"unaligned, not split"]), // unaligned magic is kept inline
        vec![7u8; 1001],
    ]
}

fn read_dmlc(bytes: &[u8]) -> warren::error::Result<Vec<Vec<u8>>> {
    DmlcReader::new(Cursor::new(bytes), "mem.rec", Some(bytes.len() as u64)).collect()
}

#[test]
fn recordio_dmlc_reads_split_records() {
    let records = dmlc_records();
    let bytes = dmlc_encode(&records);
    assert_eq!(read_dmlc(&bytes).unwrap(), records);
    // Unknown length (a pipe) reads the same.
    let got: Vec<_> = DmlcReader::new(Cursor::new(&bytes), "pipe", None).collect::<Result<_, _>>().unwrap();
    assert_eq!(got, records);
    // Through the common interface, detected by magic.
    let path = TempPath::new("x.rec");
    std::fs::write(&path.0, &bytes).unwrap();
    assert_eq!(Format::of_file(&path.0).unwrap(), Format::Dmlc);
    let got: Vec<_> = recordio::open(&path.0).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, records);
}

#[test]
fn recordio_dmlc_hand_built_bytes() {
    // "ab" whole; then "wx" + magic + "yz" split into a start and an end part.
    let mut f = Vec::new();
    for (lrec, data) in [(2u32, &b"ab\0\0"[..]), ((1 << 29) | 4, b"wxwx"), ((3 << 29) | 2, b"yz\0\0")] {
        f.extend_from_slice(&DMLC_MAGIC.to_le_bytes());
        f.extend_from_slice(&lrec.to_le_bytes());
        f.extend_from_slice(data);
    }
    let mut want = b"wxwx".to_vec();
    want.extend_from_slice(&DMLC_MAGIC.to_le_bytes());
    want.extend_from_slice(b"yz");
    assert_eq!(read_dmlc(&f).unwrap(), vec![b"ab".to_vec(), want]);
}

#[test]
fn recordio_dmlc_bad_input() {
    let bytes = dmlc_encode(&dmlc_records());
    // bad magic on the second record (first record "hello": 8 + 8 bytes)
    let mut f = bytes.clone();
    f[16] ^= 0xff;
    let (file, chunk, offset, reason) = expect_corrupt(read_dmlc(&f));
    assert_eq!((file.as_str(), chunk, offset), ("mem.rec", 1, 16));
    assert!(reason.contains("bad magic"), "{reason}");
    // truncated header and truncated part
    let (_, chunk, offset, reason) = expect_corrupt(read_dmlc(&bytes[..19]));
    assert_eq!((chunk, offset), (1, 16));
    assert!(reason.contains("truncated header"), "{reason}");
    let (_, chunk, _, reason) = expect_corrupt(read_dmlc(&bytes[..13]));
    assert_eq!(chunk, 0);
    assert!(reason.contains("truncated part"), "{reason}");
    let got = DmlcReader::new(Cursor::new(&bytes[..13]), "pipe", None).collect::<Result<Vec<_>, _>>();
    assert!(expect_corrupt(got).3.contains("truncated part"));
    // absurd length: 2^29 - 1 in a tiny file
    let mut f = bytes.clone();
    f[4..8].copy_from_slice(&((1u32 << 29) - 1).to_le_bytes());
    assert!(expect_corrupt(read_dmlc(&f)).3.contains("truncated part"));
    let got = DmlcReader::new(Cursor::new(&f), "pipe", None).with_max_record(1 << 20).collect::<Result<Vec<_>, _>>();
    assert!(expect_corrupt(got).3.contains("limit"));
    // continuation flags out of order, invalid flag
    let mut f = bytes.clone();
    f[7] |= 3 << 5; // cflag 3 on a first part
    assert!(expect_corrupt(read_dmlc(&f)).3.contains("without a start part"));
    let mut f = bytes.clone();
    f[7] |= 5 << 5;
    assert!(expect_corrupt(read_dmlc(&f)).3.contains("cflag"));
    // a start part and then the end of the file
    let start_only = dmlc_encode(&[[b"abcd".as_slice(), &DMLC_MAGIC.to_le_bytes()].concat()]);
    let cut = &start_only[..12]; // the start part "abcd" alone
    assert!(expect_corrupt(read_dmlc(cut)).3.contains("inside a multi-part record"));
}

// ---------------------------------------------------------------------------------------
// No panic on any mutation

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1..16usize).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let at = |i: usize| i % bytes.len();
    match m {
        Mutation::Flip(i, b) => {
            let i = at(*i);
            bytes[i] ^= b;
        }
        Mutation::Set(i, b) => {
            let i = at(*i);
            bytes[i] = *b;
        }
        Mutation::Truncate(i) => {
            let i = at(*i);
            bytes.truncate(i);
        }
        Mutation::Insert(i, v) => {
            let i = at(*i);
            bytes.splice(i..i, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let i = at(*i);
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
    }
}

fn small_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..30)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn recordio_mutated_files_never_panic(
        records in small_records(),
        c in prop::sample::select(ALL.to_vec()),
        max in 1usize..200,
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = write_mem(&records, c, max);
        for m in &muts {
            apply(&mut bytes, m);
        }
        if let Ok(mut r) = Reader::new(Cursor::new(&bytes), "fuzz") {
            for i in 0..r.index().num_chunks() {
                let _ = r.read_chunk(i);
            }
            let _ = r.verify();
            let n = r.index().num_records();
            let _: Vec<_> = r.records_range(n / 3..n).collect();
        }
        // Any successful full read returns well-formed records (checksums held).
        if let Ok(got) = read_mem(&bytes) {
            prop_assert!(got.len() < 1 << 20);
        }
    }

    /// Mutations of a payload behind a repaired header (checksum and size recomputed), so
    /// that the decompressors and the record splitter, not the checksum, meet the damage.
    #[test]
    fn recordio_mutated_payloads_with_valid_checksums_never_panic(
        records in small_records(),
        c in prop::sample::select(ALL.to_vec()),
        muts in prop::collection::vec(mutation(), 1..4),
        count_delta in prop::sample::select(vec![0i64, 0, 0, 1, -1, 1 << 20]),
    ) {
        let bytes = write_mem(&records, c, usize::MAX);
        if bytes.is_empty() {
            return Ok(());
        }
        let mut payload = bytes[20..].to_vec();
        for m in &muts {
            apply(&mut payload, m);
        }
        let count = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
        let count = (i64::from(count) + count_delta).clamp(0, i64::from(u32::MAX)) as u32;
        let file = hand_chunk(c.code(), &payload, count);
        if let Ok(got) = read_mem(&file) {
            prop_assert_eq!(got.len() as u32, count);
        }
    }

    #[test]
    fn recordio_round_trip_random_records(
        records in small_records(),
        c in prop::sample::select(ALL.to_vec()),
        max in 0usize..300,
    ) {
        prop_assert_eq!(read_mem(&write_mem(&records, c, max)).unwrap(), records);
    }

    #[test]
    fn recordio_dmlc_mutations_never_panic(
        records in small_records(),
        muts in prop::collection::vec(mutation(), 1..4),
        known_len in any::<bool>(),
    ) {
        let mut bytes = dmlc_encode(&records);
        prop_assert_eq!(read_dmlc(&bytes).unwrap(), records);
        for m in &muts {
            apply(&mut bytes, m);
        }
        let len = known_len.then_some(bytes.len() as u64);
        let _: Vec<_> = DmlcReader::new(Cursor::new(&bytes), "fuzz", len).collect();
    }
}

//! Read throughput of RecordIO files, next to raw file reads of the same files.
//!
//! Writes a synthetic dataset (`--mib` MiB of record bytes, default 256; text-like records of
//! 100 B to 8 KB) once per compressor into `--dir` (default: a new directory under the system
//! temp directory, removed at the end unless `--keep`), then for each file:
//!
//! - `raw_read`: reads the file with plain 1 MiB `read` calls (like `cat file > /dev/null`);
//! - `read_records`: `Reader::open(..).records()`, the record iterator (one `Vec` per record);
//! - `read_chunks`: `Reader::read_chunk_into` for every chunk (buffers reused, records not
//!   copied out).
//!
//! Each is run twice and the second run is reported, so the page cache is warm for all.
//! Prints one JSON line per compressor. MB = 10^6 bytes; record MB/s counts uncompressed
//! record bytes, file MB/s counts bytes read from the file.
//!
//!     cargo run --release -p warren --example recordio_read_bench -- [--mib N] [--dir D] [--keep]

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;
use warren::recordio::{Chunk, Compressor, Reader, Writer, WriterOptions};

const WORDS: [&str; 32] = [
    "the",
    "of",
    "gradient",
    "worker",
    "rank",
    "tensor",
    "allreduce",
    "shard",
    "epoch",
    "batch",
    "loss",
    "model",
    "checkpoint",
    "tracker",
    "ring",
    "tree",
    "0.125",
    "-3.5e-4",
    "label",
    "id",
    "feature",
    "weight",
    "bias",
    "sample",
    "image",
    "token",
    "user",
    "item",
    "click",
    "1",
    "2048",
    "value",
];

/// Deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn record(rng: &mut Rng, buf: &mut Vec<u8>) {
    buf.clear();
    let target = 100 + (rng.next() % 8000) as usize;
    while buf.len() < target {
        let r = rng.next();
        buf.extend_from_slice(WORDS[(r % 32) as usize].as_bytes());
        // Some incompressible bytes too, like ids and packed floats.
        if r & 0x700 == 0 {
            buf.extend_from_slice(&r.to_le_bytes());
        }
        buf.push(if r & 0xf000 == 0 { b'\n' } else { b' ' });
    }
}

fn write_dataset(path: &Path, compressor: Compressor, bytes: u64) -> (u64, u64, f64) {
    let t = Instant::now();
    let opts = WriterOptions { compressor, ..WriterOptions::default() };
    let mut w = Writer::create(path, opts).expect("create");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut n, mut total) = (0u64, 0u64);
    let mut buf = Vec::new();
    while total < bytes {
        record(&mut rng, &mut buf);
        w.write(&buf).expect("write");
        n += 1;
        total += buf.len() as u64;
    }
    w.finish().expect("finish");
    (n, total, t.elapsed().as_secs_f64())
}

fn raw_read(path: &Path) -> (u64, f64) {
    let t = Instant::now();
    let mut f = File::open(path).expect("open");
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).expect("read");
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    (n, t.elapsed().as_secs_f64())
}

fn read_records(path: &Path) -> (u64, f64) {
    let t = Instant::now();
    let mut n = 0u64;
    for r in Reader::open(path).expect("open").records() {
        n += r.expect("record").len() as u64;
    }
    (n, t.elapsed().as_secs_f64())
}

fn read_chunks(path: &Path) -> (u64, f64) {
    let t = Instant::now();
    let mut r = Reader::open(path).expect("open");
    let mut chunk = Chunk::default();
    let mut n = 0u64;
    for i in 0..r.index().num_chunks() {
        r.read_chunk_into(i, &mut chunk).expect("chunk");
        n += chunk.iter().map(|x| x.len() as u64).sum::<u64>();
    }
    (n, t.elapsed().as_secs_f64())
}

/// Runs `f` twice, returns the second result.
fn warm<T>(f: impl Fn() -> T) -> T {
    f();
    f()
}

fn mb_s(bytes: u64, secs: f64) -> f64 {
    (bytes as f64 / 1e6 / secs * 10.0).round() / 10.0
}

fn main() {
    let mut mib = 256u64;
    let mut dir: Option<PathBuf> = None;
    let mut keep = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mib" => mib = args.next().and_then(|v| v.parse().ok()).expect("--mib N"),
            "--dir" => dir = args.next().map(PathBuf::from),
            "--keep" => keep = true,
            other => panic!("unknown argument {other}; usage: [--mib N] [--dir D] [--keep]"),
        }
    }
    let made_dir = dir.is_none();
    let dir = dir.unwrap_or_else(|| std::env::temp_dir().join(format!("warren-recordio-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).expect("create dir");
    for c in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
        let path = dir.join(format!("bench.{c}.recordio"));
        let (records, record_bytes, write_s) = write_dataset(&path, c, mib << 20);
        let file_bytes = std::fs::metadata(&path).expect("stat").len();
        let chunks = Reader::open(&path).expect("open").index().num_chunks();
        let (raw_n, raw_s) = warm(|| raw_read(&path));
        let (rec_n, rec_s) = warm(|| read_records(&path));
        let (chk_n, chk_s) = warm(|| read_chunks(&path));
        assert_eq!((raw_n, rec_n, chk_n), (file_bytes, record_bytes, record_bytes));
        let line = serde_json::json!({
            "compressor": c.name(),
            "records": records,
            "chunks": chunks,
            "record_bytes": record_bytes,
            "file_bytes": file_bytes,
            "write_record_mb_s": mb_s(record_bytes, write_s),
            "raw_read_file_mb_s": mb_s(file_bytes, raw_s),
            "read_records_record_mb_s": mb_s(record_bytes, rec_s),
            "read_records_file_mb_s": mb_s(file_bytes, rec_s),
            "read_chunks_record_mb_s": mb_s(record_bytes, chk_s),
            "read_chunks_file_mb_s": mb_s(file_bytes, chk_s),
        });
        println!("{line}");
        if !keep {
            std::fs::remove_file(&path).expect("remove");
        }
    }
    if made_dir && !keep {
        let _ = std::fs::remove_dir(&dir);
    }
}

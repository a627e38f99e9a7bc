//! Cross-implementation checks of the RecordIO format, for each compressor and both ways.
//!
//! 1. `tests/compat/paddle_recordio/main.go`: a Go writer and reader built on the libraries
//!    PaddlePaddle's Go package calls for each chunk (`hash/crc32`, `github.com/golang/snappy`
//!    framing stream, `compress/gzip`). Needs `go`; fails if it is missing unless
//!    `WARREN_SKIP_GO_COMPAT=1`.
//! 2. `tests/compat/paddle_recordio/paddle_lib.py`: PaddlePaddle's own code, the
//!    `librecordio.so` that PaddlePaddle built from its Go package and shipped in the
//!    `recordio` 0.1.6 wheel on PyPI (fetched by `fetch_paddle_lib.sh`, hash-pinned). Needs
//!    `python3` with pip and Linux x86_64; fails otherwise unless
//!    `WARREN_SKIP_PADDLE_LIB_COMPAT=1`.
//!
//! See `tests/compat/paddle_recordio/README.md`.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use warren::recordio::{Compressor, Reader, Writer, WriterOptions};

const ALL: [Compressor; 3] = [Compressor::None, Compressor::Snappy, Compressor::Gzip];

fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/paddle_recordio")
}

fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn skip(var: &str) -> bool {
    if std::env::var(var).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: {var}=1");
        return true;
    }
    false
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Deterministic records: empty ones, short text, binary, a header-lookalike, and records
/// large enough to span several 64 KiB Snappy blocks.
fn records(n: usize, big: usize) -> Vec<Vec<u8>> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| match i % 6 {
            0 => Vec::new(),
            1 => format!("line {i}: the quick brown fox").into_bytes(),
            2 => (0..next() % 2000).map(|_| next() as u8).collect(),
            3 => b"\x04\x03\x02\x01\x00\x00\x00\x00".to_vec(),
            4 => vec![b'z'; (next() % 500) as usize],
            _ => (0..big).map(|k| (k / 7) as u8 ^ (next() as u8 & 3)).collect(),
        })
        .collect()
}

fn write_frames(path: &Path, records: &[Vec<u8>]) {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(r);
    }
    std::fs::write(path, out).unwrap();
}

fn read_frames(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let n = u32::from_le_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
        out.push(data[pos + 4..pos + 4 + n].to_vec());
        pos += 4 + n;
    }
    out
}

fn write_ours(path: &Path, records: &[Vec<u8>], compressor: Compressor, max: usize) {
    let opts = WriterOptions { max_chunk_bytes: max, compressor };
    let mut w = Writer::create(path, opts).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
}

fn read_ours(path: &Path) -> (usize, Vec<Vec<u8>>) {
    let mut r = Reader::open(path).unwrap();
    r.verify().unwrap();
    let chunks = r.index().num_chunks();
    let recs = r.records().collect::<Result<_, _>>().unwrap();
    (chunks, recs)
}

/// Builds the Go compat program once; `None` if skipped.
fn go_program() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        if skip("WARREN_SKIP_GO_COMPAT") {
            return None;
        }
        if Command::new("go").arg("version").output().is_err() {
            panic!(
                "`go` was not found on PATH. The RecordIO compatibility test builds \
                 tests/compat/paddle_recordio with Go (1.21 or later). Install Go, or set \
                 WARREN_SKIP_GO_COMPAT=1 to skip this test."
            );
        }
        let bin = work_dir("paddle_recordio_go").join("paddle_recordio_compat");
        run(Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(compat_dir())
            .env("GOFLAGS", "-mod=readonly"));
        Some(bin)
    })
    .as_deref()
}

#[test]
fn recordio_compat_go_reads_ours_and_we_read_go() {
    let Some(go) = go_program() else { return };
    let dir = work_dir("go_compat");
    let recs = records(300, 150_000);
    let frames = dir.join("in.frames");
    write_frames(&frames, &recs);
    for c in ALL {
        // Go reads ours (several chunks: 200 KB limit).
        let ours = dir.join(format!("ours.{c}.recordio"));
        write_ours(&ours, &recs, c, 200_000);
        let back = dir.join(format!("ours.{c}.frames"));
        run(Command::new(go).arg("read").arg(&ours).arg(&back));
        assert_eq!(read_frames(&back), recs, "Go read our {c} file");

        // We read Go's.
        let theirs = dir.join(format!("go.{c}.recordio"));
        run(Command::new(go)
            .args(["write", "-compressor", c.name(), "-max-chunk", "200000"])
            .arg(&frames)
            .arg(&theirs));
        let (chunks, got) = read_ours(&theirs);
        assert!(chunks > 5, "{chunks} chunks");
        assert_eq!(got, recs, "we read Go's {c} file");

        let same = std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap();
        if c == Compressor::None {
            assert!(same, "uncompressed files differ byte-wise");
        } else {
            eprintln!("{c}: our bytes identical to Go's: {same}");
        }
    }
}

/// `librecordio.so` from PaddlePaddle's wheel, fetched once; `None` if skipped.
fn paddle_lib() -> Option<&'static Path> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    LIB.get_or_init(|| {
        if skip("WARREN_SKIP_PADDLE_LIB_COMPAT") {
            return None;
        }
        let out =
            Command::new("bash").arg(compat_dir().join("fetch_paddle_lib.sh")).arg(work_dir("paddle_lib")).output();
        match out {
            Ok(o) if o.status.success() => Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())),
            other => panic!(
                "could not fetch PaddlePaddle's librecordio.so (tests/compat/paddle_recordio/\
                 fetch_paddle_lib.sh needs bash, python3 with pip, PyPI access, Linux x86_64): \
                 {other:?}. Set WARREN_SKIP_PADDLE_LIB_COMPAT=1 to skip this test."
            ),
        }
    })
    .as_deref()
}

fn paddle(lib: &Path, args: &[&Path]) {
    let mut cmd = Command::new("python3");
    cmd.arg(compat_dir().join("paddle_lib.py")).arg(lib);
    cmd.arg(args[0]);
    cmd.args(&args[1..]);
    run(&mut cmd);
}

#[test]
fn recordio_compat_paddle_lib_reads_ours_and_we_read_paddle() {
    let Some(lib) = paddle_lib() else { return };
    let dir = work_dir("paddle_lib_compat");
    let recs = records(300, 150_000);
    for c in ALL {
        let ours = dir.join(format!("ours.{c}.recordio"));
        write_ours(&ours, &recs, c, 200_000);
        let back = dir.join(format!("ours.{c}.frames"));
        paddle(lib, &[Path::new("read"), &ours, &back]);
        assert_eq!(read_frames(&back), recs, "Paddle read our {c} file");
    }

    // Paddle's writer (Snappy, 32 MiB chunks): over 32 MiB of records, so two chunks.
    let mut big = records(360, 600_000); // 60 records of 600 KB
    big.extend(records(60, 10));
    let total: usize = big.iter().map(Vec::len).sum();
    assert!(total > 32 << 20, "{total}");
    let frames = dir.join("paddle.in.frames");
    write_frames(&frames, &big);
    let theirs = dir.join("paddle.snappy.recordio");
    paddle(lib, &[Path::new("write"), &frames, &theirs]);
    let bytes = std::fs::read(&theirs).unwrap();
    assert_eq!(&bytes[8..12], &1u32.to_le_bytes(), "Paddle writes Snappy by default");
    assert_eq!(&bytes[20..30], b"\xff\x06\x00\x00sNaPpY", "Snappy framing format");
    let (chunks, got) = read_ours(&theirs);
    assert_eq!(chunks, 2);
    assert_eq!(got, big, "we read Paddle's file");

    // And the same records written by us with Paddle's defaults cut chunks identically.
    let ours = dir.join("ours.default.recordio");
    write_ours(&ours, &big, Compressor::Snappy, 32 << 20);
    let idx_ours = Reader::new(Cursor::new(std::fs::read(&ours).unwrap()), "ours").unwrap();
    let idx_theirs = Reader::new(Cursor::new(bytes), "theirs").unwrap();
    let counts =
        |r: &Reader<Cursor<Vec<u8>>>| r.index().chunks().iter().map(|c| c.header.num_records).collect::<Vec<_>>();
    assert_eq!(counts(&idx_ours), counts(&idx_theirs));
}

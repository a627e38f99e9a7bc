//! `warren recordio write|cat|index|check` end to end, on the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn warren(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren")).arg("recordio").args(args).output().expect("run warren")
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("recordio_cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn recordio_cli_write_cat_index_check() {
    let text = tmp("lines.txt");
    let lines: Vec<String> = (0..500).map(|i| format!("line {i} {}", "x".repeat(i % 50))).collect();
    std::fs::write(&text, lines.join("\n") + "\n").unwrap();
    for c in ["none", "snappy", "gzip"] {
        let out = tmp(&format!("lines.{c}.recordio"));
        let o = warren(&["write", "-o", s(&out), "--lines", s(&text), "--compressor", c, "--max-chunk-bytes", "1000"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

        let o = warren(&["cat", s(&out)]);
        assert!(o.status.success());
        assert_eq!(String::from_utf8(o.stdout).unwrap(), lines.join("\n") + "\n");

        let o = warren(&["index", "--json", s(&out)]);
        assert!(o.status.success());
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["num_records"], 500);
        let chunks = doc["chunks"].as_array().unwrap();
        assert!(chunks.len() > 10);
        assert_eq!(chunks[0]["compressor"], c);
        let o = warren(&["index", s(&out)]);
        assert!(String::from_utf8(o.stdout).unwrap().contains("500 records"));

        let o = warren(&["check", s(&out)]);
        assert_eq!(o.status.code(), Some(0));

        // Damage the payload of chunk 2: check exits 1 naming file, chunk and offset.
        let off = chunks[2]["offset"].as_u64().unwrap();
        let mut bytes = std::fs::read(&out).unwrap();
        bytes[off as usize + 21] ^= 0x55;
        std::fs::write(&out, bytes).unwrap();
        let o = warren(&["check", s(&out)]);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.contains(s(&out)) && err.contains("chunk 2") && err.contains(&format!("offset {off}")), "{err}");
    }
}

#[test]
fn recordio_cli_files_as_records_and_garbage() {
    let a = tmp("a.bin");
    let b = tmp("b.bin");
    std::fs::write(&a, b"first file\nwith a newline").unwrap();
    std::fs::write(&b, b"").unwrap();
    let out = tmp("files.recordio");
    let o = warren(&["write", "-o", s(&out), s(&a), s(&b)]);
    assert!(o.status.success());
    let o = warren(&["cat", s(&out)]);
    assert_eq!(o.stdout, b"first file\nwith a newline\n\n");

    let o = warren(&["check", s(&a)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8(o.stderr).unwrap().contains("not a RecordIO file"));
    let o = warren(&["cat", s(&a)]);
    assert_eq!(o.status.code(), Some(1));
}

/// `warren recordio cat|index FILE | head -1`: a reader that stops early is not an error
/// (exit 0, nothing on standard error), as with any Unix tool.
#[test]
fn recordio_cli_output_to_a_reader_that_stops_early() {
    use std::io::Read;
    use std::process::Stdio;
    let text = tmp("many.txt");
    let lines: Vec<String> = (0..200_000).map(|i| format!("record {i}")).collect();
    std::fs::write(&text, lines.join("\n") + "\n").unwrap();
    let file = tmp("many.recordio");
    let o = warren(&["write", "-o", s(&file), "--lines", s(&text), "--max-chunk-bytes", "16"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for cmd in ["cat", "index"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["recordio", cmd, s(&file)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
        drop(child.stdout.take()); // the reader stops: later writes get EPIPE
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "{cmd}: {:?}\n{stderr}", out.status);
    }
}

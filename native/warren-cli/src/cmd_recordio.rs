//! `warren recordio write|cat|index|check`: make, print, list and verify RecordIO files.
//!
//! `cat` and `check` also take dmlc `.rec` files (detected by their magic number).

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use warren::error::{Error, Result};
use warren::recordio::{self, Compressor, DEFAULT_MAX_CHUNK_BYTES, DmlcReader, Format, Reader, Writer, WriterOptions};

/// `warren recordio`: PaddlePaddle RecordIO files.
#[derive(Debug, Args)]
pub struct RecordioArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: RecordioCommand,
}

/// The `warren recordio` subcommands.
#[derive(Debug, Subcommand)]
pub enum RecordioCommand {
    /// Write a RecordIO file from a text file (one record per line) or from files (one
    /// record each).
    Write(WriteArgs),
    /// Print every record, one per line (RecordIO or dmlc `.rec`).
    Cat(CatArgs),
    /// Print the chunk table, read from the chunk headers only.
    Index(IndexArgs),
    /// Verify every chunk (checksum, decompression, record framing). Exit 0 if all files are
    /// good, 1 if not, with the error naming the file, chunk and byte offset.
    Check(CheckArgs),
}

/// Chunk compression for `write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressorArg {
    /// No compression.
    None,
    /// Snappy (framing format), PaddlePaddle's default.
    Snappy,
    /// Gzip.
    Gzip,
}

impl From<CompressorArg> for Compressor {
    fn from(c: CompressorArg) -> Self {
        match c {
            CompressorArg::None => Compressor::None,
            CompressorArg::Snappy => Compressor::Snappy,
            CompressorArg::Gzip => Compressor::Gzip,
        }
    }
}

/// Arguments of `warren recordio write`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["lines", "files"])))]
pub struct WriteArgs {
    /// The RecordIO file to create.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Text file to read, one record per line without its `\n` (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    pub lines: Option<PathBuf>,
    /// Files to store, each as one record.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Chunk compression.
    #[arg(long, value_enum, default_value_t = CompressorArg::Snappy)]
    pub compressor: CompressorArg,
    /// Start a new chunk before a record that would take a chunk's record bytes over this.
    #[arg(long, default_value_t = DEFAULT_MAX_CHUNK_BYTES)]
    pub max_chunk_bytes: usize,
}

/// Arguments of `warren recordio cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// Files to print, in order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Arguments of `warren recordio index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// The RecordIO file.
    pub file: PathBuf,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `warren recordio check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files to verify.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs a `warren recordio` subcommand; returns the process exit code.
pub fn run(args: RecordioArgs) -> Result<i32> {
    match args.command {
        RecordioCommand::Write(a) => write(a),
        RecordioCommand::Cat(a) => cat(a),
        RecordioCommand::Index(a) => index(a),
        RecordioCommand::Check(a) => check(a),
    }
}

fn write(a: WriteArgs) -> Result<i32> {
    let opts = WriterOptions { max_chunk_bytes: a.max_chunk_bytes, compressor: a.compressor.into() };
    let mut w = Writer::create(&a.output, opts)?;
    if let Some(lines) = &a.lines {
        let (name, src): (String, Box<dyn Read>) = if lines == Path::new("-") {
            ("standard input".into(), Box::new(io::stdin().lock()))
        } else {
            let f = File::open(lines).map_err(|e| Error::io(format!("opening {}", lines.display()), e))?;
            (lines.display().to_string(), Box::new(f))
        };
        let mut src = BufReader::with_capacity(1 << 20, src);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = src.read_until(b'\n', &mut line).map_err(|e| Error::io(format!("reading {name}"), e))?;
            if n == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            w.write(&line)?;
        }
    }
    for f in &a.files {
        let data = std::fs::read(f).map_err(|e| Error::io(format!("reading {}", f.display()), e))?;
        w.write(&data)?;
    }
    let records = w.records_written();
    w.flush()?;
    let (chunks, bytes) = (w.chunks_written(), w.bytes_written());
    w.finish()?;
    eprintln!(
        "wrote {records} records in {chunks} chunks ({bytes} bytes, {}) to {}",
        opts.compressor,
        a.output.display()
    );
    Ok(0)
}

fn cat(a: CatArgs) -> Result<i32> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    for f in &a.files {
        for rec in recordio::open(f)? {
            let rec = rec?;
            if let Err(e) = out.write_all(&rec).and_then(|()| out.write_all(b"\n")) {
                return written_out(Err(e));
            }
        }
    }
    written_out(out.flush())
}

fn index(a: IndexArgs) -> Result<i32> {
    if Format::of_file(&a.file)? == Format::Dmlc {
        return Err(Error::InvalidArgument(format!(
            "{} is a dmlc .rec file: it has no chunks to index",
            a.file.display()
        )));
    }
    let r = Reader::open(&a.file)?;
    let idx = r.index();
    let compressor = |code: u32| Compressor::from_code(code).map_or("unknown", Compressor::name);
    if a.json {
        let chunks: Vec<_> = idx
            .chunks()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                serde_json::json!({
                    "chunk": i,
                    "offset": c.offset,
                    "payload_len": c.header.payload_len,
                    "num_records": c.header.num_records,
                    "first_record": c.first_record,
                    "compressor": compressor(c.header.compressor_code),
                    "checksum": format!("{:#010x}", c.header.checksum),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "file": idx.file(),
            "file_len": idx.file_len(),
            "num_chunks": idx.num_chunks(),
            "num_records": idx.num_records(),
            "chunks": chunks,
        });
        return print_all(&format!("{doc}\n"));
    }
    use std::fmt::Write as _;
    let mut text = format!(
        "{}: {} bytes, {} chunks, {} records\n{:>7} {:>14} {:>12} {:>9} {:>12} {:>10} {:>10}\n",
        idx.file(),
        idx.file_len(),
        idx.num_chunks(),
        idx.num_records(),
        "chunk",
        "offset",
        "payload",
        "records",
        "first",
        "compressor",
        "checksum"
    );
    for (i, c) in idx.chunks().iter().enumerate() {
        let _ = writeln!(
            text,
            "{:>7} {:>14} {:>12} {:>9} {:>12} {:>10} {:#010x}",
            i,
            c.offset,
            c.header.payload_len,
            c.header.num_records,
            c.first_record,
            compressor(c.header.compressor_code),
            c.header.checksum
        );
    }
    print_all(&text)
}

/// Writes `text` to standard output; a reader that stopped early (`... | head`) is not an
/// error.
fn print_all(text: &str) -> Result<i32> {
    let mut out = io::stdout().lock();
    written_out(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// Exit code 0 for output written to standard output, or to a reader that stopped early
/// (`... | head` is not an error); any other failure is an error.
fn written_out(written: io::Result<()>) -> Result<i32> {
    match written {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::io("writing to standard output", e)),
        _ => Ok(0),
    }
}

fn check(a: CheckArgs) -> Result<i32> {
    let mut code = 0;
    for f in &a.files {
        match check_one(f) {
            Ok(summary) => println!("ok {}: {summary}", f.display()),
            Err(e) => {
                // The error names the file (and, for corruption, the chunk and offset).
                eprintln!("FAILED: {e}");
                code = 1;
            }
        }
    }
    Ok(code)
}

fn check_one(f: &Path) -> Result<String> {
    match Format::of_file(f)? {
        Format::Paddle => {
            let mut r = Reader::open(f)?;
            let records = r.verify()?;
            Ok(format!("{} chunks, {records} records", r.index().num_chunks()))
        }
        Format::Dmlc => {
            let mut r = DmlcReader::open(f)?;
            let mut buf = Vec::new();
            let mut records = 0u64;
            while r.read_record(&mut buf)? {
                records += 1;
            }
            Ok(format!("dmlc, {records} records (dmlc files carry no checksums)"))
        }
    }
}

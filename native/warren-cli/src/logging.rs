//! Logging through `log4rs` to stderr; `WARREN_LOG` (error, warn, info, debug, trace) sets the
//! level, `info` by default.
//!
//! The workers and the tracker of `warren run` share one stderr, so each line goes out in a
//! single write ([`LineAppender`]): log4rs's console appender writes a line in pieces, and
//! another process's line could land in the middle of it.

use std::io::Write;

use log::{LevelFilter, Record};
use log4rs::append::Append;
use log4rs::config::{Appender, Config, Root};
use log4rs::encode::Encode;
use log4rs::encode::pattern::PatternEncoder;
use log4rs::encode::writer::simple::SimpleWriter;

/// Writes each formatted record to stderr with one `write_all` (a line of up to `PIPE_BUF`
/// bytes reaches a pipe in one piece).
#[derive(Debug)]
struct LineAppender {
    encoder: PatternEncoder,
}

impl Append for LineAppender {
    fn append(&self, record: &Record) -> anyhow::Result<()> {
        let mut line = SimpleWriter(Vec::with_capacity(160));
        self.encoder.encode(&mut line, record)?;
        std::io::stderr().lock().write_all(&line.0)?;
        Ok(())
    }

    fn flush(&self) {}
}

/// Installs the logger once at start-up.
pub fn init() {
    let level =
        std::env::var("WARREN_LOG").ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::Info);
    let stderr = LineAppender { encoder: PatternEncoder::new("{d(%H:%M:%S%.3f)} {l:<5} {m}{n}") };
    let config = Config::builder()
        .appender(Appender::builder().build("stderr", Box::new(stderr)))
        .build(Root::builder().appender("stderr").build(level))
        .expect("static logging configuration is valid");
    let _ = log4rs::init_config(config);
}

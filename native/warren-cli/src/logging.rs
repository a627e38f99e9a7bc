//! Logging through `log4rs` to stderr; `WARREN_LOG` (error, warn, info, debug, trace) sets the
//! level, `info` by default.

use log::LevelFilter;
use log4rs::append::console::{ConsoleAppender, Target};
use log4rs::config::{Appender, Config, Root};
use log4rs::encode::pattern::PatternEncoder;

/// Installs the logger once at start-up.
pub fn init() {
    let level =
        std::env::var("WARREN_LOG").ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::Info);
    let stderr = ConsoleAppender::builder()
        .target(Target::Stderr)
        .encoder(Box::new(PatternEncoder::new("{d(%H:%M:%S%.3f)} {h({l:<5})} {m}{n}")))
        .build();
    let config = Config::builder()
        .appender(Appender::builder().build("stderr", Box::new(stderr)))
        .build(Root::builder().appender("stderr").build(level))
        .expect("static logging configuration is valid");
    let _ = log4rs::init_config(config);
}

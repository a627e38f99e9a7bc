//! Helpers shared by the suites of `warren`'s integration tests (each suite uses a part).
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub mod crash;
#[path = "../../../../warren/tests/it/support/etcd.rs"]
pub mod etcd;
pub mod netns;
pub mod procs;
pub mod ps;
pub mod training;

/// A path under the system's temporary directory named after `tag`, unique in this process:
/// every suite runs in the one test process, so its id and a tag alone may name the same
/// directory for two tests.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("warren-{tag}-{}-{n}", std::process::id()))
}

//! The names the task queue and its log share: a task's id, a chunk of a RecordIO file, and
//! the caller's clock in milliseconds.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Milliseconds on the caller's clock.
pub type Millis = u64;

/// One chunk of a RecordIO file: the unit a dataset is made of.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    /// Path (or URI) of the file holding the chunk.
    pub path: String,
    /// Index of the chunk within its file, from 0.
    pub index: u64,
    /// Byte offset of the chunk in the file.
    pub offset: u64,
    /// Length of the chunk in bytes.
    pub len: u64,
    /// Number of records in the chunk.
    pub records: u64,
}

/// Identifies a task: its position in dataset order, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub u64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

//! Record types for the stores' own tests: a small key-value log that knows nothing of any
//! service, and a second format to mix it up with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Codec, Replay};
use warren_base::error::{Error, Result};

/// One logged write of the test table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Put {
    pub(crate) seq: u64,
    pub(crate) key: String,
    pub(crate) value: i64,
}

/// The whole test table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Table {
    pub(crate) seq: u64,
    pub(crate) rows: BTreeMap<String, i64>,
}

/// The test table's format.
pub(crate) struct Kv;

impl Codec for Kv {
    type Record = Put;
    type Snapshot = Table;
    const FORMAT: &'static str = "warren.test.kv/1";

    fn seq(record: &Put) -> u64 {
        record.seq
    }

    fn snapshot_seq(snapshot: &Table) -> u64 {
        snapshot.seq
    }
}

impl Replay for Kv {
    type State = Table;

    fn restore(snapshot: Option<Table>) -> Result<Table> {
        Ok(snapshot.unwrap_or_default())
    }

    fn apply(state: &mut Table, record: &Put) -> Result<()> {
        if record.seq != state.seq + 1 {
            return Err(Error::InvalidChange { seq: record.seq, reason: format!("expected {}", state.seq + 1) });
        }
        state.seq = record.seq;
        state.rows.insert(record.key.clone(), record.value);
        Ok(())
    }

    fn snapshot(state: &Table) -> Table {
        state.clone()
    }
}

/// The next version of [`Kv`]'s format: the same records, and it reads [`Kv`]'s.
pub(crate) struct KvNext;

impl Codec for KvNext {
    type Record = Put;
    type Snapshot = Table;
    const FORMAT: &'static str = "warren.test.kv/2";
    const READS: &'static [&'static str] = &[Kv::FORMAT];

    fn seq(record: &Put) -> u64 {
        record.seq
    }

    fn snapshot_seq(snapshot: &Table) -> u64 {
        snapshot.seq
    }
}

/// A record that a [`Put`]'s JSON also decodes to (serde ignores the unknown fields): only
/// the format name tells the two logs apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tick {
    pub(crate) seq: u64,
}

/// Another service's format, to mix up with [`Kv`].
pub(crate) struct Counter;

impl Codec for Counter {
    type Record = Tick;
    type Snapshot = Tick;
    const FORMAT: &'static str = "warren.test.counter/1";

    fn seq(record: &Tick) -> u64 {
        record.seq
    }

    fn snapshot_seq(snapshot: &Tick) -> u64 {
        snapshot.seq
    }
}

/// Puts numbered `from..from + n`, writing key `k<seq % 7>`.
pub(crate) fn puts(from: u64, n: u64) -> Vec<Put> {
    (from..from + n).map(|seq| Put { seq, key: format!("k{}", seq % 7), value: seq as i64 * 3 }).collect()
}

/// The table after `records`, applied to `snapshot`.
pub(crate) fn replay(snapshot: Option<Table>, records: &[Put]) -> Table {
    let mut t = Kv::restore(snapshot).unwrap();
    for r in records {
        if r.seq > t.seq {
            Kv::apply(&mut t, r).unwrap();
        }
    }
    t
}

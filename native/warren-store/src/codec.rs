//! [`Codec`]: what a service stores (its record and snapshot types) and how they become
//! bytes; [`Replay`]: how its records rebuild its state.

use serde::Serialize;
use serde::de::DeserializeOwned;

use warren_base::error::{Error, Result};

/// Why bytes did not decode (the stores wrap it in [`Error::StoreCorrupt`] naming where).
pub type DecodeError = Box<dyn std::error::Error + Send + Sync>;

/// A service's durable format: the type of one logged record, the type of a snapshot of
/// its whole state, and their encodings.
///
/// Records are numbered: the first record a service ever logs has sequence number 1 and
/// each next one the previous + 1 ([`seq`](Codec::seq)); a snapshot covers every record
/// up to its [`snapshot_seq`](Codec::snapshot_seq). The stores check this numbering
/// when records are submitted and when they are read back.
///
/// The encodings default to JSON (readable with `jq`, and the types only derive serde's
/// traits); a service with bulky records overrides them with a binary form. Whatever the
/// encoding, the stores add the framing, checksums and compression.
pub trait Codec: Send + Sync + 'static {
    /// One logged change of the service's state.
    type Record: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The service's whole state as of one record.
    type Snapshot: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Names the format and its version, e.g. `warren.master.queue/1`. A store keeps the
    /// name of the format written into it and refuses to open with another one, so that
    /// one service never reads another's records (or an old layout) as its own.
    const FORMAT: &'static str;

    /// Earlier versions of [`FORMAT`](Codec::FORMAT) whose records and snapshots this codec
    /// still decodes. A [`FileStore`](crate::FileStore) holding one of them opens, its marker
    /// first rewritten (atomically) to `FORMAT`, so that a build knowing only the earlier
    /// version then refuses the directory instead of misreading newer records. Default: none.
    const READS: &'static [&'static str] = &[];

    /// The sequence number of `record` (1-based, no gaps).
    fn seq(record: &Self::Record) -> u64;

    /// The sequence number of the last record `snapshot` includes (0: none).
    fn snapshot_seq(snapshot: &Self::Snapshot) -> u64;

    /// Appends the encoding of `records` (the records of one submit, at least one) to `out`.
    fn encode_records(records: &[Self::Record], out: &mut Vec<u8>) -> Result<()> {
        serde_json::to_writer(out, records).map_err(|e| Error::InvalidArgument(format!("cannot encode records: {e}")))
    }

    /// Decodes what [`encode_records`](Codec::encode_records) wrote.
    fn decode_records(bytes: &[u8]) -> std::result::Result<Vec<Self::Record>, DecodeError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    /// Writes the encoding of `snapshot` to `out` (a compressor: many small writes are fine
    /// when `out` buffers, as the stores' writers do).
    fn encode_snapshot(snapshot: &Self::Snapshot, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer(out, snapshot).map_err(std::io::Error::from)
    }

    /// Decodes what [`encode_snapshot`](Codec::encode_snapshot) wrote.
    fn decode_snapshot(bytes: &[u8]) -> std::result::Result<Self::Snapshot, DecodeError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

/// A [`Codec`] whose records can be replayed onto the service's state: what the
/// snapshot-on-every-change store ([`SnapshotEveryChangeStore`](super::SnapshotEveryChangeStore))
/// needs to keep a replica, and what every service has anyway to restart from its store.
pub trait Replay: Codec {
    /// The service's state.
    type State: Send + 'static;

    /// The state a snapshot describes (or the initial state, for `None`).
    fn restore(snapshot: Option<Self::Snapshot>) -> Result<Self::State>;

    /// Applies the next record to `state`; an error leaves `state` as it was.
    fn apply(state: &mut Self::State, record: &Self::Record) -> Result<()>;

    /// A snapshot of `state`.
    fn snapshot(state: &Self::State) -> Self::Snapshot;
}

/// Checks that `records` continue the numbering after `last` (the last sequence number
/// submitted); `who` names the store in the error.
pub(crate) fn check_numbering<C: Codec>(who: &dyn std::fmt::Display, last: u64, records: &[C::Record]) -> Result<()> {
    for (expected, record) in (last + 1..).zip(records) {
        let seq = C::seq(record);
        if seq != expected {
            return Err(Error::InvalidArgument(format!(
                "store {who}: record {seq} submitted where record {expected} was expected"
            )));
        }
    }
    Ok(())
}

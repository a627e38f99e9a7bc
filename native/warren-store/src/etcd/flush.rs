//! Group commit on etcd: submitted entries are written by up to
//! [`EtcdOptions::flushes_in_flight`] concurrent flushes, each taking every entry queued so
//! far and writing it in one transaction (see `value.rs` for when it takes more); the
//! durable point is the end of the longest run of written flushes from the start.
//!
//! Why allow several flushes at once: one flush is one etcd round trip (raft, its WAL's
//! fsync, the answer). With one flush at a time (the default), submits arriving during a
//! round trip wait for it to end, then all go in the next transaction; with two or more,
//! theirs starts at once and etcd commits the proposals it receives together. That
//! overlaps round trips but makes more, smaller transactions, which costs more CPU: on this
//! project's 2-core machines, where etcd shares the CPU, one flush in flight measured
//! faster (docs/benchmarks-master.md).
//!
//! Flushes may then commit out of order: if the writer dies, a later flush may be in etcd
//! and an earlier one not. Nothing past the first missing flush was acknowledged (a ticket
//! is durable only once everything before it is), so [`load`](super::EtcdStore) keeps the
//! records up to the gap and deletes the keys after it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};

use super::value::{self, Entry};
use crate::Ticket;
use crate::etcd_options::EtcdOptions;
use warren_base::error::{Error, Result};

/// What submit, the flushes and the waiters share.
#[derive(Default)]
pub(super) struct State {
    /// Sequence number of the last record submitted.
    pub(super) last_seq: u64,
    /// Every record up to this one is in etcd.
    pub(super) durable: u64,
    /// Entries submitted and not yet taken by a flush.
    pub(super) pending: Vec<Entry>,
    /// Flushes running.
    in_flight: usize,
    /// Written flushes past `durable` (first seq -> last seq), waiting for earlier ones.
    written: BTreeMap<u64, u64>,
    /// Records submitted since the last snapshot.
    pub(super) since_compact: u64,
    /// Set when a write failed: the store refuses all later work.
    pub(super) failed: Option<String>,
}

/// The non-generic part of an etcd store: the connection, the leader identity and the
/// group-commit state (shared with the flush tasks).
pub(super) struct Log {
    pub(super) client: Client,
    pub(super) opts: EtcdOptions,
    /// This writer's identity, the value of the leader key while it holds the lock.
    pub(super) id: String,
    pub(super) lease_lost: Arc<AtomicBool>,
    pub(super) state: Mutex<State>,
    /// Notified when the durable point moves or the store fails.
    pub(super) changed: Condvar,
}

impl Log {
    pub(super) fn key(&self, suffix: &str) -> String {
        format!("{}/{suffix}", self.opts.prefix)
    }

    pub(super) fn log_key(&self, seq: u64) -> String {
        self.key(&format!("log/{seq:020}"))
    }

    pub(super) fn who(&self) -> String {
        format!("etcd {} ({})", self.opts.endpoints.join(","), self.opts.prefix)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The condition of every write: we still hold the leader key.
    fn still_leader(&self) -> Compare {
        Compare::value(self.key("leader"), CompareOp::Equal, self.id.clone())
    }

    /// Writes `ops` (about `bytes` of keys and values) in one transaction, if this store
    /// still holds the leader lock, within the request timeout.
    pub(super) async fn write(&self, what: &str, ops: Vec<TxnOp>, bytes: usize) -> Result<()> {
        if self.lease_lost.load(Ordering::Acquire) {
            return Err(Error::StoreFailed(format!("{}: the leader lease could not be kept alive", self.who())));
        }
        let txn = Txn::new().when([self.still_leader()]).and_then(ops);
        let mut client = self.client.clone();
        let resp = match tokio::time::timeout(self.opts.request_timeout, client.txn(txn)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                return Err(too_large(Error::StoreFailed(format!("{}: {what}: {e}", self.who())), what, bytes));
            }
            Err(_) => {
                return Err(Error::Timeout {
                    what: format!("{} to answer {what}", self.who()),
                    after: self.opts.request_timeout,
                });
            }
        };
        if !resp.succeeded() {
            return Err(Error::StoreFailed(format!(
                "{}: this writer ({}) no longer holds the leader lock; another one may serve this prefix",
                self.who(),
                self.id
            )));
        }
        Ok(())
    }

    /// Queues an entry and makes sure a flush will take it: starts one on `rt` if fewer
    /// than the allowed number are running (a running flush takes it otherwise).
    pub(super) fn submit(self: &Arc<Self>, st: &mut State, entry: Entry, rt: &tokio::runtime::Handle) {
        st.last_seq = entry.last;
        st.since_compact += entry.last + 1 - entry.first;
        st.pending.push(entry);
        if st.in_flight < self.opts.flushes_in_flight {
            st.in_flight += 1;
            rt.spawn(Arc::clone(self).flush());
        }
    }

    /// One flush task: writes everything queued, again and again, until nothing is.
    async fn flush(self: Arc<Self>) {
        loop {
            let batch = {
                let mut st = self.lock();
                if st.pending.is_empty() || st.failed.is_some() {
                    st.in_flight -= 1;
                    return;
                }
                std::mem::take(&mut st.pending)
            };
            let result = self.write_entries(&batch).await;
            let mut st = self.lock();
            match result {
                Ok(()) => {
                    let (first, last) = (batch[0].first, batch[batch.len() - 1].last);
                    st.written.insert(first, last);
                    let st = &mut *st;
                    while let Some(last) = st.written.remove(&(st.durable + 1)) {
                        st.durable = last;
                    }
                }
                Err(e) => {
                    if st.failed.is_none() {
                        log::error!("etcd store {}: {e}", self.who());
                        st.failed = Some(failure_text(&e));
                    }
                }
            }
            drop(st);
            self.changed.notify_all();
        }
    }

    /// Writes `entries` as one key in one transaction, or, if they exceed the request
    /// budget, as several keys cut between submits, one transaction each, in order.
    async fn write_entries(&self, entries: &[Entry]) -> Result<()> {
        for piece in value::pieces(entries, self.opts.max_request_bytes) {
            let piece = &entries[piece];
            let key = self.log_key(piece[piece.len() - 1].last);
            let value = value::encode(piece)?;
            let bytes = key.len() + value.len();
            self.write("logging records", vec![TxnOp::put(key, value, None)], bytes).await?;
        }
        Ok(())
    }

    /// Blocks until every record up to `ticket` is in etcd, the store failed, or a deadline
    /// of three request timeouts passed.
    pub(super) fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        let limit = self.opts.request_timeout * 3;
        let deadline = Instant::now() + limit;
        let mut st = self.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(Error::StoreFailed(why.clone()));
            }
            if st.durable >= ticket.0 {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("{} to commit record {}", self.who(), ticket.0),
                    after: limit,
                });
            }
            st = self.changed.wait_timeout(st, left.min(Duration::from_secs(1))).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// What a failed store says from then on (the message of a [`Error::StoreFailed`], not its
/// display, which would repeat the variant's prefix).
pub(super) fn failure_text(e: &Error) -> String {
    match e {
        Error::StoreFailed(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Turns etcd's refusal of an oversized request into an error that says what to change.
fn too_large(e: Error, what: &str, bytes: usize) -> Error {
    match e {
        Error::StoreFailed(m) if m.contains("request is too large") || m.contains("larger than max") => {
            Error::StoreFailed(format!(
                "{m}: {what} needs a request of about {bytes} bytes, over this etcd's request limit; \
                 start etcd with a larger --max-request-bytes (its default is 1.5 MiB), or write the \
                 dataset in fewer, larger RecordIO chunks (the change that sets a dataset lists every chunk)"
            ))
        }
        other => other,
    }
}

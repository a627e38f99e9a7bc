//! [`EtcdStore`]: the master's queue kept in etcd, with a leader lock so that one master at a
//! time serves a dataset.
//!
//! Keys, under a prefix (one per job / dataset):
//!
//! - `<prefix>/leader`: the leader lock, created in a transaction only if absent and bound to
//!   the master's lease. A second master polls until the key is gone (the first master
//!   stopped and revoked its lease, or died and its lease expired after `lease_ttl_s`), then
//!   takes it and reloads the queue.
//! - `<prefix>/log/<seq, 20 digits>`: one batch of changes (JSON), keyed by its last change
//!   (so a snapshot at `seq` drops exactly the keys up to `seq`).
//! - `<prefix>/snapshot`: the gzipped JSON snapshot written by [`Store::compact`], which drops
//!   the log keys it covers in the same transaction.
//!
//! Every write is a transaction conditioned on the leader key still holding this master's id,
//! so a master that lost its lease (partition, pause longer than the TTL) cannot overwrite the
//! state of its successor: its write fails and the store refuses further work
//! ([`Error::StoreFailed`]), which stops the master.
//!
//! Group commit, as in the file store: [`Store::submit`] only queues a log entry (under the
//! queue's lock); the first thread to [`Store::wait_durable`] writes every queued entry in one
//! transaction (several if more than 120), in order, and wakes the others. etcd fsyncs its
//! raft log before it answers.
//!
//! Size limits: etcd refuses requests over its `--max-request-bytes` (1.5 MiB by default).
//! The change that sets the dataset lists every chunk (about 100 bytes of JSON per chunk), so
//! log entries over [`COMPRESS_LOG_BYTES`] are stored gzipped (paths repeat: about 10 times
//! smaller), as is the snapshot. A write etcd still refuses as too large fails with an error
//! that gives its size and names `--max-request-bytes`, the etcd setting to raise. Reads
//! accept responses of any size.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp,
};

use super::{Store, Ticket};
use crate::error::{Error, Result};
use crate::master::{Change, Snapshot};

/// Settings of an [`EtcdStore`].
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// etcd client endpoints (`host:port` or `http://host:port`).
    pub endpoints: Vec<String>,
    /// Key prefix of this master's state (one per dataset / job), e.g. `/warren/master/job1`.
    pub prefix: String,
    /// Lease time to live in seconds ([`MIN_LEASE_TTL_S`] to [`MAX_LEASE_TTL_S`]): how long
    /// after a master dies its successor waits, and how long a master may go without
    /// renewing its lease (a pause, a partition) before it loses the lock. etcd raises a
    /// TTL below its own minimum (1.5 × its `--election-timeout`, rounded up: 2 s by
    /// default) to that minimum; the TTL granted is logged.
    pub lease_ttl_s: i64,
    /// How long [`EtcdStore::open`] waits for the leader lock.
    pub lock_timeout: Duration,
    /// Deadline of each etcd request.
    pub request_timeout: Duration,
    /// [`Store::wants_compaction`] turns true after this many changes since the last
    /// snapshot.
    pub compact_after_changes: u64,
}

/// Smallest [`EtcdOptions::lease_ttl_s`] (etcd counts leases in whole seconds).
pub const MIN_LEASE_TTL_S: i64 = 1;
/// Largest [`EtcdOptions::lease_ttl_s`]: a successor never waits more than an hour.
pub const MAX_LEASE_TTL_S: i64 = 3600;

impl EtcdOptions {
    /// Defaults for `endpoints` and `prefix`: 5 s lease, 1 hour lock wait, 10 s requests,
    /// a snapshot every 10,000 changes.
    pub fn new(endpoints: Vec<String>, prefix: impl Into<String>) -> EtcdOptions {
        EtcdOptions {
            endpoints,
            prefix: prefix.into().trim_end_matches('/').to_string(),
            lease_ttl_s: 5,
            lock_timeout: Duration::from_secs(3600),
            request_timeout: Duration::from_secs(10),
            compact_after_changes: 10_000,
        }
    }

    /// Checks the settings: a clear [`Error::Config`] for a lease TTL out of bounds, no
    /// endpoint, a relative prefix or a zero request timeout.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_LEASE_TTL_S..=MAX_LEASE_TTL_S).contains(&self.lease_ttl_s) {
            return Err(Error::Config(format!(
                "etcd lease TTL {} s is out of bounds: it must be between {MIN_LEASE_TTL_S} and {MAX_LEASE_TTL_S} s",
                self.lease_ttl_s
            )));
        }
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return Err(Error::Config(format!(
                "etcd endpoints {:?}: expected HOST:PORT[,HOST:PORT...]",
                self.endpoints
            )));
        }
        if !self.prefix.starts_with('/') {
            return Err(Error::Config(format!("etcd key prefix {:?} must start with '/'", self.prefix)));
        }
        if self.request_timeout.is_zero() {
            return Err(Error::Config("the etcd request timeout must be positive".into()));
        }
        Ok(())
    }
}

struct State {
    /// Sequence number of the last change submitted.
    last_seq: u64,
    /// Sequence number up to which changes are committed in etcd.
    durable: u64,
    /// Log entries submitted but not yet written: (key, value).
    pending: Vec<(String, Vec<u8>)>,
    /// A thread is writing a group of entries.
    flushing: bool,
    since_compact: u64,
    failed: Option<String>,
}

/// Operations per etcd transaction (etcd's default `--max-txn-ops` is 128).
const MAX_TXN_OPS: usize = 120;

/// Log entries larger than this (bytes of JSON) are stored gzipped.
pub const COMPRESS_LOG_BYTES: usize = 64 * 1024;

/// The first bytes of a gzip stream (a JSON log entry starts with `[`).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Largest etcd response this store reads (the client's default is 4 MiB).
const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// A [`Store`] in etcd, held by one master at a time (see the module documentation).
pub struct EtcdStore {
    runtime: Option<tokio::runtime::Runtime>,
    client: Client,
    opts: EtcdOptions,
    id: String,
    lease: i64,
    lease_lost: Arc<AtomicBool>,
    state: Mutex<State>,
    written: Condvar,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").field("endpoints", &self.opts.endpoints).field("prefix", &self.opts.prefix).finish()
    }
}

impl EtcdStore {
    /// Connects, takes the leader lock (waiting up to `lock_timeout` while another master
    /// holds it) and keeps its lease alive in the background.
    pub fn open(opts: EtcdOptions) -> Result<EtcdStore> {
        opts.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("warren-etcd")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the etcd client runtime", e))?;
        let who = format!("etcd {}", opts.endpoints.join(","));
        let connect =
            ConnectOptions::new().with_connect_timeout(opts.request_timeout).with_timeout(opts.request_timeout);
        let mut client = runtime
            .block_on(Client::connect(&opts.endpoints, Some(connect)))
            .map_err(|e| Error::StoreFailed(format!("connecting to {who}: {e}")))?;
        let granted = runtime
            .block_on(client.lease_grant(opts.lease_ttl_s, None))
            .map_err(|e| Error::StoreFailed(format!("{who}: granting a lease: {e}")))?;
        let lease = granted.id();
        let ttl = Duration::from_secs(granted.ttl().max(1) as u64);
        if granted.ttl() > opts.lease_ttl_s {
            log::warn!(
                "master store: {who} raised the lease TTL from {} s to its minimum of {} s (1.5 x its --election-timeout)",
                opts.lease_ttl_s,
                granted.ttl()
            );
        }
        let lease_lost = Arc::new(AtomicBool::new(false));
        runtime.spawn(keep_alive(client.clone(), lease, ttl, lease_lost.clone()));
        let id = format!("pid {} lease {lease:x}", std::process::id());
        let store = EtcdStore {
            runtime: Some(runtime),
            client,
            opts,
            id,
            lease,
            lease_lost,
            state: Mutex::new(State {
                last_seq: 0,
                durable: 0,
                pending: Vec::new(),
                flushing: false,
                since_compact: 0,
                failed: None,
            }),
            written: Condvar::new(),
        };
        store.acquire()?;
        Ok(store)
    }

    /// This master's identity as written in the leader key.
    pub fn leader_id(&self) -> &str {
        &self.id
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}/{suffix}", self.opts.prefix)
    }

    fn log_key(&self, seq: u64) -> String {
        self.key(&format!("log/{seq:020}"))
    }

    fn who(&self) -> String {
        format!("etcd {} ({})", self.opts.endpoints.join(","), self.opts.prefix)
    }

    fn block_on<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        let rt = self.runtime.as_ref().expect("runtime lives until drop");
        // The timer must be created inside the runtime.
        match rt.block_on(async { tokio::time::timeout(self.opts.request_timeout, fut).await }) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Error::StoreFailed(format!("{}: {what}: {e}", self.who()))),
            Err(_) => Err(Error::Timeout {
                what: format!("{} to answer {what}", self.who()),
                after: self.opts.request_timeout,
            }),
        }
    }

    fn acquire(&self) -> Result<()> {
        let key = self.key("leader");
        let deadline = Instant::now() + self.opts.lock_timeout;
        let mut announced = false;
        loop {
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.clone(), self.id.clone(), Some(PutOptions::new().with_lease(self.lease)))])
                .or_else([TxnOp::get(key.clone(), None)]);
            let mut client = self.client.clone();
            let resp = self.block_on("taking the leader lock", async move { client.txn(txn).await })?;
            if resp.succeeded() {
                log::info!("master store: {} leader lock {key} taken ({})", self.who(), self.id);
                return Ok(());
            }
            if !announced {
                let holder = resp
                    .op_responses()
                    .into_iter()
                    .find_map(|r| match r {
                        etcd_client::TxnOpResponse::Get(g) => {
                            g.kvs().first().map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                        }
                        _ => None,
                    })
                    .unwrap_or_default();
                log::warn!("master store: {key} is held by another master ({holder}); waiting to take over");
                announced = true;
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("the leader lock {key} in {}", self.who()),
                    after: self.opts.lock_timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The condition of every write: we still hold the leader key.
    fn still_leader(&self) -> Compare {
        Compare::value(self.key("leader"), CompareOp::Equal, self.id.clone())
    }

    /// Writes `ops` (about `bytes` of keys and values) in one transaction, if this master
    /// still holds the leader lock.
    fn write(&self, what: &str, ops: Vec<TxnOp>, bytes: usize) -> Result<()> {
        if self.lease_lost.load(Ordering::Acquire) {
            return Err(Error::StoreFailed(format!("{}: the leader lease could not be kept alive", self.who())));
        }
        let txn = Txn::new().when([self.still_leader()]).and_then(ops);
        let mut client = self.client.clone();
        let resp = self.block_on(what, async move { client.txn(txn).await }).map_err(|e| too_large(e, what, bytes))?;
        if !resp.succeeded() {
            return Err(Error::StoreFailed(format!(
                "{}: this master ({}) no longer holds the leader lock; another master may serve the dataset",
                self.who(),
                self.id
            )));
        }
        Ok(())
    }

    fn fail(&self, st: &mut State, e: Error) -> Error {
        st.failed = Some(failure_text(&e));
        e
    }
}

/// Renews the lease three times per TTL. A renewal that fails or is late is retried; the
/// lease counts as lost only once a whole TTL has passed since the last renewal etcd
/// confirmed (etcd may then have expired it and given the lock to another master).
async fn keep_alive(mut client: Client, lease: i64, ttl: Duration, lost: Arc<AtomicBool>) {
    let period = ttl / 3;
    let mut confirmed = tokio::time::Instant::now();
    let mut stream = None;
    loop {
        let left = (confirmed + ttl).saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            log::error!("master store: the etcd lease {lease:x} could not be renewed for {ttl:?}; it may have expired");
            lost.store(true, Ordering::Release);
            return;
        }
        let sent = tokio::time::Instant::now();
        let renewed = tokio::time::timeout(left, async {
            if stream.is_none() {
                stream = Some(client.lease_keep_alive(lease).await?);
            }
            let (keeper, responses) = stream.as_mut().expect("opened above");
            keeper.keep_alive().await?;
            responses.message().await
        })
        .await;
        match renewed {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {
                confirmed = sent;
                tokio::time::sleep(period).await;
            }
            Ok(Ok(Some(_))) => {
                log::error!("master store: etcd says the lease {lease:x} expired");
                lost.store(true, Ordering::Release);
                return;
            }
            other => {
                log::warn!("master store: renewing the etcd lease {lease:x} failed ({other:?}); retrying");
                stream = None;
                tokio::time::sleep(period.min(Duration::from_millis(100))).await;
            }
        }
    }
}

/// What a failed store says from then on (the message of a [`Error::StoreFailed`], not its
/// display, which would repeat the variant's prefix).
fn failure_text(e: &Error) -> String {
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

fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).and_then(|()| enc.finish()).map_err(|e| Error::io("gzip-compressing a value for etcd", e))
}

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

impl Store for EtcdStore {
    fn submit(&self, changes: &[Change]) -> Result<Ticket> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &st.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        let Some(last) = changes.last() else {
            return Ok(Ticket(st.last_seq));
        };
        let json = serde_json::to_vec(changes).expect("changes serialize");
        let value = if json.len() > COMPRESS_LOG_BYTES { gzip(&json)? } else { json };
        st.pending.push((self.log_key(last.seq), value));
        st.last_seq = last.seq;
        st.since_compact += changes.len() as u64;
        Ok(Ticket(st.last_seq))
    }

    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        let deadline = Instant::now() + self.opts.request_timeout * 3;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(why) = &st.failed {
                return Err(Error::StoreFailed(why.clone()));
            }
            if st.durable >= ticket.0 {
                return Ok(());
            }
            if !st.flushing {
                // Become the writer of everything queued so far.
                let batch = std::mem::take(&mut st.pending);
                let upto = st.last_seq;
                st.flushing = true;
                drop(st);
                let result = batch.chunks(MAX_TXN_OPS).try_for_each(|group| {
                    let ops = group.iter().map(|(k, v)| TxnOp::put(k.clone(), v.clone(), None)).collect();
                    let bytes = group.iter().map(|(k, v)| k.len() + v.len()).sum();
                    self.write("logging changes", ops, bytes)
                });
                st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                st.flushing = false;
                match result {
                    Ok(()) => st.durable = st.durable.max(upto),
                    Err(e) => {
                        st.failed = Some(failure_text(&e));
                    }
                }
                self.written.notify_all();
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("{} to commit change {}", self.who(), ticket.0),
                    after: self.opts.request_timeout * 3,
                });
            }
            st = self.written.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    fn load(&self) -> Result<(Option<Snapshot>, Vec<Change>)> {
        let corrupt = |key: &str, why: String| Error::StoreCorrupt { path: key.into(), offset: 0, reason: why };
        let snap_key = self.key("snapshot");
        let mut kv = self.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES);
        let k = snap_key.clone();
        let resp = self.block_on("reading the snapshot", async move { kv.get(k, None).await })?;
        let snapshot = match resp.kvs().first() {
            None => None,
            Some(kv) => {
                let json = gunzip(kv.value()).map_err(|e| corrupt(&snap_key, e.to_string()))?;
                Some(serde_json::from_slice::<Snapshot>(&json).map_err(|e| corrupt(&snap_key, e.to_string()))?)
            }
        };
        let from = snapshot.as_ref().map_or(0, Snapshot::seq);
        let mut kv = self.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES);
        let prefix = self.key("log/");
        let opts = GetOptions::new().with_prefix().with_sort(SortTarget::Key, SortOrder::Ascend);
        let resp = self.block_on("reading the log", async move { kv.get(prefix, Some(opts)).await })?;
        let mut changes = Vec::new();
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let value = kv.value();
            let json = if value.starts_with(&GZIP_MAGIC) {
                std::borrow::Cow::Owned(gunzip(value).map_err(|e| corrupt(&key, e.to_string()))?)
            } else {
                std::borrow::Cow::Borrowed(value)
            };
            let batch: Vec<Change> = serde_json::from_slice(&json).map_err(|e| corrupt(&key, e.to_string()))?;
            changes.extend(batch.into_iter().filter(|c| c.seq > from));
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.last_seq = changes.last().map_or(from, |c| c.seq);
        st.durable = st.last_seq;
        st.since_compact = changes.len() as u64;
        Ok((snapshot, changes))
    }

    fn compact(&self, snapshot: &Snapshot) -> Result<()> {
        // Write the log up to the snapshot first, so its keys are not written after the
        // snapshot dropped them.
        self.wait_durable(Ticket(snapshot.seq()))?;
        let json = serde_json::to_vec(snapshot).expect("snapshots serialize");
        let value = gzip(&json)?;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &st.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        let drop_logs =
            TxnOp::delete(self.key("log/"), Some(DeleteOptions::new().with_range(self.log_key(snapshot.seq() + 1))));
        let bytes = value.len();
        match self.write("writing a snapshot", vec![TxnOp::put(self.key("snapshot"), value, None), drop_logs], bytes) {
            Ok(()) => {
                st.since_compact = st.last_seq.saturating_sub(snapshot.seq());
                Ok(())
            }
            Err(e) => Err(self.fail(&mut st, e)),
        }
    }

    fn wants_compaction(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).since_compact >= self.opts.compact_after_changes
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        let Some(rt) = self.runtime.take() else { return };
        // Give the lock up at once (instead of after the lease's TTL) when we may block here.
        if tokio::runtime::Handle::try_current().is_err() {
            let mut client = self.client.clone();
            let lease = self.lease;
            let _ =
                rt.block_on(
                    async move { tokio::time::timeout(Duration::from_secs(2), client.lease_revoke(lease)).await },
                );
        }
        rt.shutdown_background();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_bounds_are_clear_errors() {
        let ok = EtcdOptions::new(vec!["127.0.0.1:2379".into()], "/warren/x");
        assert!(ok.validate().is_ok());
        for ttl in [0, -1, 3601] {
            let err = EtcdOptions { lease_ttl_s: ttl, ..ok.clone() }.validate().unwrap_err();
            assert!(
                matches!(&err, Error::Config(m) if m.contains("lease TTL") && m.contains("between 1 and 3600")),
                "{err}"
            );
        }
        for ttl in [1, 3600] {
            assert!(EtcdOptions { lease_ttl_s: ttl, ..ok.clone() }.validate().is_ok());
        }
        assert!(matches!(EtcdOptions { endpoints: vec![], ..ok.clone() }.validate(), Err(Error::Config(_))));
        assert!(matches!(EtcdOptions { prefix: "x".into(), ..ok.clone() }.validate(), Err(Error::Config(_))));
        assert!(matches!(EtcdOptions { request_timeout: Duration::ZERO, ..ok }.validate(), Err(Error::Config(_))));
    }
}

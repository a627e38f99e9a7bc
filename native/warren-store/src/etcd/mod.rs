//! [`EtcdStore`]: a service's log kept in etcd, with a leader lock so that one writer at a
//! time serves a key prefix (Cargo feature `etcd`).
//!
//! Keys, under a prefix (one per job / dataset / service):
//!
//! - `<prefix>/leader`: the leader lock, created in a transaction only if absent and bound to
//!   the writer's lease. A second writer polls until the key is gone (the first one stopped
//!   and revoked its lease, or died and its lease expired after `lease_ttl_s`), then takes
//!   it and reloads the state.
//! - `<prefix>/format`: the [`Codec::FORMAT`] of the records (checked at open).
//! - `<prefix>/log/<seq, 20 digits>`: the records of one flush (several submits; see
//!   `value.rs`), keyed by its last record (so a snapshot at `seq` drops exactly the keys
//!   up to `seq`).
//! - `<prefix>/snapshot`: the gzipped snapshot written by [`Store::compact`], which drops
//!   the log keys it covers in the same transaction.
//!
//! Every write is a transaction conditioned on the leader key still holding this writer's
//! id, so a writer that lost its lease (partition, pause longer than the TTL) cannot
//! overwrite the state of its successor: its write fails and the store refuses further work
//! ([`Error::StoreFailed`]), which stops the service.
//!
//! **Group commit** (`flush.rs`): [`Store::submit`] queues the encoded records and starts a
//! flush if fewer than [`EtcdOptions::flushes_in_flight`] run; a flush writes everything
//! queued in one transaction, then takes what was queued meanwhile, until nothing is.
//! etcd fsyncs its raft log before it answers.
//!
//! Size limits: etcd refuses requests over its `--max-request-bytes` (1.5 MiB by default).
//! A flush over [`EtcdOptions::max_request_bytes`] is cut into several keys between submits;
//! bodies over [`COMPRESS_LOG_BYTES`] are stored gzipped (the master's dataset change lists
//! every chunk; paths repeat: about 10 times smaller), as is the snapshot. A write etcd
//! still refuses as too large fails with an error that gives its size and names
//! `--max-request-bytes`, the etcd setting to raise. Reads accept responses of any size.

mod flush;
pub mod lease;
mod value;

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};

use self::flush::{Log, State, failure_text};
pub use self::value::COMPRESS_LOG_BYTES;
use self::value::Entry;
pub use super::etcd_options::EtcdOptions;
use super::{Codec, Loaded, Store, Ticket};
use warren_base::error::{Error, Result};

/// Largest etcd response this store reads (the client's default is 4 MiB).
const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// A [`Store`] in etcd, held by one writer at a time (see the module documentation).
pub struct EtcdStore<C: Codec> {
    runtime: Option<tokio::runtime::Runtime>,
    log: Arc<Log>,
    lease: i64,
    format: PhantomData<fn() -> C>,
}

impl<C: Codec> std::fmt::Debug for EtcdStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.log.opts.endpoints)
            .field("prefix", &self.log.opts.prefix)
            .field("format", &C::FORMAT)
            .finish()
    }
}

impl<C: Codec> EtcdStore<C> {
    /// Connects, takes the leader lock (waiting up to `lock_timeout` while another writer
    /// holds it), keeps its lease alive in the background, and checks (or, on an empty
    /// prefix, records) the format: a prefix holding another [`Codec::FORMAT`] is
    /// [`Error::Config`] naming both.
    pub fn open(opts: EtcdOptions) -> Result<EtcdStore<C>> {
        opts.validate()?;
        let lease::Leased { runtime, client, lease, lost: lease_lost, .. } = lease::connect(&opts)?;
        let log = Log {
            client,
            opts,
            id: format!("pid {} lease {lease:x}", std::process::id()),
            lease_lost,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        };
        let store = EtcdStore { runtime: Some(runtime), log: Arc::new(log), lease, format: PhantomData };
        store.acquire()?;
        store.claim_format()?;
        Ok(store)
    }

    /// This writer's identity as written in the leader key.
    pub fn leader_id(&self) -> &str {
        &self.log.id
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime lives until drop")
    }

    /// Runs one etcd request to completion within the request timeout.
    fn request<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        lease::request(self.runtime(), &self.log.who(), what, self.log.opts.request_timeout, fut)
    }

    /// Reads one key's value, if present.
    fn get(&self, what: &str, key: String) -> Result<Option<Vec<u8>>> {
        let mut kv = self.log.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES);
        let resp = self.request(what, async move { kv.get(key, None).await })?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    fn acquire(&self) -> Result<()> {
        let key = self.log.key("leader");
        let deadline = Instant::now() + self.log.opts.lock_timeout;
        let mut announced = false;
        loop {
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key.clone(),
                    self.log.id.clone(),
                    Some(PutOptions::new().with_lease(self.lease)),
                )])
                .or_else([TxnOp::get(key.clone(), None)]);
            let mut client = self.log.client.clone();
            let resp = self.request("taking the leader lock", async move { client.txn(txn).await })?;
            if resp.succeeded() {
                log::info!("etcd store: {} leader lock {key} taken ({})", self.log.who(), self.log.id);
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
                log::warn!("etcd store: {key} is held by another writer ({holder}); waiting to take over");
                announced = true;
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("the leader lock {key} in {}", self.log.who()),
                    after: self.log.opts.lock_timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Checks the prefix's format key; records it on a prefix with no data yet.
    fn claim_format(&self) -> Result<()> {
        let key = self.log.key("format");
        match self.get("reading the format", key.clone())? {
            Some(found) if found == C::FORMAT.as_bytes() => Ok(()),
            Some(found) => Err(Error::Config(format!(
                "{} holds records of format {:?}, not {:?}: it belongs to another service (or an incompatible \
                 version); give this one its own prefix",
                self.log.who(),
                String::from_utf8_lossy(&found),
                C::FORMAT
            ))),
            None => {
                let mut kv = self.log.client.kv_client();
                let opts = GetOptions::new().with_prefix().with_keys_only().with_limit(2);
                let prefix = self.log.key("");
                let resp = self.request("listing the prefix", async move { kv.get(prefix, Some(opts)).await })?;
                let leader = self.log.key("leader");
                if resp.kvs().iter().any(|kv| kv.key() != leader.as_bytes()) {
                    return Err(Error::Config(format!(
                        "{} has data but no {key} naming its format (written by an earlier Warren build, or \
                         by something else); expected {:?}",
                        self.log.who(),
                        C::FORMAT
                    )));
                }
                let put = TxnOp::put(key, C::FORMAT, None);
                self.runtime().block_on(self.log.write("recording the format", vec![put], C::FORMAT.len()))
            }
        }
    }

    /// Decodes the log keys after the snapshot at `from`; a gap ends the log (see
    /// `flush.rs`): the keys after it are returned for deletion.
    fn decode_log(&self, from: u64, kvs: &[etcd_client::KeyValue]) -> Result<(Vec<C::Record>, Vec<String>)> {
        let corrupt = |key: &str, why: String| Error::StoreCorrupt { path: key.into(), offset: 0, reason: why };
        let mut records = Vec::new();
        let mut next = from + 1;
        for (i, kv) in kvs.iter().enumerate() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let mut batch = Vec::new();
            for payload in value::decode(kv.value()).map_err(|e| corrupt(&key, e))? {
                batch.extend(C::decode_records(&payload).map_err(|e| corrupt(&key, e.to_string()))?);
            }
            let Some(first) = batch.first().map(C::seq) else { continue };
            if first > next {
                let rest: Vec<String> =
                    kvs[i..].iter().map(|kv| String::from_utf8_lossy(kv.key()).into_owned()).collect();
                log::warn!(
                    "etcd store {}: records {next}..{} are missing (a flush that never committed); the {} later \
                     key(s) from {key} were never acknowledged and are dropped",
                    self.log.who(),
                    first - 1,
                    rest.len()
                );
                return Ok((records, rest));
            }
            for record in batch {
                let seq = C::seq(&record);
                if seq < next {
                    continue;
                }
                if seq != next {
                    return Err(corrupt(&key, format!("record {seq} where record {next} was expected")));
                }
                records.push(record);
                next += 1;
            }
        }
        Ok((records, Vec::new()))
    }
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).and_then(|()| enc.finish()).map_err(|e| Error::io("gzip-compressing a snapshot for etcd", e))
}

fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

impl<C: Codec> Store<C> for EtcdStore<C> {
    fn submit(&self, records: &[C::Record]) -> Result<Ticket> {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Ok(Ticket(self.log.lock().last_seq));
        };
        let mut payload = Vec::new();
        C::encode_records(records, &mut payload)?;
        let mut st = self.log.lock();
        if let Some(why) = &st.failed {
            return Err(Error::StoreFailed(why.clone()));
        }
        super::codec::check_numbering::<C>(&self.log.who(), st.last_seq, records)?;
        let entry = Entry { first: C::seq(first), last: C::seq(last), payload };
        self.log.submit(&mut st, entry, self.runtime().handle());
        Ok(Ticket(st.last_seq))
    }

    fn wait_durable(&self, ticket: Ticket) -> Result<()> {
        self.log.wait_durable(ticket)
    }

    fn load(&self) -> Result<Loaded<C>> {
        let corrupt = |key: &str, why: String| Error::StoreCorrupt { path: key.into(), offset: 0, reason: why };
        let snap_key = self.log.key("snapshot");
        let snapshot = match self.get("reading the snapshot", snap_key.clone())? {
            None => None,
            Some(value) => {
                let bytes = gunzip(&value).map_err(|e| corrupt(&snap_key, e.to_string()))?;
                Some(C::decode_snapshot(&bytes).map_err(|e| corrupt(&snap_key, e.to_string()))?)
            }
        };
        let from = snapshot.as_ref().map_or(0, C::snapshot_seq);
        let mut kv = self.log.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES);
        let prefix = self.log.key("log/");
        let opts = GetOptions::new().with_prefix().with_sort(SortTarget::Key, SortOrder::Ascend);
        let resp = self.request("reading the log", async move { kv.get(prefix, Some(opts)).await })?;
        let (records, unacknowledged) = self.decode_log(from, resp.kvs())?;
        if !unacknowledged.is_empty() {
            let ops = unacknowledged.into_iter().map(|k| TxnOp::delete(k, None)).collect();
            self.runtime().block_on(self.log.write("dropping unacknowledged log keys", ops, 0))?;
        }
        let mut st = self.log.lock();
        st.last_seq = records.last().map_or(from, C::seq);
        st.durable = st.last_seq;
        st.since_compact = records.len() as u64;
        Ok((snapshot, records))
    }

    fn compact(&self, snapshot: &C::Snapshot) -> Result<()> {
        let seq = C::snapshot_seq(snapshot);
        // Write the log up to the snapshot first, so its keys are not written after the
        // snapshot dropped them.
        self.wait_durable(Ticket(seq))?;
        let mut bytes = Vec::new();
        C::encode_snapshot(snapshot, &mut bytes).map_err(|e| Error::io("encoding a snapshot", e))?;
        let value = gzip(&bytes)?;
        let size = value.len();
        let drop_logs =
            TxnOp::delete(self.log.key("log/"), Some(DeleteOptions::new().with_range(self.log.log_key(seq + 1))));
        let ops = vec![TxnOp::put(self.log.key("snapshot"), value, None), drop_logs];
        match self.runtime().block_on(self.log.write("writing a snapshot", ops, size)) {
            Ok(()) => {
                let mut st = self.log.lock();
                st.since_compact = st.last_seq.saturating_sub(seq);
                Ok(())
            }
            Err(e) => {
                self.log.lock().failed = Some(failure_text(&e));
                self.log.changed.notify_all();
                Err(e)
            }
        }
    }

    fn wants_compaction(&self) -> bool {
        self.log.lock().since_compact >= self.log.opts.compact_after_changes
    }
}

impl<C: Codec> Drop for EtcdStore<C> {
    fn drop(&mut self) {
        let Some(rt) = self.runtime.take() else { return };
        // Give the lock up at once (instead of after the lease's TTL).
        lease::revoke(&rt, &self.log.client, self.lease);
        rt.shutdown_background();
    }
}

//! [`EtcdRegistry`]: servers and trainers of one job registered in a real etcd (Cargo feature
//! `etcd`), with keys bound to a lease of this process, renewed in the background and gone a
//! TTL after the process dies. The key names and decisions are in `registry.rs`.
//!
//! A lease can lapse while its process lives on (paused longer than the TTL, e.g. stopped, or
//! cut off from etcd): etcd then deletes its keys. The registry notices (the renewals fail
//! for a whole TTL, or etcd says the lease expired), takes a new lease and writes its keys
//! again, so a live server or trainer never runs unregistered for longer than that. A server's
//! index is written back only if it is still free (or still held by its old lease): if
//! another server took it meanwhile, this one stays unregistered and says so.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions};
use log::{info, warn};

use super::registry::{self, DEFAULT_PS_PREFIX, RegistryKeys};
use warren_base::error::{Error, Result};
use warren_store::EtcdOptions;
use warren_store::etcd::lease;

/// How often a wait for servers says which ones it still waits for.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How often the registry looks whether its lease was lost.
const LEASE_CHECK_EVERY: Duration = Duration::from_millis(100);

/// A key this process wrote, to write again under a new lease.
#[derive(Clone, Debug)]
struct Registration {
    key: String,
    value: String,
    /// A server's index: written back only if free, or held by the lapsed lease.
    exclusive: bool,
}

/// The keys this process wrote (the latest value of each).
type Registrations = Arc<Mutex<Vec<Registration>>>;

/// Records `r`, replacing an earlier value of its key.
fn remember(registered: &Registrations, r: Registration) {
    let mut all = registered.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|o| o.key != r.key);
    all.push(r);
}

/// One process's registration in etcd (a server's, or a trainer's): a client and a lease.
/// Dropping it revokes the lease, so its keys go at once.
pub struct EtcdRegistry {
    runtime: Option<tokio::runtime::Runtime>,
    client: Client,
    keys: RegistryKeys,
    /// The current lease (a new one after a lapse).
    lease: Arc<AtomicI64>,
    registered: Registrations,
    ttl: Duration,
    request_timeout: Duration,
    who: String,
}

impl std::fmt::Debug for EtcdRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdRegistry").field("who", &self.who).field("lease", &self.lease()).finish()
    }
}

impl EtcdRegistry {
    /// Connects to the etcd named by `spec` (`etcd:HOST:PORT[,HOST:PORT...][/PREFIX]`, prefix
    /// [`DEFAULT_PS_PREFIX`] if none) and takes a lease of `lease_ttl_s` seconds (1 to 3600;
    /// etcd may raise it to its minimum), renewed until this registry is dropped.
    pub fn connect(spec: &str, lease_ttl_s: i64) -> Result<EtcdRegistry> {
        let (endpoints, prefix) = warren_store::parse_etcd_spec(spec, DEFAULT_PS_PREFIX)?;
        let keys = RegistryKeys::new(&prefix)?;
        let mut opts = EtcdOptions::new(endpoints, prefix);
        opts.lease_ttl_s = lease_ttl_s;
        opts.validate()?;
        let who = format!("etcd {} ({})", opts.endpoints.join(","), keys.prefix());
        let leased = lease::connect(&opts)?;
        let lease = Arc::new(AtomicI64::new(leased.lease));
        let registered = Registrations::default();
        let renew = Renewal {
            client: leased.client.clone(),
            lease: lease.clone(),
            ttl: leased.ttl,
            registered: registered.clone(),
            who: who.clone(),
        };
        leased.runtime.spawn(renew.run(leased.lost));
        Ok(EtcdRegistry {
            runtime: Some(leased.runtime),
            client: leased.client,
            keys,
            lease,
            registered,
            ttl: leased.ttl,
            request_timeout: opts.request_timeout,
            who,
        })
    }

    /// The lease this registry's keys are bound to now.
    fn lease(&self) -> i64 {
        self.lease.load(Ordering::Acquire)
    }

    /// The TTL etcd granted this registry's lease: how long after this process dies its
    /// keys remain.
    pub fn lease_ttl(&self) -> Duration {
        self.ttl
    }

    /// The job's key names.
    pub fn keys(&self) -> &RegistryKeys {
        &self.keys
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("runtime lives until drop")
    }

    fn request<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        lease::request(self.runtime(), &self.who, what, self.request_timeout, fut)
    }

    fn txn(&self, what: &str, txn: Txn) -> Result<etcd_client::TxnResponse> {
        let mut client = self.client.clone();
        self.request(what, async move { client.txn(txn).await })
    }

    /// Records `servers` as the job's server count, or checks it against the one recorded.
    fn check_count(&self, servers: usize) -> Result<()> {
        let key = self.keys.count();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), servers.to_string(), None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.txn("recording the server count", txn)?;
        if resp.succeeded() {
            return Ok(());
        }
        let found = first_value(resp.op_responses()).unwrap_or_default();
        registry::check_count(&found, servers, self.keys.prefix())
    }

    /// The job's number of servers, as its first server recorded it (`None`: no server
    /// registered yet).
    pub fn server_count(&self) -> Result<Option<usize>> {
        let mut kv = self.client.kv_client();
        let key = self.keys.count();
        let resp = self.request("reading the server count", async move { kv.get(key, None).await })?;
        let Some(kv) = resp.kvs().first() else { return Ok(None) };
        let text = String::from_utf8_lossy(kv.value());
        text.parse().map(Some).map_err(|_| {
            Error::Config(format!(
                "{}: the server count {:?} under {} is not a number",
                self.who,
                text,
                self.keys.prefix()
            ))
        })
    }

    /// The indices of the servers registered now (listening or not).
    fn taken(&self, servers: usize) -> Result<Vec<usize>> {
        let mut kv = self.client.kv_client();
        let prefix = self.keys.servers();
        let opts = GetOptions::new().with_prefix().with_keys_only();
        let resp = self.request("listing the servers", async move { kv.get(prefix, Some(opts)).await })?;
        Ok(resp.kvs().iter().filter_map(|kv| self.keys.server_index(kv.key())).filter(|&i| i < servers).collect())
    }

    /// Claims a server index of a job of `servers` servers: `wanted`, or the first free one
    /// below `servers`, each with a transaction that creates `<prefix>/ps/<index>` only if
    /// absent (so two servers racing never get the same index), bound to this registry's
    /// lease. Waits up to `wait` while the index wanted (or every index) is taken (a server
    /// that died keeps its key for a lease TTL), then fails naming the taken indices. A count
    /// other than the job's first server's is [`Error::Config`].
    pub fn claim_server(&self, servers: usize, wanted: Option<usize>, wait: Duration) -> Result<usize> {
        registry::candidates(servers, wanted, &[])?;
        self.check_count(servers)?;
        let deadline = Instant::now() + wait;
        let mut announced = false;
        loop {
            let taken = self.taken(servers)?;
            for i in registry::candidates(servers, wanted, &taken)? {
                let key = self.keys.server(i);
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(self.lease())))]);
                if self.txn("claiming a server index", txn)?.succeeded() {
                    info!("ps registry: claimed {key} in {}", self.who);
                    remember(&self.registered, Registration { key, value: String::new(), exclusive: true });
                    return Ok(i);
                }
            }
            if Instant::now() >= deadline {
                let what = match wanted {
                    Some(i) => format!("server index {i} to be free (another server holds {})", self.keys.server(i)),
                    None => format!("a free server index below {servers} (taken: {taken:?})"),
                };
                return Err(Error::Timeout { what: format!("{what} in {}", self.who), after: wait });
            }
            if !announced {
                warn!(
                    "ps registry: {} taken in {}; waiting (a server that died keeps its key for its lease TTL)",
                    wanted.map_or(format!("every index below {servers}"), |i| format!("index {i}")),
                    self.who
                );
                announced = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Publishes server `index`'s address (once it listens), bound to this registry's lease.
    pub fn publish_server(&self, index: usize, uri: &str) -> Result<()> {
        let key = self.keys.server(index);
        let mut client = self.client.clone();
        let (k, v, opts) = (key.clone(), uri.to_string(), PutOptions::new().with_lease(self.lease()));
        self.request("publishing a server address", async move { client.put(k, v, Some(opts)).await })?;
        info!("ps registry: {key} = {uri}");
        remember(&self.registered, Registration { key, value: uri.to_string(), exclusive: true });
        Ok(())
    }

    /// Sets `<prefix>/trainer/<id>` to `value`, bound to this registry's lease (gone a TTL
    /// after this process dies); returns the key.
    pub fn register_trainer(&self, id: &str, value: &str) -> Result<String> {
        let key = self.keys.trainer(id);
        let mut client = self.client.clone();
        let (k, v, opts) = (key.clone(), value.to_string(), PutOptions::new().with_lease(self.lease()));
        self.request("registering a trainer", async move { client.put(k, v, Some(opts)).await })?;
        info!("ps registry: {key} registered");
        remember(&self.registered, Registration { key: key.clone(), value: value.to_string(), exclusive: false });
        Ok(key)
    }

    /// The ids of the trainers registered now (alive, or dead less than a lease TTL ago).
    pub fn trainers(&self) -> Result<Vec<String>> {
        let mut kv = self.client.kv_client();
        let prefix = self.keys.trainer("");
        let opts = GetOptions::new().with_prefix().with_keys_only();
        let p = prefix.clone();
        let resp = self.request("listing the trainers", async move { kv.get(p, Some(opts)).await })?;
        Ok(resp
            .kvs()
            .iter()
            .filter_map(|kv| std::str::from_utf8(kv.key()).ok()?.strip_prefix(&prefix).map(String::from))
            .collect())
    }

    /// The servers' addresses now, by index (`None`: not registered or not listening yet),
    /// with the revision they were read at.
    fn roster(&self, servers: usize) -> Result<(Vec<Option<String>>, i64)> {
        let mut kv = self.client.kv_client();
        let prefix = self.keys.servers();
        let opts = GetOptions::new().with_prefix();
        let resp = self.request("listing the servers", async move { kv.get(prefix, Some(opts)).await })?;
        let revision = resp.header().map_or(0, |h| h.revision());
        let roster = registry::roster(&self.keys, servers, resp.kvs().iter().map(|kv| (kv.key(), kv.value())));
        Ok((roster, revision))
    }

    /// Server `index`'s address now, if it is registered and listening.
    pub fn resolve(&self, index: usize) -> Result<Option<String>> {
        let mut kv = self.client.kv_client();
        let key = self.keys.server(index);
        let resp = self.request("reading a server address", async move { kv.get(key, None).await })?;
        Ok(resp
            .kvs()
            .first()
            .map(|kv| kv.value())
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned()))
    }

    /// Waits, watching `<prefix>/ps/`, until all `servers` servers are registered and
    /// listening; returns their addresses in index order. Says every few seconds which
    /// indices it waits for; after `timeout`, fails naming them.
    pub fn wait_servers(&self, servers: usize, timeout: Duration) -> Result<Vec<String>> {
        registry::candidates(servers, None, &[])?;
        self.check_count(servers)?;
        let started = Instant::now();
        let deadline = started + timeout;
        loop {
            let (roster, revision) = self.roster(servers)?;
            let missing = registry::missing(&roster);
            if missing.is_empty() {
                return Ok(roster.into_iter().map(|a| a.expect("none missing")).collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("parameter server(s) {missing:?} of {servers} to register in {}", self.who),
                    after: timeout,
                });
            }
            info!("ps registry: waiting for server(s) {missing:?} of {servers} in {}", self.who);
            self.wait_change(revision, left.min(PROGRESS_EVERY))?;
        }
    }

    /// Waits (at most `limit`) for a change under `<prefix>/ps/` after `revision`.
    fn wait_change(&self, revision: i64, limit: Duration) -> Result<()> {
        let mut client = self.client.clone();
        let prefix = self.keys.servers();
        let opts = WatchOptions::new().with_prefix().with_start_revision(revision + 1);
        let who = self.who.clone();
        self.runtime().block_on(async move {
            let watched = tokio::time::timeout(limit, async {
                let mut stream = client.watch(prefix, Some(opts)).await?;
                // The first message confirms the watch; wait for one with events.
                while let Some(resp) = stream.message().await? {
                    if !resp.events().is_empty() || resp.canceled() {
                        break;
                    }
                }
                Ok::<_, etcd_client::Error>(())
            })
            .await;
            match watched {
                Ok(Err(e)) => Err(Error::StoreFailed(format!("{who}: watching the servers: {e}"))),
                _ => Ok(()),
            }
        })
    }
}

/// What keeps a registry's keys in etcd when its lease lapses (see the module documentation).
struct Renewal {
    client: Client,
    lease: Arc<AtomicI64>,
    ttl: Duration,
    registered: Registrations,
    who: String,
}

impl Renewal {
    /// Watches `lost` (set by the lease's keep-alive); each time it is set: a new lease, kept
    /// alive, and the keys written again under it.
    async fn run(mut self, mut lost: Arc<AtomicBool>) {
        loop {
            while !lost.load(Ordering::Acquire) {
                tokio::time::sleep(LEASE_CHECK_EVERY).await;
            }
            let old = self.lease.load(Ordering::Acquire);
            warn!(
                "ps registry: the lease {old:x} in {} lapsed (paused or cut off for over {:?}?); registering again",
                self.who, self.ttl
            );
            let new = self.grant().await;
            self.lease.store(new, Ordering::Release);
            lost = Arc::new(AtomicBool::new(false));
            tokio::spawn(lease::keep_alive(self.client.clone(), new, self.ttl, lost.clone()));
            let all = self.registered.lock().unwrap_or_else(|p| p.into_inner()).clone();
            for r in all {
                self.write_again(&r, old, new).await;
            }
            // The old lease's keys are rewritten; let it go if etcd still has it.
            let _ = tokio::time::timeout(self.ttl, self.client.lease_revoke(old)).await;
        }
    }

    /// A new lease of the same TTL, asked for until etcd grants one.
    async fn grant(&mut self) -> i64 {
        let ttl_s = self.ttl.as_secs().max(1) as i64;
        loop {
            match tokio::time::timeout(self.ttl, self.client.lease_grant(ttl_s, None)).await {
                Ok(Ok(granted)) => return granted.id(),
                Ok(Err(e)) => warn!("ps registry: {}: granting a new lease: {e}; retrying", self.who),
                Err(_) => warn!("ps registry: {}: no answer to a new lease within {:?}; retrying", self.who, self.ttl),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Writes `r` again under lease `new`, retrying until etcd answers; a server index taken
    /// by another server meanwhile (not free, and not under lease `old`) is left to it.
    async fn write_again(&mut self, r: &Registration, old: i64, new: i64) {
        let put = || TxnOp::put(r.key.clone(), r.value.clone(), Some(PutOptions::new().with_lease(new)));
        let attempts: Vec<Txn> = if r.exclusive {
            vec![
                Txn::new().when([Compare::create_revision(r.key.clone(), CompareOp::Equal, 0)]).and_then([put()]),
                Txn::new().when([Compare::lease(r.key.clone(), CompareOp::Equal, old)]).and_then([put()]),
            ]
        } else {
            vec![Txn::new().and_then([put()])]
        };
        for txn in attempts {
            loop {
                match tokio::time::timeout(self.ttl, self.client.txn(txn.clone())).await {
                    Ok(Ok(resp)) if resp.succeeded() => {
                        info!("ps registry: {} registered again in {}", r.key, self.who);
                        return;
                    }
                    Ok(Ok(_)) => break,
                    Ok(Err(e)) => warn!("ps registry: {}: writing {} again: {e}; retrying", self.who, r.key),
                    Err(_) => warn!("ps registry: {}: no answer writing {} again; retrying", self.who, r.key),
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        log::error!(
            "ps registry: {} was taken by another process while this one's lease had lapsed: this process is \
             no longer registered there",
            r.key
        );
    }
}

fn first_value(ops: Vec<TxnOpResponse>) -> Option<Vec<u8>> {
    ops.into_iter().find_map(|r| match r {
        TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
        _ => None,
    })
}

impl Drop for EtcdRegistry {
    fn drop(&mut self) {
        let Some(rt) = self.runtime.take() else { return };
        lease::revoke(&rt, &self.client, self.lease());
        rt.shutdown_background();
    }
}

//! A lease (the etcd store's leader lock, a parameter server's or trainer's registration), renewed
//! in the background.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::etcd_options::EtcdOptions;
use warren_base::error::{Error, Result};

/// A connection to etcd with a lease of its own, renewed in the background.
pub struct Leased {
    /// The runtime the client and the renewals run on.
    pub runtime: tokio::runtime::Runtime,
    /// The client.
    pub client: Client,
    /// The lease id.
    pub lease: i64,
    /// The TTL etcd granted (it may raise the one asked for).
    pub ttl: Duration,
    /// Set once the lease could not be renewed for a whole TTL.
    pub lost: Arc<AtomicBool>,
}

/// Connects to `opts.endpoints`, grants a lease of `opts.lease_ttl_s` and keeps it alive.
pub fn connect(opts: &EtcdOptions) -> Result<Leased> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("warren-etcd")
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the etcd client runtime", e))?;
    let who = format!("etcd {}", opts.endpoints.join(","));
    let connect = ConnectOptions::new().with_connect_timeout(opts.request_timeout).with_timeout(opts.request_timeout);
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
            "etcd: {who} raised the lease TTL from {} s to its minimum of {} s (1.5 x its --election-timeout)",
            opts.lease_ttl_s,
            granted.ttl()
        );
    }
    let lost = Arc::new(AtomicBool::new(false));
    runtime.spawn(keep_alive(client.clone(), lease, ttl, lost.clone()));
    Ok(Leased { runtime, client, lease, ttl, lost })
}

/// Runs one etcd request to completion on `runtime` within `after`: an etcd error is
/// [`Error::StoreFailed`], no answer in time [`Error::Timeout`], both naming `who` and `what`.
pub fn request<T>(
    runtime: &tokio::runtime::Runtime,
    who: &str,
    what: &str,
    after: Duration,
    fut: impl std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
) -> Result<T> {
    // The timer must be created inside the runtime.
    match runtime.block_on(async { tokio::time::timeout(after, fut).await }) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::StoreFailed(format!("{who}: {what}: {e}"))),
        Err(_) => Err(Error::Timeout { what: format!("{who} to answer {what}"), after }),
    }
}

/// Revokes `lease` (its keys go at once instead of a TTL later), waiting at most 2 s, when
/// called outside an async context (where it may block); a no-op inside one.
pub fn revoke(runtime: &tokio::runtime::Runtime, client: &Client, lease: i64) {
    if tokio::runtime::Handle::try_current().is_err() {
        let mut client = client.clone();
        let _ = runtime
            .block_on(async move { tokio::time::timeout(Duration::from_secs(2), client.lease_revoke(lease)).await });
    }
}

/// Renews the lease three times per TTL. A renewal that fails or is late is retried; the
/// lease counts as lost only once a whole TTL has passed since the last renewal etcd
/// confirmed (etcd may then have expired it and given the lock to another master).
pub async fn keep_alive(mut client: Client, lease: i64, ttl: Duration, lost: Arc<AtomicBool>) {
    let period = ttl / 3;
    let mut confirmed = tokio::time::Instant::now();
    let mut stream = None;
    loop {
        let left = (confirmed + ttl).saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            log::error!("etcd: the etcd lease {lease:x} could not be renewed for {ttl:?}; it may have expired");
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
                log::error!("etcd: etcd says the lease {lease:x} expired");
                lost.store(true, Ordering::Release);
                return;
            }
            other => {
                log::warn!("etcd: renewing the etcd lease {lease:x} failed ({other:?}); retrying");
                stream = None;
                tokio::time::sleep(period.min(Duration::from_millis(100))).await;
            }
        }
    }
}

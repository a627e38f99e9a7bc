//! The leader lock's lease, renewed in the background.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::Client;

/// Renews the lease three times per TTL. A renewal that fails or is late is retried; the
/// lease counts as lost only once a whole TTL has passed since the last renewal etcd
/// confirmed (etcd may then have expired it and given the lock to another master).
pub(super) async fn keep_alive(mut client: Client, lease: i64, ttl: Duration, lost: Arc<AtomicBool>) {
    let period = ttl / 3;
    let mut confirmed = tokio::time::Instant::now();
    let mut stream = None;
    loop {
        let left = (confirmed + ttl).saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            log::error!("etcd store: the etcd lease {lease:x} could not be renewed for {ttl:?}; it may have expired");
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
                log::error!("etcd store: etcd says the lease {lease:x} expired");
                lost.store(true, Ordering::Release);
                return;
            }
            other => {
                log::warn!("etcd store: renewing the etcd lease {lease:x} failed ({other:?}); retrying");
                stream = None;
                tokio::time::sleep(period.min(Duration::from_millis(100))).await;
            }
        }
    }
}

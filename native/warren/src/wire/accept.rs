//! The server side of tokio services (tracker, master, parameter server): [`bind`] starts a
//! service's runtime and listener, [`serve`] accepts connections, authenticates each one on
//! its own task within [`HANDSHAKE_TIMEOUT`], and hands the survivors to the service.

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use log::warn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::auth::{PROOF_LEN, Purpose};
use super::handshake::{ACCEPTED, Challenge, REFUSED};
use super::preamble::{PREAMBLE_LEN, check_preamble, is_warren};
use crate::error::{Error, Result};

/// Time a new connection has to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A service's tokio runtime and the listener bound on it.
#[derive(Debug)]
pub struct Bound {
    /// The runtime the service runs on (its threads are named `warren-<service>`).
    pub runtime: tokio::runtime::Runtime,
    /// The listening socket.
    pub listener: TcpListener,
    /// The address bound (with the port chosen when 0 was asked for).
    pub addr: SocketAddr,
}

/// Starts a runtime of `threads` worker threads for `service` and binds `host:port` on it
/// (port 0: any free port). Errors name the service.
pub fn bind(service: &str, threads: usize, host: &str, port: u16) -> Result<Bound> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(format!("warren-{service}"))
        .enable_all()
        .build()
        .map_err(|e| Error::io(format!("starting {service} runtime"), e))?;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("{service} address {host}:{port}: {e}")))?
        .next()
        .ok_or_else(|| Error::Config(format!("{service} host {host:?} resolves to nothing")))?;
    let listener =
        runtime.block_on(TcpListener::bind(addr)).map_err(|e| Error::io(format!("binding {service} on {addr}"), e))?;
    let addr = listener.local_addr().map_err(|e| Error::io(format!("reading {service} address"), e))?;
    Ok(Bound { runtime, listener, addr })
}

/// Authenticates a newly accepted client for `purpose`: checks its preamble, challenges it,
/// verifies its proof of `secret` and answers the verdict. The error says why it was refused.
pub async fn accept_authenticated(
    mut stream: TcpStream,
    secret: &[u8],
    purpose: Purpose,
) -> std::result::Result<TcpStream, String> {
    let mut pre = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut pre).await.map_err(|e| e.to_string())?;
    let challenge = Challenge::new();
    if let Err(e) = check_preamble(&pre, "client") {
        if is_warren(&pre) {
            // Another version: our challenge tells it which one we speak (see `is_warren`).
            let _ = stream.write_all(&challenge.bytes()).await;
        }
        return Err(e.to_string());
    }
    stream.write_all(&challenge.bytes()).await.map_err(|e| e.to_string())?;
    let mut proof = [0u8; PROOF_LEN];
    stream.read_exact(&mut proof).await.map_err(|e| e.to_string())?;
    let ok = challenge.accepts(secret, purpose, &proof);
    stream.write_all(&[if ok { ACCEPTED } else { REFUSED }]).await.map_err(|e| e.to_string())?;
    if !ok {
        return Err("it does not hold the job secret".into());
    }
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Serves `listener` until the runtime shuts down: every connection is authenticated for
/// `purpose` on its own task within [`HANDSHAKE_TIMEOUT`], then handed to `handle`. Refused
/// connections and failed accepts are logged under the name `service`.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    secret: Arc<Vec<u8>>,
    purpose: Purpose,
    service: &'static str,
    handle: F,
) where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let handle = Arc::new(handle);
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let secret = secret.clone();
                let handle = handle.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept_authenticated(stream, &secret, purpose)).await
                    {
                        Ok(Ok(stream)) => handle(stream).await,
                        Ok(Err(reason)) => warn!("{service}: refused connection from {addr}: {reason}"),
                        Err(_) => warn!("{service}: refused connection from {addr}: handshake timed out"),
                    }
                });
            }
            Err(e) => {
                warn!("{service}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

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
use super::channel::ServiceStream;
use super::handshake::{ACCEPTED, CHALLENGE_LEN, Challenge, REFUSED};
use super::preamble::{PREAMBLE_LEN, check_mode, check_preamble, is_warren, preamble_with};
use super::tls::{self, Tls};
use warren_base::error::{Error, Result};

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
    let listener = {
        let _in_runtime = runtime.enter();
        listen(addr).map_err(|e| Error::io(format!("binding {service} on {addr}"), e))?
    };
    let addr = listener.local_addr().map_err(|e| Error::io(format!("reading {service} address"), e))?;
    Ok(Bound { runtime, listener, addr })
}

/// Connections a service's listener queues before it accepts them. A whole job's workers
/// connect at once (registration and heartbeats: two each), and a connection beyond the queue
/// is dropped by the kernel and retried by the client a second later or more: with 1,024
/// workers and tokio's default of 1,024, rendezvous took seconds. The kernel caps it at
/// `net.core.somaxconn`.
pub const LISTEN_BACKLOG: u32 = 8192;

/// A listener on `addr` (address reuse on, as `TcpListener::bind`) queuing up to
/// [`LISTEN_BACKLOG`] connections; inside a tokio runtime.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Authenticates a newly accepted client for `purpose`: checks its preamble, challenges it,
/// verifies its proof of `secret` and answers the verdict; with `tls`, first the TLS
/// handshake, then the proofs bound to the channel ([`super::tls`]). The error says why the
/// client was refused.
pub async fn accept_authenticated(
    mut stream: TcpStream,
    secret: &[u8],
    purpose: Purpose,
    tls: Option<&Tls>,
) -> std::result::Result<ServiceStream, String> {
    let mut pre = [0u8; PREAMBLE_LEN];
    stream.read_exact(&mut pre).await.map_err(|e| e.to_string())?;
    if let Some(tls) = tls {
        return accept_tls(stream, &pre, secret, purpose, tls).await.map(|s| ServiceStream::Tls(Box::new(s)));
    }
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
    Ok(ServiceStream::Plain(stream))
}

/// The TLS side of [`accept_authenticated`], once the client's preamble `pre` is read.
async fn accept_tls(
    mut stream: TcpStream,
    pre: &[u8; PREAMBLE_LEN],
    secret: &[u8],
    purpose: Purpose,
    tls: &Tls,
) -> std::result::Result<tokio_rustls::server::TlsStream<TcpStream>, String> {
    if let Err(e) = check_mode(pre, "the client", true) {
        if is_warren(pre) {
            // A plain client reads a challenge: this one's preamble tells it TLS is on here.
            let mut refusal = preamble_with(true).to_vec();
            refusal.resize(CHALLENGE_LEN, 0);
            let _ = stream.write_all(&refusal).await;
        }
        return Err(e.to_string());
    }
    stream.write_all(&preamble_with(true)).await.map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let mut s = tls.acceptor().accept(stream).await.map_err(|e| format!("TLS handshake failed: {e}"))?;
    let binding = tls::binding(s.get_ref().1).map_err(|e| e.to_string())?;
    s.write_all(&tls::server_proof(secret, purpose, &binding)).await.map_err(|e| e.to_string())?;
    s.flush().await.map_err(|e| e.to_string())?;
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).await.map_err(|e| {
        format!("it sent no proof of the job secret ({e}): it holds another job's secret, or refused ours")
    })?;
    let ok = tls::proof_holds(secret, purpose, &binding, &proof, false);
    s.write_all(&[if ok { ACCEPTED } else { REFUSED }]).await.map_err(|e| e.to_string())?;
    s.flush().await.map_err(|e| e.to_string())?;
    if !ok {
        return Err("it does not hold the job secret".into());
    }
    Ok(s)
}

/// Serves `listener` until the runtime shuts down: every connection is authenticated for
/// `purpose` (under TLS if `tls` is set) on its own task within [`HANDSHAKE_TIMEOUT`], then
/// handed to `handle`. Refused connections and failed accepts are logged under the name
/// `service`.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    secret: Arc<Vec<u8>>,
    tls: Option<Tls>,
    purpose: Purpose,
    service: &'static str,
    handle: F,
) where
    F: Fn(ServiceStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let handle = Arc::new(handle);
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let (secret, tls) = (secret.clone(), tls.clone());
                let handle = handle.clone();
                tokio::spawn(async move {
                    let accepted = accept_authenticated(stream, &secret, purpose, tls.as_ref());
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accepted).await {
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

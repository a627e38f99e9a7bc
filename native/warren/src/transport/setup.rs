//! Setting up links: every worker listens on one port; for each neighbour pair the higher rank
//! connects to the lower one (so set-up cannot deadlock: rank 0 only accepts) and proves it
//! holds the job secret with an HMAC over the acceptor's nonce and its own rank: the handshake
//! of [`crate::wire::handshake`] with [`Purpose::Peer`], whose hello carries the rank.
//!
//! Under TLS ([`crate::wire::tls`]) the connector is the TLS client: the hello carries the
//! TLS flag, the TLS handshake follows, and the proofs of the secret, bound to the channel,
//! run inside it; so does the transport offer. A link over TCP stays under TLS; a link over
//! shared memory moves its data through memory that never leaves the host, and its socket
//! carries only one-byte wake-ups from then on, unencrypted.
//!
//! Then the connector offers a transport: TCP, or (to a peer with the same host id, unless
//! shared memory is off) a shared-memory segment it created, by name. The acceptor takes it if
//! it can open it (it is on the same host after all), else the link stays on TCP.
//!
//! On the in-memory transport ([`super::mem`]) the listener is an entry in the process's
//! switchboard and a link a pair of queues: the connector hands the acceptor its rank and
//! the job secret it holds, which the acceptor checks as the handshake would.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use log::{debug, warn};
use socket2::SockRef;

use super::Link;
use super::mem::{self, MEM_HOST, MemEnd, MemListener};
use super::shm::{Segment, ShmEnd};
use crate::error::{Error, Result};
use crate::tracker::proto::PeerAddr;
use crate::wire::auth::{PROOF_LEN, Purpose};
use crate::wire::handshake::{
    ACCEPTED, CHALLENGE_LEN, Challenge, HandshakeFailure, REFUSED, client_channel, server_tls_proofs,
};
use crate::wire::{self, Backoff, Channel, PREAMBLE_LEN, Tls, read_exact_by, write_all_by};

/// Longest a single incoming connection may take to complete its handshake, so that a stray
/// client (or garbage on the port) cannot stall the set-up for long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connecting worker waits for a peer's handshake before it checks whether its
/// link round was superseded (and, if not, connects again).
const HANDSHAKE_SLICE: Duration = Duration::from_secs(2);

/// Pauses between attempts to reach a peer that is not listening yet.
const CONNECT_BACKOFF: Backoff = Backoff { first: Duration::from_millis(5), max: Duration::from_millis(500) };

/// Capacity of each direction of an in-memory link, in bytes.
const MEM_QUEUE: usize = 4 << 20;

/// The listening socket peers connect to, or this worker's entry in the switchboard of the
/// in-memory transport.
#[derive(Debug)]
pub struct PeerListener {
    accepts: Accepts,
    /// Host advertised to peers ([`MEM_HOST`] on the in-memory transport).
    pub host: String,
    /// Port bound (the switchboard's number on the in-memory transport).
    pub port: u16,
}

#[derive(Debug)]
enum Accepts {
    Tcp(TcpListener),
    Mem(MemListener),
}

impl PeerListener {
    /// Binds an ephemeral port on `host`.
    pub fn bind(host: &str) -> Result<PeerListener> {
        let listener =
            TcpListener::bind((host, 0)).map_err(|e| Error::io(format!("binding peer listener on {host}"), e))?;
        let port = listener.local_addr().map_err(|e| Error::io("reading listener address", e))?.port();
        listener.set_nonblocking(true).map_err(|e| Error::io("configuring peer listener", e))?;
        Ok(PeerListener { accepts: Accepts::Tcp(listener), host: host.to_string(), port })
    }

    /// Takes a number in the switchboard of the in-memory transport (advertised as host
    /// [`MEM_HOST`] and that number as the port).
    pub fn bind_in_memory() -> Result<PeerListener> {
        let listener = MemListener::bind()?;
        Ok(PeerListener { port: listener.port, accepts: Accepts::Mem(listener), host: MEM_HOST.to_string() })
    }

    /// Whether this listener is on the in-memory transport.
    pub fn is_in_memory(&self) -> bool {
        matches!(self.accepts, Accepts::Mem(_))
    }

    /// Accepts one in-memory link from one of `expected` ranks (not yet in `have`) before
    /// `deadline`: a connector that does not hold the job secret, or is not expected, is
    /// logged and its link ended.
    fn accept_in_memory(
        listener: &MemListener,
        setup: &LinkSetup,
        expected: &[usize],
        have: &[usize],
        cancel: &mut dyn FnMut() -> Result<()>,
    ) -> Result<(usize, MemEnd)> {
        let me = setup.me;
        loop {
            cancel()?;
            let now = Instant::now();
            if now >= setup.deadline {
                let missing: Vec<usize> = expected.iter().copied().filter(|r| !have.contains(r)).collect();
                return Err(Error::Timeout {
                    what: format!("peer ranks {missing:?} to connect to rank {me}"),
                    after: Duration::ZERO,
                });
            }
            let Some(c) = listener.accept(setup.deadline.min(now + Duration::from_millis(5))) else { continue };
            if c.end.is_gone() {
                // Left by a connector of an earlier link round that gave up.
                debug!("rank {me}: dropped an in-memory link from rank {} that had ended", c.rank);
            } else if c.secret != setup.secret {
                warn!("rank {me}: refused an in-memory link claiming rank {}: it does not hold the job secret", c.rank);
            } else if !expected.contains(&c.rank) || have.contains(&c.rank) {
                warn!("rank {me}: refused an in-memory link from rank {}, not an expected neighbour", c.rank);
            } else {
                return Ok((c.rank, c.end));
            }
        }
    }

    /// Accepts one authenticated connection from one of `expected` ranks (not yet in `have`)
    /// before `deadline`. Connections that fail the handshake are logged and dropped.
    fn accept_one(
        &self,
        setup: &LinkSetup,
        expected: &[usize],
        have: &[usize],
        cancel: &mut dyn FnMut() -> Result<()>,
    ) -> Result<(usize, Channel, Option<ShmEnd>)> {
        let LinkSetup { me, deadline, socket_buffer, .. } = *setup;
        let opts = LinkOptions { socket_buffer };
        let Accepts::Tcp(listener) = &self.accepts else { unreachable!("in-memory links are accepted apart") };
        loop {
            match listener.accept() {
                Ok((stream, addr)) => {
                    stream.set_nonblocking(false).map_err(|e| Error::io("configuring accepted socket", e))?;
                    let hs_deadline = deadline.min(Instant::now() + HANDSHAKE_TIMEOUT);
                    let accepted = accept_handshake(stream, setup, expected, have, hs_deadline, addr)
                        .and_then(|(rank, mut s)| Ok((rank, answer_shm(&mut s, setup, hs_deadline, addr)?, s)));
                    match accepted {
                        Ok((rank, shm, s)) => {
                            opts.apply(wire::Timed::socket(&s))?;
                            return Ok((rank, s, shm));
                        }
                        Err(e) => warn!("rank {me}: refused connection from {addr}: {e}"),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    cancel()?;
                    if Instant::now() >= deadline {
                        let missing: Vec<usize> = expected.iter().copied().filter(|r| !have.contains(r)).collect();
                        return Err(Error::Timeout {
                            what: format!("peer ranks {missing:?} to connect to rank {me}"),
                            after: Duration::ZERO,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("accepting peer connection", e)),
            }
        }
    }
}

/// Who is linking, with what secret, until when.
#[derive(Debug, Clone, Copy)]
pub struct LinkSetup<'a> {
    /// This worker's rank.
    pub me: usize,
    /// The job secret.
    pub secret: &'a [u8],
    /// TLS on the links, if on.
    pub tls: Option<&'a Tls>,
    /// When to give up.
    pub deadline: Instant,
    /// SO_SNDBUF / SO_RCVBUF, if set.
    pub socket_buffer: Option<usize>,
    /// Shared-memory links to peers on this host; `None`: TCP only.
    pub shm: Option<ShmSetup<'a>>,
}

/// Shared-memory links to peers on this host.
#[derive(Debug, Clone, Copy)]
pub struct ShmSetup<'a> {
    /// This worker's host id: a peer with the same one is offered shared memory.
    pub host_id: &'a str,
    /// Capacity of each ring (one per direction) in bytes: a power of two.
    pub ring: usize,
    /// Whether this end reads large transfers straight from the peer's memory where the
    /// kernel allows it (`process_vm_readv`), and lends its own.
    pub cma: bool,
}

/// Transport offers, sent by the connector after the handshake.
const OFFER_TCP: u8 = 0;
const OFFER_SHM: u8 = 1;
/// The acceptor's answer to a shared-memory offer.
const SHM_DECLINED: u8 = 0;
const SHM_TAKEN: u8 = 1;

/// Socket options of peer links.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkOptions {
    /// SO_SNDBUF and SO_RCVBUF, if set; else [`LOOPBACK_SOCKET_BUFFER`] on a loopback link
    /// where the kernel allows it, and the kernel's auto-tuning otherwise.
    pub socket_buffer: Option<usize>,
}

/// SO_SNDBUF and SO_RCVBUF of a loopback link (both ends on this host) unless set: 4 MiB. The
/// kernel's auto-tuning sometimes left a loopback link's buffers small for a whole job, and a
/// 16 MiB allreduce then took twice as long (docs/benchmarks.md, "The ring in slices, and
/// loopback socket buffers").
/// Used only where `net.core.wmem_max` and `rmem_max` allow it: a capped buffer would be
/// smaller than what auto-tuning reaches. Loopback has no bandwidth-delay product to size for.
pub const LOOPBACK_SOCKET_BUFFER: usize = 4 << 20;

/// Whether the kernel lets a socket set `n`-byte send and receive buffers.
fn kernel_allows_buffers(n: usize) -> bool {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let max = *MAX.get_or_init(|| {
        let read = |p: &str| std::fs::read_to_string(p).ok().and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
        read("/proc/sys/net/core/wmem_max").min(read("/proc/sys/net/core/rmem_max"))
    });
    max >= n
}

impl LinkOptions {
    fn apply(&self, s: &TcpStream) -> Result<()> {
        let sock = SockRef::from(s);
        sock.set_nodelay(true).map_err(|e| Error::io("setting TCP_NODELAY", e))?;
        let loopback = s.peer_addr().is_ok_and(|a| a.ip().is_loopback());
        let size = self
            .socket_buffer
            .or_else(|| (loopback && kernel_allows_buffers(LOOPBACK_SOCKET_BUFFER)).then_some(LOOPBACK_SOCKET_BUFFER));
        if let Some(n) = size {
            sock.set_send_buffer_size(n).map_err(|e| Error::io("setting SO_SNDBUF", e))?;
            sock.set_recv_buffer_size(n).map_err(|e| Error::io("setting SO_RCVBUF", e))?;
        }
        Ok(())
    }
}

fn accept_handshake(
    mut s: TcpStream,
    setup: &LinkSetup,
    expected: &[usize],
    have: &[usize],
    deadline: Instant,
    addr: SocketAddr,
) -> Result<(usize, Channel)> {
    let LinkSetup { me, secret, tls, .. } = *setup;
    let who = format!("connection from {addr}");
    let mut hello = [0u8; PREAMBLE_LEN + 4];
    read_exact_by(&mut s, &mut hello, deadline, &who)?;
    let pre: &[u8; PREAMBLE_LEN] = hello[..PREAMBLE_LEN].try_into().unwrap();
    let challenge = Challenge::new();
    if let Err(e) = wire::check_mode(pre, &who, tls.is_some()) {
        if wire::is_warren(pre) {
            // Another version, or TLS on one end only: our preamble tells it which we speak.
            let mut answer = challenge.bytes();
            answer[..PREAMBLE_LEN].copy_from_slice(&wire::preamble_with(tls.is_some()));
            let _ = write_all_by(&mut s, &answer[..CHALLENGE_LEN], deadline, &who);
        }
        return Err(e);
    }
    let rank = u32::from_le_bytes(hello[PREAMBLE_LEN..].try_into().unwrap()) as usize;
    let purpose = Purpose::Peer(rank as u32);
    let wanted = expected.contains(&rank) && !have.contains(&rank);
    let (s, ok) = match tls {
        None => {
            write_all_by(&mut s, &challenge.bytes(), deadline, &who)?;
            let mut proof = [0u8; PROOF_LEN];
            read_exact_by(&mut s, &mut proof, deadline, &who)?;
            let ok = challenge.accepts(secret, purpose, &proof);
            write_all_by(&mut s, &[if ok && wanted { ACCEPTED } else { REFUSED }], deadline, &who)?;
            (Channel::Plain(s), ok)
        }
        Some(tls) => {
            write_all_by(&mut s, &wire::preamble_with(true), deadline, &who)?;
            let mut ch = Channel::Server(Box::new(rustls::StreamOwned::new(tls.server()?, s)));
            let ok = server_tls_proofs(&mut ch, secret, purpose, wanted, deadline, &who)?;
            (ch, ok)
        }
    };
    if !ok {
        return Err(Error::Auth(format!("{who} claiming rank {rank} does not hold the job secret")));
    }
    if !wanted {
        return Err(Error::Protocol(format!(
            "{who} claims rank {rank}, which is not an expected neighbour of rank {me}"
        )));
    }
    Ok((rank, s))
}

fn connect_handshake(peer: &PeerAddr, setup: &LinkSetup, cancel: &mut dyn FnMut() -> Result<()>) -> Result<Channel> {
    let LinkSetup { me, secret, tls, deadline, socket_buffer, .. } = *setup;
    let opts = LinkOptions { socket_buffer };
    let who = format!("peer rank {} ({}:{})", peer.rank, peer.host, peer.port);
    let addrs: Vec<SocketAddr> = (peer.host.as_str(), peer.port)
        .to_socket_addrs()
        .map_err(|e| Error::io(format!("resolving {who}"), e))?
        .collect();
    let addr = *addrs.first().ok_or_else(|| Error::Config(format!("{who} has no address")))?;
    loop {
        let s = wire::connect_by(addr, deadline, &who, CONNECT_BACKOFF, None, &mut |e| {
            cancel()?;
            debug!("rank {me}: connecting to {who}: {e}; retrying");
            Ok(true)
        })?;
        opts.apply(&s)?;
        // The peer answers once it reaches its accept loop; until then the connection waits in
        // its backlog. A peer that gave up this link round never answers, so the wait is cut
        // into slices with `cancel` (which sees a new round) polled between them: waiting the
        // whole deadline here once kept a re-link round from completing for 30 s.
        let slice = deadline.min(Instant::now() + HANDSHAKE_SLICE);
        match client_channel(s, secret, Purpose::Peer(me as u32), tls, slice, &who) {
            Ok(ch) => return Ok(ch),
            Err(HandshakeFailure::Broken(Error::Timeout { .. })) if Instant::now() < deadline => {
                cancel()?;
                debug!("rank {me}: {who} has not answered the handshake yet; connecting again");
            }
            Err(HandshakeFailure::Broken(e)) => return Err(gone_while_linking(peer.rank, e)),
            Err(f) => return Err(f.into()),
        }
    }
}

/// Links rank `me` to each rank in `neighbours`: connects to the lower ranks, accepts the
/// higher ones. `peers` is indexed by rank. Returns the links in the order of `neighbours`.
/// `cancel` is polled while waiting for a peer; its error (e.g. "a new re-link round started:
/// the peer waited for is gone") ends the set-up at once.
pub fn connect_peers(
    listener: &PeerListener,
    setup: &LinkSetup,
    peers: &[PeerAddr],
    neighbours: &[usize],
    cancel: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<Link>> {
    if let Accepts::Mem(mem) = &listener.accepts {
        return connect_in_memory(mem, setup, peers, neighbours, cancel);
    }
    let me = setup.me;
    let mut streams: Vec<(usize, Channel, Option<ShmEnd>)> = Vec::new();
    for &p in neighbours.iter().filter(|&&p| p < me) {
        let mut s = connect_handshake(&peers[p], setup, cancel)?;
        let shm = offer_shm(&mut s, &peers[p], setup).map_err(|e| gone_while_linking(p, e))?;
        streams.push((p, s, shm));
    }
    let higher: Vec<usize> = neighbours.iter().copied().filter(|&p| p > me).collect();
    let mut have: Vec<usize> = Vec::new();
    while have.len() < higher.len() {
        let (rank, s, shm) = listener.accept_one(setup, &higher, &have, cancel)?;
        have.push(rank);
        streams.push((rank, s, shm));
    }
    let mut links = Vec::with_capacity(neighbours.len());
    for &n in neighbours {
        let i = streams.iter().position(|(r, _, _)| *r == n).expect("every neighbour was linked");
        let (_, s, shm) = streams.swap_remove(i);
        links.push(Link::new(n, s, shm)?);
    }
    Ok(links)
}

/// [`connect_peers`] on the in-memory transport: every peer must be on it too.
fn connect_in_memory(
    listener: &MemListener,
    setup: &LinkSetup,
    peers: &[PeerAddr],
    neighbours: &[usize],
    cancel: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<Link>> {
    let me = setup.me;
    let mut ends: Vec<(usize, MemEnd)> = Vec::new();
    for &p in neighbours.iter().filter(|&&p| p < me) {
        let peer = &peers[p];
        let elsewhere = peer.pid != 0 && peer.pid != std::process::id();
        if peer.host != MEM_HOST || elsewhere {
            return Err(Error::Config(format!(
                "rank {me} links through memory (WARREN_TRANSPORT=mem) but peer rank {p} listens on {}:{} in \
                 process {}: every worker of a job on the in-memory transport must be a thread of one process \
                 with WARREN_TRANSPORT=mem",
                peer.host, peer.port, peer.pid
            )));
        }
        let end = mem::connect(peer.port, me, setup.secret, MEM_QUEUE).map_err(|e| gone_while_linking(p, e))?;
        ends.push((p, end));
    }
    let higher: Vec<usize> = neighbours.iter().copied().filter(|&p| p > me).collect();
    let mut have: Vec<usize> = Vec::new();
    while have.len() < higher.len() {
        let (rank, end) = PeerListener::accept_in_memory(listener, setup, &higher, &have, cancel)?;
        have.push(rank);
        ends.push((rank, end));
    }
    let mut links = Vec::with_capacity(neighbours.len());
    for &n in neighbours {
        let i = ends.iter().position(|(r, _)| *r == n).expect("every neighbour was linked");
        links.push(Link::in_memory(n, ends.swap_remove(i).1));
    }
    Ok(links)
}

/// An error on the connection to peer `rank` while linking to it: the connection broke or
/// closed (the peer died after it accepted, a joiner exiting before it linked, say) is the
/// peer lost, which the caller recovers from by re-linking, as in a call; a timeout or any
/// other error is left as it is.
fn gone_while_linking(rank: usize, e: Error) -> Error {
    match e {
        Error::Io { .. } | Error::Protocol(_) => Error::PeerLost { rank, task: None, reason: e.to_string() },
        other => other,
    }
}

/// The connector's transport offer: a shared-memory segment to a peer with this worker's host
/// id (if it can create one), else TCP. Returns this end of the segment if the peer took it.
fn offer_shm(s: &mut Channel, peer: &PeerAddr, setup: &LinkSetup) -> Result<Option<ShmEnd>> {
    let me = setup.me;
    let who = format!("peer rank {} ({}:{})", peer.rank, peer.host, peer.port);
    let deadline = setup.deadline.min(Instant::now() + HANDSHAKE_TIMEOUT);
    let seg = match setup.shm {
        Some(o) if !o.host_id.is_empty() && o.host_id == peer.host_id => match Segment::create(o.ring) {
            Ok(seg) => Some(seg),
            Err(e) => {
                warn!("rank {me}: no shared memory for the link to rank {}: {e}; using TCP", peer.rank);
                None
            }
        },
        _ => None,
    };
    let Some(mut seg) = seg else {
        write_all_by(s, &[OFFER_TCP], deadline, &who)?;
        return Ok(None);
    };
    let name = seg.name();
    let mut offer = vec![OFFER_SHM, name.len() as u8];
    offer.extend_from_slice(name.as_bytes());
    write_all_by(s, &offer, deadline, &who)?;
    let mut answer = [0u8; 1];
    let answered = read_exact_by(s, &mut answer, deadline, &who);
    seg.unlink();
    answered?;
    if answer[0] != SHM_TAKEN {
        debug!("rank {me}: rank {} declined shared memory; using TCP", peer.rank);
        return Ok(None);
    }
    Ok(Some(ShmEnd::new(seg, 0, setup.shm.is_some_and(|o| o.cma))))
}

/// The acceptor's side of the transport offer: opens an offered segment if shared memory is
/// on here, and answers whether it took it.
fn answer_shm(s: &mut Channel, setup: &LinkSetup, deadline: Instant, addr: SocketAddr) -> Result<Option<ShmEnd>> {
    let who = format!("connection from {addr}");
    let mut kind = [0u8; 2];
    read_exact_by(s, &mut kind[..1], deadline, &who)?;
    match kind[0] {
        OFFER_TCP => return Ok(None),
        OFFER_SHM => {}
        other => {
            return Err(Error::Protocol(format!("{who} offered transport {other}, not {OFFER_TCP} or {OFFER_SHM}")));
        }
    }
    read_exact_by(s, &mut kind[1..], deadline, &who)?;
    let mut name = vec![0u8; kind[1] as usize];
    read_exact_by(s, &mut name, deadline, &who)?;
    let name = String::from_utf8_lossy(&name);
    let opened = setup.shm.map(|_| Segment::open(&name));
    // Both ends unlink the file (the creator once answered): whichever comes first.
    Segment::remove(&name);
    let end = match opened {
        Some(Ok(seg)) => Some(ShmEnd::new(seg, 1, setup.shm.is_some_and(|o| o.cma))),
        Some(Err(e)) => {
            warn!("rank {}: cannot use the shared memory {who} offered ({e}); using TCP", setup.me);
            None
        }
        None => None,
    };
    write_all_by(s, &[if end.is_some() { SHM_TAKEN } else { SHM_DECLINED }], deadline, &who)?;
    Ok(end)
}

//! One non-blocking link to a peer rank: over TCP (under TLS if on), or over shared memory
//! with a peer on the same host (the TCP socket then carries only wake-ups and the peer's
//! liveness), or over queues in memory with a peer that is a thread of the same process
//! (`mem`). The algorithms see the same byte stream either way.
//!
//! Under TLS a write hands bytes to the session, which encrypts them into records that the
//! socket may not take at once: a link with records still to send takes no new bytes until
//! they are out, the waiter sends them before it blocks ([`Link::arm`]), and every call ends
//! by flushing its links ([`Link::flush`]), so no byte a peer waits for stays behind here.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;

use super::mem::MemEnd;
use super::shm::{Fault, ShmEnd};
use super::tls_link::TlsLink;
use crate::error::{Error, Result};
use crate::wire::Channel;

/// Fewest bytes lent at once by [`Link::send_stable`] (below, the ring's two copies cost less
/// than the system call and page pinning of a loan).
pub const LEND_MIN: usize = 256 << 10;

/// A connected, authenticated, non-blocking link to the worker of rank `peer`.
#[derive(Debug)]
pub struct Link {
    /// Rank of the worker at the other end.
    pub peer: usize,
    medium: Medium,
}

/// What carries a link's bytes: the one place where the transports differ.
#[derive(Debug)]
enum Medium {
    /// A TCP socket, with the TLS session of a link under TLS.
    Tcp { stream: mio::net::TcpStream, tls: Option<Box<TlsLink>> },
    /// Rings in shared memory; the socket carries only wake-ups and the peer's liveness.
    Shm { stream: mio::net::TcpStream, shm: Shm },
    /// Queues in this process's memory (workers that are threads of one process).
    Mem(MemEnd),
}

/// The shared-memory side of a link.
#[derive(Debug)]
struct Shm {
    end: ShmEnd,
    /// Why the peer is gone (its socket closed), once known: reads fail once the ring is
    /// drained, writes at once.
    gone: Option<String>,
}

/// How a link carries data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Through the kernel's TCP stack.
    Tcp,
    /// Through rings in memory shared with a peer on the same host.
    Shm,
    /// Through queues in the memory of the one process both workers run in.
    Mem,
}

impl Transport {
    /// `"tcp"`, `"shm"` or `"mem"`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Shm => "shm",
            Transport::Mem => "mem",
        }
    }
}

impl Link {
    /// A link over `channel` (its TLS session, if any, is kept for a TCP link; a link over
    /// shared memory leaves it: its socket only carries wake-ups from then on).
    pub(crate) fn new(peer: usize, channel: Channel, shm: Option<ShmEnd>) -> Result<Link> {
        let (stream, session) = channel.into_parts();
        stream.set_nonblocking(true).map_err(|e| Error::io(format!("configuring link to rank {peer}"), e))?;
        let stream = mio::net::TcpStream::from_std(stream);
        let medium = match shm {
            Some(end) => Medium::Shm { stream, shm: Shm { end, gone: None } },
            None => Medium::Tcp { stream, tls: session.map(|s| Box::new(TlsLink::new(s))) },
        };
        Ok(Link { peer, medium })
    }

    /// A link over the in-memory transport.
    pub(crate) fn in_memory(peer: usize, end: MemEnd) -> Link {
        Link { peer, medium: Medium::Mem(end) }
    }

    /// Whether the link is encrypted (TLS).
    pub fn is_tls(&self) -> bool {
        matches!(&self.medium, Medium::Tcp { tls: Some(_), .. })
    }

    /// The socket a poll watches; none for an in-memory link (see [`Link::arm`]).
    pub(crate) fn source(&mut self) -> Option<&mut mio::net::TcpStream> {
        match &mut self.medium {
            Medium::Tcp { stream, .. } | Medium::Shm { stream, .. } => Some(stream),
            Medium::Mem(_) => None,
        }
    }

    /// How this link carries data.
    pub fn transport(&self) -> Transport {
        match self.medium {
            Medium::Tcp { .. } => Transport::Tcp,
            Medium::Shm { .. } => Transport::Shm,
            Medium::Mem(_) => Transport::Mem,
        }
    }

    /// Reads what is available into `buf`: `Ok(0)` if nothing is (or `buf` is empty); an error
    /// naming the peer if the link broke or the peer closed it.
    pub fn read_some(&mut self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let peer = self.peer;
        match &mut self.medium {
            Medium::Shm { stream, shm } => {
                let (n, wake) = shm.end.read(buf).map_err(|e| fault(peer, e))?;
                if n == 0 {
                    if let Some(why) = &shm.gone {
                        return Err(lost(peer, why));
                    }
                }
                wake_peer(stream, wake);
                Ok(n)
            }
            Medium::Tcp { stream, tls: Some(tls) } => tls.read(stream, buf, peer),
            Medium::Tcp { stream, tls: None } => loop {
                match stream.read(buf) {
                    Ok(0) => return Err(lost(peer, "closed the connection")),
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(lost(peer, &e.to_string())),
                }
            },
            Medium::Mem(end) => end.read(buf).map_err(|why| lost(peer, why)),
        }
    }

    /// Over shared memory, reads in place: hands `f` the next whole `elem`-byte elements (at
    /// most `max` bytes) where they lie, without a copy. Returns the bytes consumed (0: none
    /// available), or `None` when the link cannot (TCP, memory queues, or bytes that are not
    /// whole aligned elements in the ring): then [`Link::read_some`] them.
    pub fn read_in_place(&mut self, max: usize, elem: usize, f: &mut dyn FnMut(&[u8])) -> Result<Option<usize>> {
        let peer = self.peer;
        let Medium::Shm { stream, shm } = &mut self.medium else { return Ok(None) };
        match shm.end.read_in_place(max, elem, f).map_err(|e| fault(peer, e))? {
            None => Ok(None),
            Some((0, _)) => match &shm.gone {
                Some(why) => Err(lost(peer, why)),
                None => Ok(Some(0)),
            },
            Some((n, wake)) => {
                wake_peer(stream, wake);
                Ok(Some(n))
            }
        }
    }

    /// Sends bytes of `src` that stay unchanged and alive until this call's end: over shared
    /// memory with lending on ([`Link::can_lend`]), [`LEND_MIN`] bytes or more (or any that
    /// follow an open loan in memory) are lent, not copied: the peer copies them
    /// straight out of this process's memory. The caller must then wait until
    /// [`Link::lending`] turns false before it changes or frees them, or call
    /// [`Link::take_back`] first (a failure). Otherwise as [`Link::write_some`]. Returns the
    /// bytes taken: 0 if none now (also while fewer than [`LEND_MIN`] are offered and `more`
    /// will come: they are lent together; the last few of a transfer go through the ring).
    pub fn send_stable(&mut self, src: &[u8], more: bool) -> Result<usize> {
        if let Medium::Shm { stream, shm } = &mut self.medium {
            if shm.gone.is_none() && shm.end.can_lend() {
                if src.len() >= LEND_MIN || shm.end.extends(src) {
                    if let Some((n, wake)) = shm.end.lend(src) {
                        wake_peer(stream, wake);
                        return Ok(n);
                    }
                } else if more {
                    return Ok(0);
                }
            }
        }
        self.write_some(src)
    }

    /// Whether this end may lend ([`Link::send_stable`]): a shared-memory link whose peer can
    /// read this process's memory, with lending on at both ends (`WARREN_SHM_CMA`).
    pub fn can_lend(&self) -> bool {
        matches!(&self.medium, Medium::Shm { shm, .. } if shm.end.can_lend())
    }

    /// Whether the peer has yet to copy bytes lent to it ([`Link::send_stable`]); the next
    /// wait wakes when it has. An error if the peer is gone.
    pub fn lending(&mut self) -> Result<bool> {
        let Medium::Shm { shm, .. } = &mut self.medium else { return Ok(false) };
        if !shm.end.lending() {
            return Ok(false);
        }
        match &shm.gone {
            Some(why) => Err(lost(self.peer, why)),
            None => Ok(true),
        }
    }

    /// Takes back bytes lent and not yet copied (before changing or freeing them after a
    /// failure): the peer then fails the link instead of using them.
    pub fn take_back(&mut self) {
        if let Medium::Shm { shm, .. } = &mut self.medium {
            shm.end.revoke();
        }
    }

    /// Writes what the link accepts from `buf`: `Ok(0)` if it is full.
    pub fn write_some(&mut self, buf: &[u8]) -> Result<usize> {
        self.write_vectored_some(buf, &[])
    }

    /// Writes `a` then `b` with one `writev` (or one ring update), so a header and the first
    /// data go together.
    pub fn write_vectored_some(&mut self, a: &[u8], b: &[u8]) -> Result<usize> {
        let peer = self.peer;
        match &mut self.medium {
            Medium::Shm { stream, shm } => {
                if let Some(why) = &shm.gone {
                    return Err(lost(peer, why));
                }
                let (n, wake) = shm.end.write(a, b).map_err(|e| fault(peer, e))?;
                wake_peer(stream, wake);
                Ok(n)
            }
            Medium::Tcp { stream, tls: Some(tls) } => tls.write(stream, a, b, peer),
            Medium::Tcp { stream, tls: None } => {
                let bufs = [io::IoSlice::new(a), io::IoSlice::new(b)];
                let bufs = match (a.is_empty(), b.is_empty()) {
                    (true, true) => return Ok(0),
                    (false, true) => &bufs[..1],
                    (true, false) => &bufs[1..],
                    (false, false) => &bufs[..],
                };
                loop {
                    match stream.write_vectored(bufs) {
                        Ok(n) => return Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(lost(peer, &e.to_string())),
                    }
                }
            }
            Medium::Mem(end) => end.write(a, b).map_err(|why| lost(peer, why)),
        }
    }

    /// Closes both directions so that the peer sees the end of the link at once.
    pub fn close(&self) {
        match &self.medium {
            Medium::Tcp { stream, .. } | Medium::Shm { stream, .. } => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Medium::Mem(end) => end.close(),
        }
    }

    /// Sends what a TLS link still holds of earlier writes: `Ok(true)` once nothing is
    /// left (at once on a link without TLS), `Ok(false)` while the socket is full.
    pub fn flush(&mut self) -> Result<bool> {
        match &mut self.medium {
            Medium::Tcp { stream, tls: Some(tls) } => tls.flush(stream, self.peer),
            _ => Ok(true),
        }
    }

    /// Before the waiter blocks: a TLS link sends what it holds (the socket's writability
    /// wakes the waiter if it cannot); a shared-memory link asks its peer for a wake-up, and
    /// an in-memory link its queues for one through `waker`; both say whether what they
    /// waited for arrived meanwhile (then the waiter must not block).
    pub(crate) fn arm(&mut self, waker: &Arc<mio::Waker>) -> bool {
        match &mut self.medium {
            Medium::Tcp { tls: Some(_), .. } => {
                // A broken link shows in its next read or write.
                let _ = self.flush();
                false
            }
            Medium::Tcp { tls: None, .. } => false,
            // A gone peer is known already: its link's next read or write fails.
            Medium::Shm { shm, .. } => shm.gone.is_none() && shm.end.arm(),
            Medium::Mem(end) => end.arm(waker),
        }
    }

    /// After the waiter blocked: a shared-memory link takes back its wake-up request, drains
    /// the wake-up bytes from its socket, and learns there whether the peer is gone; an
    /// in-memory link takes back its requests.
    pub(crate) fn woke(&mut self) {
        match &mut self.medium {
            Medium::Tcp { .. } => {}
            Medium::Mem(end) => end.disarm(),
            Medium::Shm { stream, shm } => {
                shm.end.disarm();
                let mut sink = [0u8; 64];
                while shm.gone.is_none() {
                    match stream.read(&mut sink) {
                        Ok(0) => shm.gone = Some("closed the connection".into()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => shm.gone = Some(e.to_string()),
                    }
                }
            }
        }
    }
}

/// Wakes a peer that sleeps on a shared-memory link: one byte on the socket. A full socket
/// already holds wake-ups; a broken one shows on the next wait.
fn wake_peer(mut stream: &mio::net::TcpStream, needed: bool) {
    if needed {
        let _ = stream.write(&[1]);
    }
}

fn lost(peer: usize, reason: &str) -> Error {
    Error::PeerLost { rank: peer, task: None, reason: reason.to_string() }
}

fn fault(peer: usize, f: Fault) -> Error {
    match f {
        Fault::Corrupt(what) => Error::Protocol(format!("the shared-memory link with rank {peer}: {what}")),
        Fault::Gone(why) => lost(peer, &why),
    }
}

//! One non-blocking link to a peer rank: over TCP (under TLS if on), or over shared memory
//! with a peer on the same host (the TCP socket then carries only wake-ups and the peer's
//! liveness). The algorithms see the same byte stream either way.
//!
//! Under TLS a write hands bytes to the session, which encrypts them into records that the
//! socket may not take at once: a link with records still to send takes no new bytes until
//! they are out, the waiter sends them before it blocks ([`Link::arm`]), and every call ends
//! by flushing its links ([`Link::flush`]), so no byte a peer waits for stays behind here.

use std::io::{self, Read, Write};
use std::net::Shutdown;

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
    stream: mio::net::TcpStream,
    shm: Option<Shm>,
    /// The TLS session of a TCP link under TLS.
    tls: Option<Box<TlsLink>>,
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
}

impl Transport {
    /// `"tcp"` or `"shm"`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Shm => "shm",
        }
    }
}

impl Link {
    /// A link over `channel` (its TLS session, if any, is kept for a TCP link; a link over
    /// shared memory leaves it: its socket only carries wake-ups from then on).
    pub(crate) fn new(peer: usize, channel: Channel, shm: Option<ShmEnd>) -> Result<Link> {
        let (stream, session) = channel.into_parts();
        stream.set_nonblocking(true).map_err(|e| Error::io(format!("configuring link to rank {peer}"), e))?;
        let tls = if shm.is_some() { None } else { session.map(|s| Box::new(TlsLink::new(s))) };
        let shm = shm.map(|end| Shm { end, gone: None });
        Ok(Link { peer, stream: mio::net::TcpStream::from_std(stream), shm, tls })
    }

    /// Whether the link is encrypted (TLS).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub(crate) fn source(&mut self) -> &mut mio::net::TcpStream {
        &mut self.stream
    }

    /// How this link carries data.
    pub fn transport(&self) -> Transport {
        if self.shm.is_some() { Transport::Shm } else { Transport::Tcp }
    }

    /// Reads what is available into `buf`: `Ok(0)` if nothing is (or `buf` is empty); an error
    /// naming the peer if the link broke or the peer closed it.
    pub fn read_some(&mut self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(shm) = self.shm.as_mut() {
            let (n, wake) = shm.end.read(buf).map_err(|e| fault(self.peer, e))?;
            if n == 0 {
                if let Some(why) = &shm.gone {
                    return Err(lost(self.peer, why));
                }
            }
            self.wake(wake);
            return Ok(n);
        }
        if let Some(tls) = self.tls.as_mut() {
            return tls.read(&mut self.stream, buf, self.peer);
        }
        loop {
            match self.stream.read(buf) {
                Ok(0) => return Err(lost(self.peer, "closed the connection")),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(lost(self.peer, &e.to_string())),
            }
        }
    }

    /// Over shared memory, reads in place: hands `f` the next whole `elem`-byte elements (at
    /// most `max` bytes) where they lie, without a copy. Returns the bytes consumed (0: none
    /// available), or `None` when the link cannot (TCP, or bytes that are not whole aligned
    /// elements in the ring): then [`Link::read_some`] them.
    pub fn read_in_place(&mut self, max: usize, elem: usize, f: &mut dyn FnMut(&[u8])) -> Result<Option<usize>> {
        let Some(shm) = self.shm.as_mut() else { return Ok(None) };
        match shm.end.read_in_place(max, elem, f).map_err(|e| fault(self.peer, e))? {
            None => Ok(None),
            Some((0, _)) => match &shm.gone {
                Some(why) => Err(lost(self.peer, why)),
                None => Ok(Some(0)),
            },
            Some((n, wake)) => {
                self.wake(wake);
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
        if let Some(shm) = self.shm.as_mut().filter(|s| s.gone.is_none() && s.end.can_lend()) {
            if src.len() >= LEND_MIN || shm.end.extends(src) {
                if let Some((n, wake)) = shm.end.lend(src) {
                    self.wake(wake);
                    return Ok(n);
                }
            } else if more {
                return Ok(0);
            }
        }
        self.write_some(src)
    }

    /// Whether this end may lend ([`Link::send_stable`]): a shared-memory link whose peer can
    /// read this process's memory, with lending on at both ends (`WARREN_SHM_CMA`).
    pub fn can_lend(&self) -> bool {
        self.shm.as_ref().is_some_and(|s| s.end.can_lend())
    }

    /// Whether the peer has yet to copy bytes lent to it ([`Link::send_stable`]); the next
    /// wait wakes when it has. An error if the peer is gone.
    pub fn lending(&mut self) -> Result<bool> {
        let Some(shm) = self.shm.as_mut() else { return Ok(false) };
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
        if let Some(shm) = self.shm.as_mut() {
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
        if let Some(shm) = self.shm.as_mut() {
            if let Some(why) = &shm.gone {
                return Err(lost(self.peer, why));
            }
            let (n, wake) = shm.end.write(a, b).map_err(|e| fault(self.peer, e))?;
            self.wake(wake);
            return Ok(n);
        }
        if let Some(tls) = self.tls.as_mut() {
            return tls.write(&mut self.stream, a, b, self.peer);
        }
        let bufs = [io::IoSlice::new(a), io::IoSlice::new(b)];
        let bufs = match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ok(0),
            (false, true) => &bufs[..1],
            (true, false) => &bufs[1..],
            (false, false) => &bufs[..],
        };
        loop {
            match self.stream.write_vectored(bufs) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(lost(self.peer, &e.to_string())),
            }
        }
    }

    /// Closes both directions so that the peer sees the end of the link at once.
    pub fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Sends what a TLS link still holds of earlier writes: `Ok(true)` once nothing is
    /// left (at once on a link without TLS), `Ok(false)` while the socket is full.
    pub fn flush(&mut self) -> Result<bool> {
        match self.tls.as_mut() {
            Some(tls) => tls.flush(&mut self.stream, self.peer),
            None => Ok(true),
        }
    }

    /// Before the waiter blocks: a TLS link sends what it holds (the socket's writability
    /// wakes the waiter if it cannot); a shared-memory link asks its peer for a wake-up and
    /// says whether what it waited for arrived meanwhile (then the waiter must not block).
    pub(crate) fn arm(&mut self) -> bool {
        if self.tls.is_some() {
            // A broken link shows in its next read or write.
            let _ = self.flush();
            return false;
        }
        match self.shm.as_mut() {
            // A gone peer is known already: its link's next read or write fails.
            Some(shm) => shm.gone.is_none() && shm.end.arm(),
            None => false,
        }
    }

    /// After the waiter blocked: a shared-memory link takes back its wake-up request, drains
    /// the wake-up bytes from its socket, and learns there whether the peer is gone.
    pub(crate) fn woke(&mut self) {
        let Some(shm) = self.shm.as_mut() else { return };
        shm.end.disarm();
        let mut sink = [0u8; 64];
        while shm.gone.is_none() {
            match self.stream.read(&mut sink) {
                Ok(0) => shm.gone = Some("closed the connection".into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => shm.gone = Some(e.to_string()),
            }
        }
    }

    /// Wakes a peer that sleeps on this shared-memory link: one byte on the socket. A full
    /// socket already holds wake-ups; a broken one shows on the next wait.
    fn wake(&self, needed: bool) {
        if needed {
            let _ = (&self.stream).write(&[1]);
        }
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

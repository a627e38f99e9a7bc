//! One non-blocking TCP link to a peer rank.

use std::io::{self, Read, Write};
use std::net::Shutdown;

use crate::error::{Error, Result};

/// A connected, authenticated, non-blocking link to the worker of rank `peer`.
#[derive(Debug)]
pub struct Link {
    /// Rank of the worker at the other end.
    pub peer: usize,
    stream: mio::net::TcpStream,
}

impl Link {
    pub(crate) fn new(peer: usize, stream: std::net::TcpStream) -> Result<Link> {
        stream.set_nonblocking(true).map_err(|e| Error::io(format!("configuring link to rank {peer}"), e))?;
        Ok(Link { peer, stream: mio::net::TcpStream::from_std(stream) })
    }

    pub(crate) fn source(&mut self) -> &mut mio::net::TcpStream {
        &mut self.stream
    }

    /// Reads what is available into `buf`: `Ok(0)` if nothing is (or `buf` is empty); an error
    /// naming the peer if the link broke or the peer closed it.
    pub fn read_some(&mut self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.stream.read(buf) {
                Ok(0) => return Err(self.lost("closed the connection")),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e.to_string())),
            }
        }
    }

    /// Writes what the socket accepts from `buf`: `Ok(0)` if it is full.
    pub fn write_some(&mut self, buf: &[u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.stream.write(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e.to_string())),
            }
        }
    }

    /// Closes both directions so that the peer sees the end of the link at once.
    pub fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    fn lost(&self, reason: &str) -> Error {
        Error::PeerLost { rank: self.peer, task: None, reason: reason.to_string() }
    }
}

impl Link {
    /// Writes `a` then `b` with one `writev`, so a header and the first data go in one segment.
    pub fn write_vectored_some(&mut self, a: &[u8], b: &[u8]) -> Result<usize> {
        if a.is_empty() {
            return self.write_some(b);
        }
        if b.is_empty() {
            return self.write_some(a);
        }
        let bufs = [io::IoSlice::new(a), io::IoSlice::new(b)];
        loop {
            match self.stream.write_vectored(&bufs) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e.to_string())),
            }
        }
    }
}

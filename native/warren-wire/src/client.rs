//! The blocking client's side of a service connection: dial with backoff, authenticate, then
//! send and receive frames, every wait bound by a deadline.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::auth::Purpose;
use super::channel::Channel;
use super::deadline::Timed;
use super::deadline::{timed_out, write_all_by, write_all_vectored_by};
use super::frame::{MAX_FRAME, decode_frame_within, encode_frame};
use super::handshake::{HandshakeFailure, client_channel};
use super::inbox::Inbox;
use super::tls::Tls;
use warren_base::cancel::CancelHandle;
use warren_base::error::{Error, Result};

/// Resolves `uri` (`host:port`) to its first address; `what` names the service in errors
/// (`"tracker address \"h:1\": ..."`).
pub fn resolve(uri: &str, what: &str) -> Result<SocketAddr> {
    uri.to_socket_addrs()
        .map_err(|e| Error::Config(format!("{what} address {uri:?}: {e}")))?
        .next()
        .ok_or_else(|| Error::Config(format!("{what} address {uri:?} resolves to nothing")))
}

/// Pauses between connection attempts: doubling from `first` up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// The first pause.
    pub first: Duration,
    /// The longest pause.
    pub max: Duration,
}

/// Opens a TCP connection to `addr` before `deadline`. A failed attempt is tried again, after
/// a pause growing by `backoff`, if `again(&error)` says so; `again` may also end the
/// attempts with an error of its own. With `cancel`, a cancellation ends the attempts (and
/// the pause between two of them) at once with the cancellation's error. `who` names the
/// other end in errors.
pub fn connect_by(
    addr: SocketAddr,
    deadline: Instant,
    who: &str,
    backoff: Backoff,
    cancel: Option<&CancelHandle>,
    again: &mut dyn FnMut(&io::Error) -> Result<bool>,
) -> Result<TcpStream> {
    let started = Instant::now();
    let mut pause = backoff.first;
    loop {
        if let Some(c) = cancel {
            c.check()?;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(format!("connecting to {who}"), started, deadline));
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => return Ok(s),
            Err(e) if again(&e)? => {
                match cancel {
                    Some(c) => c.pause(pause.min(left))?,
                    None => std::thread::sleep(pause.min(left)),
                }
                pause = (pause * 2).min(backoff.max);
            }
            Err(e) => return Err(Error::io(format!("connecting to {who}"), e)),
        }
    }
}

/// An authenticated, blocking connection to a Warren service that carries frames (in plain
/// TCP or under TLS).
#[derive(Debug)]
pub struct Connection {
    stream: Channel,
    who: String,
    inbox: Inbox,
    max_frame: usize,
}

impl Connection {
    /// Authenticates over a connected `stream` for `purpose` before `deadline`, under TLS
    /// if `tls` is set; `who` names the service in errors.
    pub fn handshake(
        stream: TcpStream,
        secret: &[u8],
        purpose: Purpose,
        tls: Option<&Tls>,
        deadline: Instant,
        who: impl Into<String>,
    ) -> std::result::Result<Connection, HandshakeFailure> {
        let who = who.into();
        let _ = stream.set_nodelay(true);
        let stream = client_channel(stream, secret, purpose, tls, deadline, &who)?;
        Ok(Connection { stream, who, inbox: Inbox::default(), max_frame: MAX_FRAME })
    }

    /// Accepts frames of up to `max` body bytes instead of [`MAX_FRAME`] (for services that
    /// carry model parameters).
    pub fn set_max_frame(&mut self, max: usize) {
        self.max_frame = max;
    }

    /// The other end, as named in errors.
    pub fn who(&self) -> &str {
        &self.who
    }

    /// The socket (for its addresses, and to shut it down from another thread).
    pub fn stream(&self) -> &TcpStream {
        self.stream.socket()
    }

    /// Whether the connection is encrypted (TLS).
    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// Sends one message as a frame before `deadline`.
    pub fn send<T: Serialize>(&mut self, msg: &T, deadline: Instant) -> Result<()> {
        self.send_frame(&encode_frame(msg), deadline)
    }

    /// Sends a frame already encoded (its length prefix included) before `deadline`.
    pub fn send_frame(&mut self, frame: &[u8], deadline: Instant) -> Result<()> {
        write_all_by(&mut self.stream, frame, deadline, &self.who)
    }

    /// Sends one frame made of `parts` (its length prefix first), written as they are with
    /// vectored writes (no copy into one buffer), before `deadline`.
    pub fn send_parts(&mut self, parts: &[&[u8]], deadline: Instant) -> Result<()> {
        write_all_vectored_by(&mut self.stream, parts, deadline, &self.who)
    }

    /// Gives back a frame [`recv_frame`](Self::recv_frame) or
    /// [`next_buffered_frame`](Self::next_buffered_frame) returned, once read: a large one
    /// is reused to read the next large frame into (no fresh pages to fault in).
    pub fn recycle(&mut self, frame: Vec<u8>) {
        self.inbox.recycle(frame);
    }

    /// Receives the next message before `deadline`: `Ok(None)` if the other end closed the
    /// connection; [`Error::Protocol`] for a malformed frame, [`Error::Timeout`] naming the
    /// other end, or [`Error::Io`].
    pub fn recv<T: for<'de> Deserialize<'de>>(&mut self, deadline: Instant) -> Result<Option<T>> {
        self.recv_with(deadline, Connection::next_buffered)
    }

    /// [`recv`](Self::recv) of a whole frame as bytes (its length prefix included).
    pub fn recv_frame(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>> {
        self.recv_with(deadline, Connection::next_buffered_frame)
    }

    fn recv_with<T>(&mut self, deadline: Instant, next: fn(&mut Connection) -> Result<Option<T>>) -> Result<Option<T>> {
        let started = Instant::now();
        loop {
            if let Some(msg) = next(self)? {
                return Ok(Some(msg));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out(format!("a reply from {}", self.who), started, deadline));
            }
            self.stream.socket().set_read_timeout(Some(left)).map_err(|e| self.io("configuring socket to", e))?;
            match self.read_chunk() {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(timed_out(format!("a reply from {}", self.who), started, deadline));
                }
                Err(e) => return Err(self.io("reading from", e)),
            }
        }
    }

    /// Reads, without waiting, whatever has arrived; `Ok(false)` if the other end closed the
    /// connection. The messages are then taken with [`next_buffered`](Self::next_buffered).
    pub fn read_available(&mut self) -> Result<bool> {
        self.stream.socket().set_nonblocking(true).map_err(|e| self.io("configuring socket to", e))?;
        let read = loop {
            match self.read_chunk() {
                Ok(0) => break Ok(false),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(self.io("reading from", e)),
            }
        };
        self.stream.socket().set_nonblocking(false).map_err(|e| self.io("configuring socket to", e))?;
        read
    }

    /// The next whole message among those already read, if any.
    pub fn next_buffered<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>> {
        Ok(decode_frame_within::<T>(self.inbox.bytes(), self.max_frame)?.map(|(msg, used)| {
            self.inbox.consume(used);
            msg
        }))
    }

    /// The next whole frame among the bytes already read, if any, as bytes (its length
    /// prefix included).
    pub fn next_buffered_frame(&mut self) -> Result<Option<Vec<u8>>> {
        self.inbox.take_frame(self.max_frame)
    }

    /// One read, straight into the inbox (sized from the length of the frame being read).
    fn read_chunk(&mut self) -> io::Result<usize> {
        let n = self.stream.read(self.inbox.space(self.max_frame))?;
        self.inbox.filled(n);
        Ok(n)
    }

    fn io(&self, doing: &str, e: io::Error) -> Error {
        Error::io(format!("{doing} {}", self.who), e)
    }
}

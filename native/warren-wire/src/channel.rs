//! A connection's byte stream, plain or under TLS: [`Channel`] for the blocking ends (service
//! clients, peer-link set-up) and [`ServiceStream`] for tokio services. Either way the
//! deadline-bound reads and writes of [`super::deadline`] work on it, through the socket
//! beneath ([`Timed`]).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::{ClientConnection, ServerConnection, StreamOwned};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::auth::PROOF_LEN;
use super::deadline::Timed;
use warren_base::error::Result;

/// A blocking connection: plain TCP, or TLS as the client or the server.
#[derive(Debug)]
pub enum Channel {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS, this end the client.
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
    /// TLS, this end the server.
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Channel {
    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Channel::Plain(_))
    }

    /// The TLS channel binding (once the TLS handshake is complete); `None` for plain TCP.
    pub(crate) fn binding(&self) -> Result<Option<[u8; PROOF_LEN]>> {
        match self {
            Channel::Plain(_) => Ok(None),
            Channel::Client(s) => super::tls::binding(&s.conn).map(Some),
            Channel::Server(s) => super::tls::binding(&s.conn).map(Some),
        }
    }

    /// Completes the TLS handshake (a server's: a client's completes with its first read)
    /// before `deadline`; nothing to do in plain TCP. `who` names the other end in errors.
    pub(crate) fn complete_handshake(&mut self, deadline: std::time::Instant, who: &str) -> Result<()> {
        let started = std::time::Instant::now();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let done = match self {
                Channel::Plain(_) => return Ok(()),
                Channel::Client(s) => !s.conn.is_handshaking(),
                Channel::Server(s) => !s.conn.is_handshaking(),
            };
            if done {
                return Ok(());
            }
            if left.is_zero() {
                return Err(super::deadline::timed_out(
                    format!("{who} to complete the TLS handshake"),
                    started,
                    deadline,
                ));
            }
            let sock = self.socket();
            let timeouts = sock.set_read_timeout(Some(left)).and_then(|()| sock.set_write_timeout(Some(left)));
            timeouts.map_err(|e| warren_base::error::Error::io(format!("configuring socket to {who}"), e))?;
            let r = match self {
                Channel::Plain(_) => Ok((0, 0)),
                Channel::Client(s) => s.conn.complete_io(&mut s.sock),
                Channel::Server(s) => s.conn.complete_io(&mut s.sock),
            };
            match r {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(super::deadline::timed_out(
                        format!("{who} to complete the TLS handshake"),
                        started,
                        deadline,
                    ));
                }
                Err(e) => return Err(warren_base::error::Error::io(format!("TLS handshake with {who}"), e)),
            }
        }
    }

    /// The socket and, under TLS, the session (for a non-blocking link).
    pub fn into_parts(self) -> (TcpStream, Option<rustls::Connection>) {
        match self {
            Channel::Plain(s) => (s, None),
            Channel::Client(s) => {
                let (c, s) = s.into_parts();
                (s, Some(c.into()))
            }
            Channel::Server(s) => {
                let (c, s) = s.into_parts();
                (s, Some(c.into()))
            }
        }
    }
}

impl Timed for Channel {
    fn socket(&self) -> &TcpStream {
        match self {
            Channel::Plain(s) => s,
            Channel::Client(s) => &s.sock,
            Channel::Server(s) => &s.sock,
        }
    }
}

/// An end that closed without TLS's close_notify has closed all the same (a killed process).
fn eof_is_close(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        other => other,
    }
}

impl Read for Channel {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Channel::Plain(s) => s.read(buf),
            Channel::Client(s) => eof_is_close(s.read(buf)),
            Channel::Server(s) => eof_is_close(s.read(buf)),
        }
    }
}

impl Write for Channel {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Channel::Plain(s) => s.write(buf),
            Channel::Client(s) => s.write(buf),
            Channel::Server(s) => s.write(buf),
        }
    }

    /// Plain TCP writes the slices with one `writev`; TLS takes them one at a time (it
    /// copies them into records anyway).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Channel::Plain(s) => s.write_vectored(bufs),
            Channel::Client(s) => s.write_vectored(bufs),
            Channel::Server(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Channel::Plain(s) => s.flush(),
            Channel::Client(s) => s.flush(),
            Channel::Server(s) => s.flush(),
        }
    }
}

/// A tokio service's connection once authenticated: plain TCP or TLS.
#[derive(Debug)]
pub enum ServiceStream {
    /// Plain TCP.
    Plain(tokio::net::TcpStream),
    /// TLS (this end the server).
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
}

impl ServiceStream {
    /// The client's address.
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            ServiceStream::Plain(s) => s.peer_addr(),
            ServiceStream::Tls(s) => s.get_ref().0.peer_addr(),
        }
    }

    /// A read half and a write half that can be used at once (from two tasks).
    pub fn into_split(self) -> (tokio::io::ReadHalf<ServiceStream>, tokio::io::WriteHalf<ServiceStream>) {
        tokio::io::split(self)
    }
}

impl AsyncRead for ServiceStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServiceStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ServiceStream::Tls(s) => match Pin::new(s.as_mut()).poll_read(cx, buf) {
                // A client that closed without close_notify (a killed process) has closed.
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
                other => other,
            },
        }
    }
}

impl AsyncWrite for ServiceStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServiceStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ServiceStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServiceStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ServiceStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServiceStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ServiceStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

//! Blocking reads and writes bound by a deadline, for handshakes and blocking clients: a
//! silent or stalled other end becomes a timeout naming it, never a hang.

use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use warren_base::error::{Error, Result};

/// A blocking stream whose waits are bound through its TCP socket's timeouts.
pub trait Timed: Read + Write {
    /// The TCP socket beneath.
    fn socket(&self) -> &TcpStream;
}

impl Timed for TcpStream {
    fn socket(&self) -> &TcpStream {
        self
    }
}

/// The timeout of a wait for `what` that began at `started` with `deadline`: it says how long
/// it waited, or (a zero duration) that the deadline had already passed when the wait began.
pub(crate) fn timed_out(what: impl Into<String>, started: Instant, deadline: Instant) -> Error {
    let after = if deadline <= started { Duration::ZERO } else { started.elapsed() };
    Error::Timeout { what: what.into(), after }
}

/// Reads exactly `buf.len()` bytes from a blocking stream before `deadline`; `who` names the
/// other end in errors.
pub fn read_exact_by(stream: &mut impl Timed, buf: &mut [u8], deadline: Instant, who: &str) -> Result<()> {
    let started = Instant::now();
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(who, started, deadline));
        }
        stream
            .socket()
            .set_read_timeout(Some(left))
            .map_err(|e| Error::io(format!("configuring socket to {who}"), e))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(Error::Protocol(format!("{who} closed the connection"))),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(timed_out(who, started, deadline));
            }
            Err(e) => return Err(Error::io(format!("reading from {who}"), e)),
        }
    }
    Ok(())
}

/// Writes all of `parts`, in order, to a blocking stream before `deadline`, with vectored
/// writes (`writev`): the parts are not copied into one buffer first.
pub fn write_all_vectored_by(stream: &mut impl Timed, parts: &[&[u8]], deadline: Instant, who: &str) -> Result<()> {
    let started = Instant::now();
    let left = deadline.saturating_duration_since(started);
    if left.is_zero() {
        return Err(timed_out(who, started, deadline));
    }
    stream.socket().set_write_timeout(Some(left)).map_err(|e| Error::io(format!("configuring socket to {who}"), e))?;
    let mut slices: Vec<IoSlice<'_>> = parts.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match stream.write_vectored(rest) {
            Ok(0) => {
                let e = std::io::Error::from(std::io::ErrorKind::WriteZero);
                return Err(Error::io(format!("writing to {who}"), e));
            }
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(timed_out(format!("{who} to take our bytes"), started, deadline));
            }
            Err(e) => return Err(Error::io(format!("writing to {who}"), e)),
        }
    }
    stream.flush().map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            timed_out(format!("{who} to take our bytes"), started, deadline)
        }
        _ => Error::io(format!("writing to {who}"), e),
    })
}

/// Writes all of `buf` to a blocking stream before `deadline`.
pub fn write_all_by(stream: &mut impl Timed, buf: &[u8], deadline: Instant, who: &str) -> Result<()> {
    let started = Instant::now();
    let left = deadline.saturating_duration_since(started);
    if left.is_zero() {
        return Err(timed_out(who, started, deadline));
    }
    stream.socket().set_write_timeout(Some(left)).map_err(|e| Error::io(format!("configuring socket to {who}"), e))?;
    stream.write_all(buf).and_then(|()| stream.flush()).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            timed_out(format!("{who} to take our bytes"), started, deadline)
        }
        _ => Error::io(format!("writing to {who}"), e),
    })
}

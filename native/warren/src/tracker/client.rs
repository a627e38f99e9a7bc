//! The worker's side of the tracker connection: blocking, every wait with a deadline.
//! The connection stays open for the life of the worker: the tracker uses it to see the worker
//! go, and to push notifications (a peer came back) that are queued here.

use std::collections::VecDeque;
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::proto::{FromTracker, ToTracker};
use crate::error::{Error, Result};
use crate::wire::auth::{self, PROOF_LEN, Purpose};
use crate::wire::{self, read_exact_by, write_all_by};

/// An authenticated connection to the tracker.
#[derive(Debug)]
pub struct TrackerClient {
    stream: TcpStream,
    uri: String,
    inbox: Vec<u8>,
    notifications: VecDeque<FromTracker>,
}

impl TrackerClient {
    /// Connects to `uri` (`host:port`) and proves we hold `secret`, before `deadline`.
    pub fn connect(uri: &str, secret: &[u8], deadline: Instant) -> Result<TrackerClient> {
        let who = format!("tracker {uri}");
        let addr = uri
            .to_socket_addrs()
            .map_err(|e| Error::Config(format!("tracker address {uri:?}: {e}")))?
            .next()
            .ok_or_else(|| Error::Config(format!("tracker address {uri:?} resolves to nothing")))?;
        let mut backoff = Duration::from_millis(10);
        let mut stream = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout { what: format!("connecting to {who}"), after: Duration::ZERO });
            }
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::thread::sleep(backoff.min(left));
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(Error::io(format!("connecting to {who}"), e)),
            }
        };
        let _ = stream.set_nodelay(true);
        write_all_by(&mut stream, &wire::preamble(), deadline, &who)?;
        let mut challenge = [0u8; 8 + PROOF_LEN];
        read_exact_by(&mut stream, &mut challenge, deadline, &who)?;
        wire::check_preamble(challenge[..8].try_into().unwrap(), &who)?;
        write_all_by(&mut stream, &auth::prove(secret, Purpose::Tracker, &challenge[8..]), deadline, &who)?;
        let mut status = [0u8; 1];
        read_exact_by(&mut stream, &mut status, deadline, &who)?;
        if status[0] != 1 {
            return Err(Error::Auth(format!("{who} refused us: wrong job secret")));
        }
        Ok(TrackerClient { stream, uri: uri.to_string(), inbox: Vec::new(), notifications: VecDeque::new() })
    }

    /// Our address as seen on this connection (the interface that reaches the tracker).
    pub fn local_ip(&self) -> Result<IpAddr> {
        Ok(self.stream.local_addr().map_err(|e| Error::io("reading local address", e))?.ip())
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &ToTracker, deadline: Instant) -> Result<()> {
        let who = format!("tracker {}", self.uri);
        write_all_by(&mut self.stream, &wire::encode_frame(msg), deadline, &who)
    }

    /// Receives the next message that is not a notification (notifications are queued).
    pub fn recv(&mut self, deadline: Instant) -> Result<FromTracker> {
        loop {
            let msg = self.recv_any(deadline)?;
            match msg {
                FromTracker::RoundStarted { .. } => self.notifications.push_back(msg),
                FromTracker::Error { message } => return Err(Error::Tracker(message)),
                other => return Ok(other),
            }
        }
    }

    /// Sends a request and waits for its reply.
    pub fn request(&mut self, msg: &ToTracker, deadline: Instant) -> Result<FromTracker> {
        self.send(msg, deadline)?;
        self.recv(deadline)
    }

    /// Reads, without waiting, whatever the tracker has sent, and returns whether a re-link
    /// round has started since the last call (the notifications are consumed).
    pub fn round_started(&mut self) -> Result<bool> {
        let who = format!("tracker {}", self.uri);
        self.stream.set_nonblocking(true).map_err(|e| Error::io(format!("configuring socket to {who}"), e))?;
        let mut chunk = [0u8; 4096];
        let read = loop {
            match std::io::Read::read(&mut self.stream, &mut chunk) {
                Ok(0) => break Err(Error::Tracker(format!("{who} closed the connection"))),
                Ok(n) => self.inbox.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(Error::io(format!("reading from {who}"), e)),
            }
        };
        self.stream.set_nonblocking(false).map_err(|e| Error::io(format!("configuring socket to {who}"), e))?;
        read?;
        while let Some((msg, used)) = wire::decode_frame::<FromTracker>(&self.inbox)? {
            self.inbox.drain(..used);
            match msg {
                FromTracker::Error { message } => return Err(Error::Tracker(message)),
                other => self.notifications.push_back(other),
            }
        }
        let started = self.notifications.iter().any(|m| matches!(m, FromTracker::RoundStarted { .. }));
        self.notifications.clear();
        Ok(started)
    }

    /// Notifications received so far, oldest first.
    pub fn take_notifications(&mut self) -> Vec<FromTracker> {
        self.notifications.drain(..).collect()
    }

    fn recv_any(&mut self, deadline: Instant) -> Result<FromTracker> {
        let who = format!("tracker {}", self.uri);
        loop {
            if let Some((msg, used)) = wire::decode_frame::<FromTracker>(&self.inbox)? {
                self.inbox.drain(..used);
                return Ok(msg);
            }
            let mut chunk = [0u8; 4096];
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout { what: format!("a reply from {who}"), after: Duration::ZERO });
            }
            self.stream.set_read_timeout(Some(left)).map_err(|e| Error::io("configuring tracker socket", e))?;
            match std::io::Read::read(&mut self.stream, &mut chunk) {
                Ok(0) => return Err(Error::Tracker(format!("{who} closed the connection"))),
                Ok(n) => self.inbox.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Err(Error::Timeout { what: format!("a reply from {who}"), after: Duration::ZERO });
                }
                Err(e) => return Err(Error::io(format!("reading from {who}"), e)),
            }
        }
    }
}

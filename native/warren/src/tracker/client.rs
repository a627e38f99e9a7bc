//! The worker's side of the tracker connection: blocking, every wait with a deadline.
//! The connection stays open for the life of the worker: the tracker uses it to see the worker
//! go, and to push notifications (a peer came back) that are queued here.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::proto::{FromTracker, ToTracker};
use crate::cancel::CancelHandle;
use crate::error::{Error, Result};
use crate::wire::auth::Purpose;
use crate::wire::{self, Backoff, Connection, Tls};

/// Pauses between attempts to reach a tracker that is not listening yet.
const CONNECT_BACKOFF: Backoff = Backoff { first: Duration::from_millis(10), max: Duration::from_secs(1) };

/// An authenticated connection to the tracker.
#[derive(Debug)]
pub struct TrackerClient {
    conn: Connection,
    notifications: VecDeque<FromTracker>,
}

impl TrackerClient {
    /// Connects to `uri` (`host:port`) and proves we hold `secret` (under TLS if `tls` is
    /// set), before `deadline`. A tracker that refuses connections (not started yet) is tried
    /// again until then, or until `cancel` (if given) is cancelled: then the cancellation's
    /// error comes back at once.
    pub fn connect(
        uri: &str,
        secret: &[u8],
        tls: Option<&Tls>,
        deadline: Instant,
        cancel: Option<&CancelHandle>,
    ) -> Result<TrackerClient> {
        let who = format!("tracker {uri}");
        let addr = wire::resolve(uri, "tracker")?;
        let stream = wire::connect_by(addr, deadline, &who, CONNECT_BACKOFF, cancel, &mut |e| {
            Ok(e.kind() == std::io::ErrorKind::ConnectionRefused)
        })?;
        let conn = Connection::handshake(stream, secret, Purpose::Tracker, tls, deadline, who)?;
        Ok(TrackerClient { conn, notifications: VecDeque::new() })
    }

    /// Connects once, for a tool run by a person (`warren ctl`): a refused connection is an
    /// error at once, naming the address, instead of being tried again until `deadline` (as
    /// [`TrackerClient::connect`] does for workers, which may start before their tracker).
    pub fn connect_now(uri: &str, secret: &[u8], tls: Option<&Tls>, deadline: Instant) -> Result<TrackerClient> {
        let who = format!("tracker {uri}");
        let addr = wire::resolve(uri, "tracker")?;
        let stream = wire::connect_by(addr, deadline, &who, CONNECT_BACKOFF, None, &mut |e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                return Err(Error::Tracker(format!(
                    "nothing listens at {uri} (connection refused): is the job still running? Its tracker's \
                     address is the WARREN_TRACKER_URI line that warren run or warren tracker printed"
                )));
            }
            Ok(false)
        })?;
        let conn = Connection::handshake(stream, secret, Purpose::Tracker, tls, deadline, who)?;
        Ok(TrackerClient { conn, notifications: VecDeque::new() })
    }

    /// Our address as seen on this connection (the interface that reaches the tracker).
    pub fn local_ip(&self) -> Result<IpAddr> {
        Ok(self.conn.stream().local_addr().map_err(|e| Error::io("reading local address", e))?.ip())
    }

    /// The connection's socket (for cancellation, which shuts it down).
    pub fn socket(&self) -> &std::net::TcpStream {
        self.conn.stream()
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &ToTracker, deadline: Instant) -> Result<()> {
        self.conn.send(msg, deadline)
    }

    /// Receives the next message that is not a notification (notifications are queued).
    pub fn recv(&mut self, deadline: Instant) -> Result<FromTracker> {
        loop {
            let msg = self.conn.recv(deadline)?.ok_or_else(|| self.closed())?;
            match msg {
                FromTracker::RoundStarted { .. } => self.notifications.push_back(msg),
                FromTracker::Error { message } => return Err(Error::Tracker(message)),
                FromTracker::JobFailed { message } => return Err(Error::JobFailed(message)),
                FromTracker::Fenced { message } => return Err(Error::Fenced(message)),
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
        if !self.conn.read_available()? {
            return Err(self.closed());
        }
        while let Some(msg) = self.conn.next_buffered::<FromTracker>()? {
            match msg {
                FromTracker::Error { message } => return Err(Error::Tracker(message)),
                FromTracker::JobFailed { message } => return Err(Error::JobFailed(message)),
                FromTracker::Fenced { message } => return Err(Error::Fenced(message)),
                other => self.notifications.push_back(other),
            }
        }
        let started = self.notifications.iter().any(|m| matches!(m, FromTracker::RoundStarted { .. }));
        self.notifications.clear();
        Ok(started)
    }

    /// After this worker's shutdown was acknowledged: waits (until `deadline`) for the
    /// tracker to say the whole job is done (`true`), or that a re-link round opened (`false`:
    /// a member lost before it finished is being replaced, and the finished members re-link
    /// to serve it; the notification is consumed).
    pub fn await_job_done(&mut self, deadline: Instant) -> Result<bool> {
        loop {
            if let Some(i) = self.notifications.iter().position(|m| matches!(m, FromTracker::RoundStarted { .. })) {
                self.notifications.drain(..=i);
                return Ok(false);
            }
            match self.conn.recv(deadline)?.ok_or_else(|| self.closed())? {
                FromTracker::JobDone => return Ok(true),
                FromTracker::Error { message } => return Err(Error::Tracker(message)),
                FromTracker::JobFailed { message } => return Err(Error::JobFailed(message)),
                FromTracker::Fenced { message } => return Err(Error::Fenced(message)),
                other => self.notifications.push_back(other),
            }
        }
    }

    /// Notifications received so far, oldest first.
    pub fn take_notifications(&mut self) -> Vec<FromTracker> {
        self.notifications.drain(..).collect()
    }

    fn closed(&self) -> Error {
        Error::Tracker(format!("{} closed the connection", self.conn.who()))
    }
}

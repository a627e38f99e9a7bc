//! The worker's side of the master connection: blocking, reconnecting, every call bounded by
//! a deadline.
//!
//! A call that fails on the way (connection refused or reset, the master killed and not yet
//! restarted, a reply cut short) is retried on a new connection with backoff until its
//! deadline; then it fails with [`Error::Timeout`] naming the master's address and the last
//! problem. A wrong job secret, an endpoint that is not a Warren master, and errors the
//! master reports (dataset mismatch, bad argument) are not retried.
//!
//! Retrying makes delivery at-least-once: a `get_task` whose reply was lost leaves a task
//! pending on the master until it times out, and a `task_finished` whose reply was lost and
//! that is sent again gets [`Ack::Stale`] the second time.

use std::time::{Duration, Instant};

use super::proto::{MasterStatus, Reply, Request, reply_error, reply_fits};
use super::queue::{Ack, GetTask, TaskId};
use warren_base::error::{Error, Result};
use warren_wire::auth::Purpose;
use warren_wire::{self as wire, Backoff, Connection, HandshakeFailure};

/// One connection attempt per call attempt: [`MasterClient`] retries whole calls itself.
const NO_RETRY: Backoff = Backoff { first: Duration::ZERO, max: Duration::ZERO };

/// Deadlines and backoff of a [`MasterClient`].
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long one call may take, retries and reconnections included (default 120 s:
    /// long enough for a supervisor to restart a killed master).
    pub call_timeout: Duration,
    /// First pause between attempts; doubled after each failure up to `max_backoff`.
    pub backoff: Duration,
    /// Longest pause between attempts.
    pub max_backoff: Duration,
    /// TLS (default `None`: plain TCP, as the master must be).
    pub tls: Option<warren_wire::Tls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: Duration::from_secs(120),
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(500),
            tls: None,
        }
    }
}

/// An attempt's failure: retry on a new connection, or give up at once.
enum Failure {
    Retry(Error),
    Fatal(Error),
}

/// A connection to the data master that reconnects as needed.
#[derive(Debug)]
pub struct MasterClient {
    uri: String,
    secret: Vec<u8>,
    opts: ClientOptions,
    conn: Option<Connection>,
    connections: u64,
}

impl MasterClient {
    /// A client of the master at `uri` (`host:port`) holding `secret`. Connects lazily, at
    /// the first call.
    pub fn new(uri: impl Into<String>, secret: impl AsRef<[u8]>, opts: ClientOptions) -> MasterClient {
        MasterClient { uri: uri.into(), secret: secret.as_ref().to_vec(), opts, conn: None, connections: 0 }
    }

    /// Like [`new`](Self::new), then connects and authenticates now (so a wrong secret or
    /// address shows at once).
    pub fn connect(uri: impl Into<String>, secret: impl AsRef<[u8]>, opts: ClientOptions) -> Result<MasterClient> {
        let mut c = MasterClient::new(uri, secret, opts);
        c.status()?;
        Ok(c)
    }

    /// The master's address.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// How many times a connection was (re)opened after the first.
    pub fn reconnects(&self) -> u64 {
        self.connections.saturating_sub(1)
    }

    /// Sets the dataset (see [`Request::SetDataset`]).
    pub fn set_dataset(&mut self, patterns: &[String], chunks_per_task: u32) -> Result<()> {
        match self.call(&Request::SetDataset { patterns: patterns.to_vec(), chunks_per_task })? {
            Reply::Done => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks for a task of `pass`.
    pub fn get_task(&mut self, pass: u64) -> Result<GetTask> {
        match self.call(&Request::GetTask { pass })? {
            Reply::Task { task } => Ok(task),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Reports a task finished.
    pub fn task_finished(&mut self, id: TaskId, epoch: u64) -> Result<Ack> {
        match self.call(&Request::TaskFinished { id, epoch })? {
            Reply::Ack { ack } => Ok(ack),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Reports a task failed.
    pub fn task_failed(&mut self, id: TaskId, epoch: u64, reason: impl Into<String>) -> Result<Ack> {
        match self.call(&Request::TaskFailed { id, epoch, reason: reason.into() })? {
            Reply::Ack { ack } => Ok(ack),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Reports a task finished and gets the next task of `pass` in one round trip (and one
    /// durable write on the master).
    pub fn finish_and_get_task(&mut self, id: TaskId, epoch: u64, pass: u64) -> Result<(Ack, GetTask)> {
        match self.call(&Request::FinishAndGetTask { id, epoch, pass })? {
            Reply::FinishedAndTask { ack, task } => Ok((ack, task)),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The master's counts.
    pub fn status(&mut self) -> Result<MasterStatus> {
        match self.call(&Request::Status)? {
            Reply::Status { status } => Ok(status),
            other => Err(self.unexpected(&other)),
        }
    }

    fn unexpected(&self, reply: &Reply) -> Error {
        Error::Protocol(format!("master {} sent an unexpected reply {reply:?}", self.uri))
    }

    /// Sends `req` and returns the reply, retrying on new connections until the deadline.
    fn call(&mut self, req: &Request) -> Result<Reply> {
        let deadline = Instant::now() + self.opts.call_timeout;
        let mut backoff = self.opts.backoff;
        loop {
            let err = match self.attempt(req, deadline) {
                Ok(Reply::Error { kind, message }) if !kind.is_retryable() => {
                    return Err(reply_error(kind, message, &self.uri));
                }
                Ok(Reply::Error { kind, message }) => reply_error(kind, message, &self.uri),
                Ok(reply) if reply_fits(req, &reply) => return Ok(reply),
                Ok(reply) => return Err(self.unexpected(&reply)),
                Err(Failure::Fatal(e)) => {
                    self.conn = None;
                    return Err(e);
                }
                Err(Failure::Retry(e)) => e,
            };
            self.conn = None;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: format!("master {} to answer {} (last error: {err})", self.uri, op_name(req)),
                    after: self.opts.call_timeout,
                });
            }
            log::debug!("master {}: {err}; retrying in {backoff:?}", self.uri);
            std::thread::sleep(backoff.min(left));
            backoff = (backoff * 2).min(self.opts.max_backoff);
        }
    }

    fn attempt(&mut self, req: &Request, deadline: Instant) -> std::result::Result<Reply, Failure> {
        if self.conn.is_none() {
            self.conn = Some(self.open(deadline)?);
            self.connections += 1;
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.send(req, deadline).map_err(Failure::Retry)?;
        match conn.recv::<Reply>(deadline) {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => Err(Failure::Retry(Error::Master(format!("{} closed the connection", self.uri)))),
            Err(Error::Protocol(m)) => Err(Failure::Fatal(Error::Protocol(format!("{}: {m}", conn.who())))),
            Err(e) => Err(Failure::Retry(e)),
        }
    }

    /// Connects and authenticates once.
    fn open(&self, deadline: Instant) -> std::result::Result<Connection, Failure> {
        let who = format!("master {}", self.uri);
        let addr = wire::resolve(&self.uri, "master").map_err(Failure::Fatal)?;
        let stream =
            wire::connect_by(addr, deadline, &who, NO_RETRY, None, &mut |_| Ok(false)).map_err(Failure::Retry)?;
        Connection::handshake(stream, &self.secret, Purpose::Master, self.opts.tls.as_ref(), deadline, who).map_err(
            |f| match f {
                HandshakeFailure::Broken(e) => Failure::Retry(e),
                HandshakeFailure::Refused(e) => Failure::Fatal(e),
            },
        )
    }
}

fn op_name(req: &Request) -> &'static str {
    match req {
        Request::SetDataset { .. } => "set_dataset",
        Request::GetTask { .. } => "get_task",
        Request::TaskFinished { .. } => "task_finished",
        Request::TaskFailed { .. } => "task_failed",
        Request::FinishAndGetTask { .. } => "finish_and_get_task",
        Request::Status => "status",
    }
}

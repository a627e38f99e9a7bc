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

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::proto::{MasterStatus, Reply, Request, reply_error, reply_fits};
use super::queue::{Ack, GetTask, TaskId};
use crate::error::{Error, Result};
use crate::wire::auth::{self, PROOF_LEN, Purpose};
use crate::wire::{self, read_exact_by, write_all_by};

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
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: Duration::from_secs(120),
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(500),
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
    conn: Option<TcpStream>,
    inbox: Vec<u8>,
    connections: u64,
}

impl MasterClient {
    /// A client of the master at `uri` (`host:port`) holding `secret`. Connects lazily, at
    /// the first call.
    pub fn new(uri: impl Into<String>, secret: impl AsRef<[u8]>, opts: ClientOptions) -> MasterClient {
        MasterClient {
            uri: uri.into(),
            secret: secret.as_ref().to_vec(),
            opts,
            conn: None,
            inbox: Vec::new(),
            connections: 0,
        }
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
        let who = format!("master {}", self.uri);
        if self.conn.is_none() {
            let stream = self.open(deadline)?;
            self.connections += 1;
            self.inbox.clear();
            self.conn = Some(stream);
        }
        let stream = self.conn.as_mut().expect("connected above");
        write_all_by(stream, &wire::encode_frame(req), deadline, &who).map_err(Failure::Retry)?;
        loop {
            match wire::decode_frame::<Reply>(&self.inbox) {
                Ok(Some((reply, used))) => {
                    self.inbox.drain(..used);
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::Fatal(Error::Protocol(format!("{who}: {e}")))),
            }
            let mut chunk = [0u8; 4096];
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Retry(Error::Timeout {
                    what: format!("a reply from {who}"),
                    after: Duration::ZERO,
                }));
            }
            stream
                .set_read_timeout(Some(left))
                .map_err(|e| Failure::Retry(Error::io(format!("configuring socket to {who}"), e)))?;
            match std::io::Read::read(stream, &mut chunk) {
                Ok(0) => return Err(Failure::Retry(Error::Master(format!("{} closed the connection", self.uri)))),
                Ok(n) => self.inbox.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::Retry(Error::io(format!("reading from {who}"), e))),
            }
        }
    }

    /// Connects and authenticates once.
    fn open(&self, deadline: Instant) -> std::result::Result<TcpStream, Failure> {
        let who = format!("master {}", self.uri);
        let addr = self
            .uri
            .to_socket_addrs()
            .map_err(|e| Failure::Fatal(Error::Config(format!("master address {:?}: {e}", self.uri))))?
            .next()
            .ok_or_else(|| {
                Failure::Fatal(Error::Config(format!("master address {:?} resolves to nothing", self.uri)))
            })?;
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let mut stream = TcpStream::connect_timeout(&addr, left)
            .map_err(|e| Failure::Retry(Error::io(format!("connecting to {who}"), e)))?;
        let _ = stream.set_nodelay(true);
        write_all_by(&mut stream, &wire::preamble(), deadline, &who).map_err(Failure::Retry)?;
        let mut challenge = [0u8; 8 + PROOF_LEN];
        read_exact_by(&mut stream, &mut challenge, deadline, &who).map_err(Failure::Retry)?;
        wire::check_preamble(challenge[..8].try_into().expect("8 bytes"), &who).map_err(Failure::Fatal)?;
        let proof = auth::prove(&self.secret, Purpose::Master, &challenge[8..]);
        write_all_by(&mut stream, &proof, deadline, &who).map_err(Failure::Retry)?;
        let mut status = [0u8; 1];
        read_exact_by(&mut stream, &mut status, deadline, &who).map_err(Failure::Retry)?;
        if status[0] != 1 {
            return Err(Failure::Fatal(Error::Auth(format!("{who} refused us: wrong job secret"))));
        }
        Ok(stream)
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

//! A trainer's link to one parameter server: the connection, the pushes kept until the
//! server has them durably (a server with a log: once it acknowledged them; without one:
//! never), and the way back after the server restarts: connect
//! again (waiting, with progress lines naming the server, until the call's deadline), say
//! hello, define the job if the server lost it, then push again what the restart lost
//! (sync) or resume past it, counting the lost updates (async, SSP), and stage again the
//! push in flight if the server had it staged and lost it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::consistency::Mode;
use super::proto::{self, Grad, JobSpec, MAX_PS_FRAME, ReceivedFloats, Reply, Request, reply_error};
use warren_base::cancel::CancelHandle;
use warren_base::error::{Error, Result};
use warren_wire::auth::Purpose;
use warren_wire::{self as wire, Backoff, Connection, HandshakeFailure, Tls, pool};

/// How often a trainer waiting for a server says so.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a link needs to know of its trainer to resynchronize with a restarted server.
pub(crate) struct Session<'a> {
    /// The trainer (`None`: an observer, nothing to resynchronize).
    pub trainer: Option<u32>,
    /// The job, if known.
    pub job: Option<&'a JobSpec>,
    /// The trainer's next step.
    pub step: u64,
    /// Cancels the wait for the server.
    pub cancel: &'a CancelHandle,
    /// Finds the server's address again, if set.
    pub resolve: Option<&'a Resolver>,
}

/// Where server `index` is now (`Ok(None)`: not registered at the moment), asked again each
/// time its link is recovered, so that a server restarted on another address is found (e.g.
/// through [`EtcdRegistry::resolve`](super::EtcdRegistry::resolve)). Without one, a link
/// reconnects to the address it was given.
#[derive(Clone)]
pub struct Resolver(pub Arc<dyn Fn(usize) -> Result<Option<String>> + Send + Sync>);

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

/// How long a link with a [`Resolver`] tries an address before it asks for the server's
/// address again (a restarted server may listen elsewhere).
const RESOLVE_AGAIN: Duration = Duration::from_secs(1);

/// One server's connection and what the trainer keeps for it.
#[derive(Debug)]
pub(crate) struct Link {
    /// `ps server I (host:port)`, for errors and logs.
    pub who: String,
    index: usize,
    uri: String,
    /// TLS, if on.
    tls: Option<Tls>,
    conn: Option<Connection>,
    /// Pushes `(step, gradients)` the server does not hold durably yet, oldest first
    /// (shared with the push request, not copied).
    kept: VecDeque<(u64, Arc<Vec<Grad>>)>,
    /// The step after the last push the server acknowledged (committed).
    acked: u64,
    /// The push being made (kept, staged or to be staged, not yet committed here).
    in_flight: Option<u64>,
}

impl Link {
    /// Connects to server `index` at `uri` before `deadline`.
    pub fn open(
        index: usize,
        uri: &str,
        secret: &[u8],
        tls: Option<Tls>,
        deadline: Instant,
        cancel: &CancelHandle,
    ) -> Result<Link> {
        let who = name(index, uri);
        let conn = connect(uri, secret, tls.as_ref(), &who, deadline, cancel)?;
        let uri = uri.to_string();
        Ok(Link { who, index, uri, tls, conn: Some(conn), kept: VecDeque::new(), acked: 0, in_flight: None })
    }

    /// Sends a request (a push's gradients straight from where they are); an
    /// [`Error::Io`] means the link failed.
    pub fn send(&mut self, req: &Request, deadline: Instant) -> Result<()> {
        let Some(c) = self.conn.as_mut() else { return Err(closed(&self.who)) };
        match proto::push_parts(req) {
            Some(parts) => c.send_parts(&parts.pieces(), deadline),
            None => {
                let frame = proto::encode(req);
                let sent = c.send_frame(&frame, deadline);
                pool::BYTES.give(frame);
                sent
            }
        }
    }

    /// Receives the reply to the oldest request; a closed connection is an [`Error::Io`].
    pub fn recv(&mut self, deadline: Instant) -> Result<Reply> {
        let Some(c) = self.conn.as_mut() else { return Err(closed(&self.who)) };
        match c.recv_frame(deadline)? {
            Some(f) => decode(c, f),
            None => {
                self.conn = None;
                Err(closed(&self.who))
            }
        }
    }

    /// Gives back the frame of a [`Reply::Received`] once it is read, to read a later reply
    /// into (no fresh pages for every large pull).
    pub fn recycle(&mut self, floats: ReceivedFloats) {
        if let Some(c) = self.conn.as_mut() {
            c.recycle(floats.into_frame());
        }
    }

    /// The socket, to wait for replies on several links at once.
    pub fn fd(&self) -> Option<RawFd> {
        self.conn.as_ref().map(|c| c.stream().as_raw_fd())
    }

    /// Takes what has arrived, without waiting: a whole reply if there is one; an
    /// [`Error::Io`] if the server closed the connection (it died, even while this link was
    /// idle).
    pub fn poll_reply(&mut self) -> Result<Option<Reply>> {
        let Some(c) = self.conn.as_mut() else { return Err(closed(&self.who)) };
        if let Some(f) = c.next_buffered_frame()? {
            return decode(c, f).map(Some);
        }
        let open = c.read_available()?;
        if let Some(f) = c.next_buffered_frame()? {
            return decode(c, f).map(Some);
        }
        if !open {
            self.conn = None;
            return Err(closed(&self.who));
        }
        Ok(None)
    }

    /// Async and SSP: moves trainer `t`'s clock here up to `step`, the server being behind it
    /// (`why`); returns the updates of the trainer lost here.
    pub fn resume(&mut self, t: u32, step: u64, deadline: Instant, why: &str) -> Result<u64> {
        match self.ask(&Request::Resume { step }, deadline)? {
            Reply::Resumed { lost } => {
                warn!("trainer {t}: {} {why}: {lost} update(s) of this trainer lost", self.who);
                Ok(lost)
            }
            _ => Err(Error::Protocol(format!("{} answered a resume with something else", self.who))),
        }
    }

    /// One request, one reply; an error reply becomes an error.
    fn ask(&mut self, req: &Request, deadline: Instant) -> Result<Reply> {
        self.send(req, deadline)?;
        match self.recv(deadline)? {
            Reply::Error { kind, message } => Err(reply_error(kind, message, &self.who)),
            r => Ok(r),
        }
    }

    /// Keeps push `step` (the one being made) to stage it again, or push it again, after a
    /// restart.
    pub fn keep(&mut self, step: u64, grads: Arc<Vec<Grad>>) {
        self.kept.push_back((step, grads));
        self.in_flight = Some(step);
    }

    /// The server's answer to the commit of push `step`: drop what its checkpoint holds
    /// (`durable`; with `None`, every push up to `step`).
    pub fn pushed(&mut self, step: u64, durable: Option<u64>) {
        self.acked = self.acked.max(step + 1);
        let keep_from = durable.map_or(step + 1, |d| d.min(step + 1));
        while self.kept.front().is_some_and(|(s, _)| *s < keep_from) {
            if let Some((_, grads)) = self.kept.pop_front() {
                recycle(grads);
            }
        }
        if self.in_flight.is_some_and(|s| s <= step) {
            self.in_flight = None;
        }
    }

    /// After the link failed with `why`: waits until the server is back (or `deadline`),
    /// resynchronizes, then sends `req` (the request whose reply was awaited, if any) again:
    /// its reply is then to be received, unless it is returned here (a push the restarted
    /// server already holds). Only replies that come at once are awaited here, so a trainer
    /// never blocks on one server while another waits for it to push again. `lost` counts
    /// the updates lost in an async or SSP restart.
    pub fn recover(
        &mut self,
        secret: &[u8],
        session: &Session<'_>,
        req: Option<&Request>,
        why: Error,
        deadline: Instant,
        lost: &mut u64,
    ) -> Result<Option<Reply>> {
        let me = session.trainer.map_or("observer".to_string(), |t| format!("trainer {t}"));
        warn!("{me}: {} failed ({why}); pausing until it is back", self.who);
        let started = Instant::now();
        let mut last = why;
        loop {
            session.cancel.check()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{} to come back (last error: {last})", self.who),
                    after: started.elapsed(),
                });
            }
            self.conn = None;
            match self.resync(secret, session, req, deadline, lost) {
                Ok(reply) => {
                    info!("{me}: {} is back after {:.1?}", self.who, started.elapsed());
                    return Ok(reply);
                }
                Err(e @ Error::Io { .. }) => last = e,
                // A resolved address tried only briefly: ask again.
                Err(e @ Error::Timeout { .. }) if session.resolve.is_some() => last = e,
                Err(e) => return Err(e),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn resync(
        &mut self,
        secret: &[u8],
        session: &Session<'_>,
        req: Option<&Request>,
        deadline: Instant,
        lost: &mut u64,
    ) -> Result<Option<Reply>> {
        let mut connect_by = deadline;
        if let Some(resolve) = session.resolve {
            // etcd not answering is one more reason to try again, until the deadline.
            let found = (resolve.0)(self.index)
                .map_err(|e| Error::io(format!("asking where {} is", self.who), io::Error::other(e.to_string())))?;
            match found {
                Some(uri) if uri != self.uri => {
                    info!("{} is now registered at {uri}", self.who);
                    self.who = name(self.index, &uri);
                    self.uri = uri;
                }
                Some(_) => {}
                None => {
                    let why = io::Error::from(io::ErrorKind::NotFound);
                    return Err(Error::io(format!("{} is not registered", self.who), why));
                }
            }
            connect_by = deadline.min(Instant::now() + RESOLVE_AGAIN);
        }
        self.conn = Some(connect(&self.uri, secret, self.tls.as_ref(), &self.who, connect_by, session.cancel)?);
        let (clock, staged) = match self.ask(&Request::Hello { trainer: session.trainer }, deadline)? {
            Reply::Hello { job: None, .. } if session.job.is_some() => {
                let job = session.job.expect("checked").clone();
                self.ask(&Request::Define { job }, deadline)?;
                (0, None)
            }
            Reply::Hello { clock, staged, .. } => (clock, staged),
            _ => return Err(Error::Protocol(format!("{} answered a hello with something else", self.who))),
        };
        let mode = session.job.map(|j| j.mode);
        if let (Some(t), Some(mode)) = (session.trainer, mode) {
            // Push again (or resume past) every push the server had acknowledged, also one
            // acknowledged in the round that is still waiting for another server.
            let upto = match req {
                Some(Request::Push { step, .. } | Request::Commit { step }) => *step,
                _ => session.step.max(self.acked),
            };
            match req {
                // The server's checkpoint already holds this push.
                Some(Request::Push { step, .. }) if *step < clock && mode == Mode::Sync => {
                    return Ok(Some(Reply::Staged));
                }
                // Async and SSP pushes count on arrival (see `consistency.rs`).
                Some(Request::Push { step, .. }) if *step < clock => return Ok(Some(Reply::Pushed { durable: None })),
                Some(Request::Commit { step }) if *step < clock => {
                    return Ok(Some(Reply::Pushed { durable: Some(0) }));
                }
                _ => {}
            }
            let mut clock = clock;
            if mode == Mode::Sync && staged == Some(clock) && clock < upto {
                // A commit it had answered, not yet durable when it died: its staged push is.
                info!("trainer {t}: committing step {clock} at {} again", self.who);
                match self.ask(&Request::Commit { step: clock }, deadline)? {
                    Reply::Pushed { durable } => self.pushed(clock, durable),
                    _ => return Err(Error::Protocol(format!("{} answered a commit with something else", self.who))),
                }
                clock += 1;
            }
            if mode == Mode::Sync {
                self.push_again(t, clock, upto, deadline)?;
            } else if clock < upto {
                *lost += self.resume(t, upto, deadline, "restarted from a checkpoint")?;
            }
            // The push being made, staged here before the restart (a push request in flight
            // is sent again below).
            let resent = matches!(req, Some(Request::Push { .. }));
            if let Some(s) = self.in_flight.filter(|&s| s == clock.max(upto) && staged != Some(s) && !resent) {
                self.stage_again(s, deadline)?;
            }
        }
        if let Some(req) = req {
            self.send(req, deadline)?;
        }
        Ok(None)
    }

    /// Stages kept push `step` again.
    fn stage_again(&mut self, step: u64, deadline: Instant) -> Result<()> {
        let grads =
            self.kept.iter().find(|(s, _)| *s == step).map(|(_, g)| Arc::clone(g)).ok_or_else(|| {
                Error::Protocol(format!("{}: the push of step {step} being made was not kept", self.who))
            })?;
        match self.ask(&Request::Push { step, grads }, deadline)? {
            Reply::Staged => Ok(()),
            _ => Err(Error::Protocol(format!("{} answered a push with something else", self.who))),
        }
    }

    /// Sync: pushes steps `clock..upto` again from what was kept.
    fn push_again(&mut self, t: u32, clock: u64, upto: u64, deadline: Instant) -> Result<()> {
        if clock >= upto {
            return Ok(());
        }
        let first = self.kept.front().map_or(upto, |(s, _)| *s);
        if first > clock {
            return Err(Error::RecoveryImpossible {
                lost: vec![t.to_string()],
                reason: format!(
                    "{} restarted at trainer {t}'s step {clock}, behind the pushes it had acknowledged, and this \
                     trainer holds its pushes only from step {first}: its checkpoint directory was lost, replaced \
                     by an older copy, or not given: start the job again",
                    self.who
                ),
            });
        }
        let again: Vec<(u64, Arc<Vec<Grad>>)> =
            self.kept.iter().filter(|(s, _)| (clock..upto).contains(s)).cloned().collect();
        info!("trainer {t}: pushing steps {clock}..{upto} to {} again", self.who);
        for (step, grads) in again {
            let staged = self.ask(&Request::Push { step, grads }, deadline)?;
            match (staged, self.ask(&Request::Commit { step }, deadline)?) {
                (Reply::Staged, Reply::Pushed { durable }) => self.pushed(step, durable),
                _ => return Err(Error::Protocol(format!("{} answered a push with something else", self.who))),
            }
        }
        Ok(())
    }
}

/// `ps server I (host:port)`.
fn name(index: usize, uri: &str) -> String {
    format!("ps server {index} ({uri})")
}

/// Decodes reply frame `f` and gives it back to `c`, to read a later one into; a floats
/// reply keeps its frame, to be read from where it is (and given back with
/// [`Link::recycle`]).
fn decode(c: &mut Connection, f: Vec<u8>) -> Result<Reply> {
    let mut f = match ReceivedFloats::from_frame(f) {
        Ok(floats) => return Ok(Reply::Received(floats)),
        Err(f) => f,
    };
    let reply = proto::decode(&mut f);
    c.recycle(f);
    reply
}

/// Gives the buffers of a push no longer needed back to the pool, if nothing else holds it.
pub(crate) fn recycle(grads: Arc<Vec<Grad>>) {
    if let Ok(grads) = Arc::try_unwrap(grads) {
        grads.into_iter().for_each(Grad::recycle);
    }
}

fn closed(who: &str) -> Error {
    Error::io(format!("{who} closed the connection"), io::Error::from(io::ErrorKind::UnexpectedEof))
}

/// Connects and authenticates, waiting (with a progress line every few seconds) while the
/// server is not listening; a wrong secret fails at once; `cancel` ends the wait.
fn connect(
    uri: &str,
    secret: &[u8],
    tls: Option<&Tls>,
    who: &str,
    deadline: Instant,
    cancel: &CancelHandle,
) -> Result<Connection> {
    let addr = wire::resolve(uri, "parameter server")?;
    // Short: a restarted server is waited for on this machine's loopback or a LAN, and the
    // pause is the trainers' (resume < 2 s after the replacement starts).
    let backoff = Backoff { first: Duration::from_millis(10), max: Duration::from_millis(100) };
    let mut next_progress = Instant::now() + PROGRESS_EVERY;
    loop {
        let stream = wire::connect_by(addr, deadline, who, backoff, Some(cancel), &mut |e| {
            if Instant::now() >= next_progress {
                warn!("waiting for {who}: {e}");
                next_progress = Instant::now() + PROGRESS_EVERY;
            }
            Ok(true)
        })
        .map_err(|e| match e {
            Error::Timeout { what, after } => Error::Timeout { what: format!("{what} (is it running?)"), after },
            other => other,
        })?;
        match Connection::handshake(stream, secret, Purpose::ParamServer, tls, deadline, who) {
            Ok(mut c) => {
                c.set_max_frame(MAX_PS_FRAME);
                return Ok(c);
            }
            Err(HandshakeFailure::Refused(e)) => return Err(e),
            Err(HandshakeFailure::Broken(e)) if Instant::now() >= deadline => return Err(e),
            Err(HandshakeFailure::Broken(_)) => {
                cancel.check()?;
                std::thread::sleep(backoff.first);
            }
        }
    }
}

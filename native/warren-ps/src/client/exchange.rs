//! Pipelined rounds: every server's request sent before any reply is awaited, replies read
//! as they come within the call's deadline, a failed link recovered on the way.

use std::time::{Duration, Instant};

use super::PsClient;
use super::recover::link_failure;
use crate::failpoint::FailPoint;
use crate::link::Link;
use crate::proto::{Reply, Request, reply_error};
use warren_base::error::{Error, Result};

impl PsClient {
    /// One pipelined round within the call timeout; error replies become errors.
    pub(super) fn call(&mut self, reqs: Vec<Option<Request>>) -> Result<Vec<Option<Reply>>> {
        self.call_with(reqs, None)
    }

    /// [`PsClient::call`], dying at `point` once the requests are sent, if told to.
    pub(super) fn call_with(
        &mut self,
        reqs: Vec<Option<Request>>,
        point: Option<FailPoint>,
    ) -> Result<Vec<Option<Reply>>> {
        self.call_by(Instant::now() + self.opts.call_timeout, reqs, point)
    }

    /// One pipelined round before `deadline`; error replies become errors.
    pub(super) fn call_by(
        &mut self,
        deadline: Instant,
        reqs: Vec<Option<Request>>,
        point: Option<FailPoint>,
    ) -> Result<Vec<Option<Reply>>> {
        let replies = self.round(deadline, reqs, point)?;
        for (s, r) in replies.iter().enumerate() {
            if let Some(Reply::Error { kind, message }) = r {
                return Err(reply_error(*kind, message.clone(), &self.links[s].who));
            }
        }
        Ok(replies)
    }

    /// Sends server `s` request `reqs[s]` (if any) to every server first, then reads the
    /// replies in server order, all before `deadline`.
    fn round(
        &mut self,
        deadline: Instant,
        reqs: Vec<Option<Request>>,
        point: Option<FailPoint>,
    ) -> Result<Vec<Option<Reply>>> {
        self.cancel.check()?;
        if let Some(why) = &self.broken {
            return Err(Error::Protocol(format!("the parameter-server connections failed earlier: {why}")));
        }
        let result = self.exchange(deadline, reqs, point).map_err(|e| self.cancel.explain(e));
        if let Err(e) = &result {
            self.broken = Some(e.to_string());
        }
        result
    }

    fn exchange(
        &mut self,
        deadline: Instant,
        reqs: Vec<Option<Request>>,
        point: Option<FailPoint>,
    ) -> Result<Vec<Option<Reply>>> {
        let n = self.links.len();
        let mut replies: Vec<Option<Reply>> = vec![None; n];
        let mut waiting: Vec<bool> = reqs.iter().map(Option::is_some).collect();
        for (s, req) in reqs.iter().enumerate() {
            if let Some(req) = req {
                if let Err(e) = self.links[s].send(req, deadline) {
                    let why = link_failure(e)?;
                    if let Some(r) = self.recover(s, Some(req), why, deadline)? {
                        self.took(s, req, &mut replies, r);
                    }
                    waiting[s] = replies[s].is_none();
                }
            }
        }
        if let Some(p) = point {
            self.maybe_fail(p);
        }
        // Every link is watched, idle ones too: a server that dies is noticed (and pushed
        // to again once back) even while this trainer waits for another server.
        loop {
            for s in 0..n {
                match self.links[s].poll_reply() {
                    Ok(Some(r)) if waiting[s] => {
                        self.took(s, reqs[s].as_ref().expect("awaited"), &mut replies, r);
                        waiting[s] = false;
                    }
                    Ok(Some(_)) => return Err(self.unexpected(s)),
                    Ok(None) => {}
                    Err(e) => {
                        let why = link_failure(e)?;
                        let req = reqs[s].as_ref().filter(|_| waiting[s]);
                        if let Some(r) = self.recover(s, req, why, deadline)? {
                            self.took(s, req.expect("a reply to an awaited request"), &mut replies, r);
                            waiting[s] = false;
                        }
                    }
                }
            }
            if !waiting.iter().any(|w| *w) {
                return Ok(replies);
            }
            self.wait_readable(deadline, &waiting)?;
        }
    }

    /// Takes server `s`'s reply `r` to `req`; a commit's acknowledgement is recorded on its
    /// link at once, so that a restart of the server later in the same round pushes the step
    /// again (sync) or resumes past it (async, SSP).
    fn took(&mut self, s: usize, req: &Request, replies: &mut [Option<Reply>], r: Reply) {
        if let (Request::Commit { step } | Request::Push { step, .. }, Reply::Pushed { durable }) = (req, &r) {
            // Only sync pushes are pushed again after a server restart.
            let durable = if self.sync() { *durable } else { None };
            self.links[s].pushed(*step, durable);
        }
        replies[s] = Some(r);
    }

    /// Waits until a link has something to read, or fails at `deadline` naming the servers
    /// whose replies were awaited.
    fn wait_readable(&self, deadline: Instant, waiting: &[bool]) -> Result<()> {
        let mut fds: Vec<libc::pollfd> = self
            .links
            .iter()
            .filter_map(Link::fd)
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        loop {
            self.cancel.check()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let who: Vec<&str> =
                    self.links.iter().zip(waiting).filter(|(_, w)| **w).map(|(l, _)| l.who.as_str()).collect();
                return Err(Error::Timeout { what: format!("replies from {}", who.join(", ")), after: left });
            }
            // Short slices, so that a cancellation is noticed within one.
            let ms = left.as_millis().min(CANCEL_POLL.as_millis()) as libc::c_int;
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the call.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if ready > 0 {
                return Ok(());
            }
            if ready < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::io("waiting for the parameter servers", e));
                }
            }
        }
    }
}

/// How often a waiting call looks whether it was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(50);

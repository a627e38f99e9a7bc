//! Failures: a failed link recovered (its server's address found again if a resolver is
//! set), and the injection of a trainer's own death at given points (tests, demos).

use std::time::Instant;

use super::PsClient;
use crate::failpoint::{self, FailPoint};
use crate::link::{Resolver, Session};
use crate::proto::{Reply, Request};
use warren_base::error::{Error, Result};

impl PsClient {
    /// Failure injection (tests, demos): this process kills itself with SIGKILL at `point` of
    /// step `step` (see [`failpoint`](crate::failpoint) and `WARREN_PS_MOCK`).
    pub fn fail_at(&mut self, step: u64, point: FailPoint) {
        self.fail_at.push((step, point));
    }

    /// Dies here if told to (see [`PsClient::fail_at`]).
    pub(super) fn maybe_fail(&self, point: FailPoint) {
        if self.fail_at.contains(&(self.step, point)) {
            failpoint::die(self.trainer, self.step, point);
        }
    }

    /// Failure injection: sends server 0 its request of `reqs` (a commit, or an async or
    /// SSP push: counted there only), then dies at [`FailPoint::HalfCommitted`] of `step`.
    /// Returns only the error of that call, if it fails.
    pub(super) fn die_half_way(&mut self, mut reqs: Vec<Option<Request>>, step: u64) -> Result<()> {
        reqs.iter_mut().skip(1).for_each(|r| *r = None);
        self.call(reqs)?;
        failpoint::die(self.trainer, step, FailPoint::HalfCommitted)
    }

    /// Asks `resolve` for a server's address each time its link fails (see [`Resolver`]).
    pub fn set_resolver(&mut self, resolve: Resolver) {
        self.resolve = Some(resolve);
    }

    /// Recovers link `s` (see [`Link::recover`](crate::link::Link::recover)).
    pub(super) fn recover(
        &mut self,
        s: usize,
        req: Option<&Request>,
        why: Error,
        deadline: Instant,
    ) -> Result<Option<Reply>> {
        let session = Session {
            trainer: self.trainer,
            job: self.job.as_ref(),
            step: self.step,
            cancel: &self.cancel,
            resolve: self.resolve.as_ref(),
        };
        self.links[s].recover(&self.secret, &session, req, why, deadline, &mut self.lost)
    }
}

/// `Ok(e)` if `e` means the link failed (the server may come back); the error otherwise.
pub(super) fn link_failure(e: Error) -> Result<Error> {
    match e {
        Error::Io { .. } => Ok(e),
        other => Err(other),
    }
}

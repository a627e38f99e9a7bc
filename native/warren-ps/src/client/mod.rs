//! The trainer's side (blocking): one authenticated connection to each of the `S` servers;
//! pulls and pushes are split per server and *pipelined*: the request to every server is
//! sent before any reply is awaited, so a call costs one round trip to the slowest server,
//! not `S`. Every wait has the call's deadline.
//!
//! A server that fails (its connection breaks) pauses the call: the client waits for it to
//! come back (restarted with the same index), then resynchronizes (see `link.rs`) and goes on.
//! Nothing it acknowledged is lost: a server with a checkpoint directory logs every push
//! before acknowledging it and replays its log after a restart (see `checkpoint.rs`), so
//! the trainer sends again at most the request it was waiting on, which the server
//! recognizes by trainer and step if it holds it already.
//!
//! A client connected with [`PsClient::connect_cancellable`] is cancelled from another thread
//! through its [`CancelHandle`] (the JVM's interrupt of a trainer's thread): waits look at it
//! every 50 ms (replies) to 100 ms (the pauses between connection attempts to a server that is
//! not there), so the running call ends with [`Error::Aborted`] within about 200 ms, and every
//! later call at once.
//!
//! A push is two rounds (see the two-phase pushes of `consistency.rs`): stage at every
//! server, then commit at every server. A trainer connecting with the id of one that died
//! (its replacement) settles a half-pushed step first: if some server committed it, it
//! commits it at the others (they all have it staged); if none did, it aborts the staged
//! copies and computes the step again. Either way it then resumes at the step the servers
//! are at, with every server at the same one.

mod exchange;
mod pull;
mod push;
mod recover;

use std::time::{Duration, Instant};

use super::bags;
use super::consistency::Mode;
use super::failpoint::FailPoint;
use super::link::{Link, Resolver};
use super::proto::{JobSpec, Reply, Request, ServerStatus};
use super::table::TableSpec;
use warren_base::cancel::CancelHandle;
use warren_base::error::{Error, Result};

pub use pull::Pull;

/// A trainer's `(clock, staged step)` at one server, as its hello says.
type Seen = (u64, Option<u64>);

/// Deadlines of a [`PsClient`].
#[derive(Clone, Debug)]
pub struct PsClientOptions {
    /// How long connecting to all servers may take (they may still be starting; default 60 s).
    pub connect_timeout: Duration,
    /// How long one call may take, a pull waiting for slower trainers included (default 600 s;
    /// the servers' own pull timeout should be shorter, so that the error names who is slow).
    pub call_timeout: Duration,
    /// TLS (default `None`: plain TCP, as the servers must be).
    pub tls: Option<warren_wire::Tls>,
}

impl Default for PsClientOptions {
    fn default() -> Self {
        PsClientOptions { connect_timeout: Duration::from_secs(60), call_timeout: Duration::from_secs(600), tls: None }
    }
}

/// A trainer's (or an observer's) connections to the parameter servers of one job.
#[derive(Debug)]
pub struct PsClient {
    links: Vec<Link>,
    secret: Vec<u8>,
    trainer: Option<u32>,
    /// Updates lost (async, SSP): the push a predecessor died making, at the servers it missed.
    lost: u64,
    job: Option<JobSpec>,
    step: u64,
    opts: PsClientOptions,
    /// Why the connections are out of step (a round failed half-way), if they are.
    broken: Option<String>,
    /// Cancels the running and later calls from another thread.
    cancel: CancelHandle,
    /// Failure injection: die at these `(step, point)`s (see [`PsClient::fail_at`]).
    fail_at: Vec<(u64, FailPoint)>,
    /// Finds a restarted server's address again, if set.
    resolve: Option<Resolver>,
    /// The split of the last bagged pull, for the push of its gradient.
    bag_split: Option<BagSplit>,
}

/// A bagged pull's keys and bags, and their split over the servers: a step pushes the
/// gradient of the bags it pulled, so its push takes this split instead of making it again.
#[derive(Debug)]
struct BagSplit {
    table: String,
    keys: Vec<u64>,
    ends: Vec<u64>,
    per: Vec<bags::ServerBags>,
}

impl PsClient {
    /// Connects to the servers at `uris` (server `i` at `uris[i]`) with `secret`, as trainer
    /// `trainer` (`None`: an observer, whose pulls never wait and who cannot push). Waits for
    /// servers that are not listening yet, up to the connect timeout; a wrong secret fails at
    /// once. Checks that each server has the index and server count its place in `uris` says.
    pub fn connect(
        uris: &[String],
        secret: impl AsRef<[u8]>,
        trainer: Option<u32>,
        opts: PsClientOptions,
    ) -> Result<PsClient> {
        PsClient::connect_cancellable(uris, secret, trainer, opts, CancelHandle::new())
    }

    /// [`connect`](Self::connect), cancellable from another thread through `cancel`: the
    /// connection and every later call then fail with [`Error::Aborted`] within about 200 ms
    /// (also while a call waits for a server to come back), and the client is unusable.
    pub fn connect_cancellable(
        uris: &[String],
        secret: impl AsRef<[u8]>,
        trainer: Option<u32>,
        opts: PsClientOptions,
        cancel: CancelHandle,
    ) -> Result<PsClient> {
        if uris.is_empty() {
            return Err(Error::Config("no parameter server addresses given".into()));
        }
        let deadline = Instant::now() + opts.connect_timeout;
        let secret = secret.as_ref().to_vec();
        let links = uris
            .iter()
            .enumerate()
            .map(|(i, uri)| Link::open(i, uri, &secret, opts.tls.clone(), deadline, &cancel))
            .collect::<Result<_>>()?;
        let mut c = PsClient {
            links,
            secret,
            trainer,
            lost: 0,
            job: None,
            step: 0,
            opts,
            broken: None,
            cancel,
            fail_at: Vec::new(),
            resolve: None,
            bag_split: None,
        };
        let replies = c.call_by(deadline, (0..uris.len()).map(|_| Some(Request::Hello { trainer })).collect(), None)?;
        let mut clocks = Vec::new();
        for (i, r) in replies.into_iter().enumerate() {
            let Some(Reply::Hello { index, servers, job, clock, staged }) = r else { return Err(c.unexpected(i)) };
            if index != i || servers != uris.len() {
                return Err(Error::Config(format!(
                    "{} says it is server {index} of {servers}, but it was given as server {i} of {}",
                    c.links[i].who,
                    uris.len()
                )));
            }
            clocks.push((clock, staged));
            if c.job.is_none() {
                c.job = job;
            }
        }
        c.step = c.settle(deadline, &clocks)?;
        Ok(c)
    }

    /// Whether the job is sync (two-phase pushes, pushed again after a server restart).
    fn sync(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.mode == Mode::Sync)
    }

    /// Number of servers.
    pub fn servers(&self) -> usize {
        self.links.len()
    }

    /// Updates of this trainer lost at servers its predecessor's last push missed (async and
    /// SSP; sync loses none), or in the restart of a server without a log.
    pub fn lost_updates(&self) -> u64 {
        self.lost
    }

    /// The trainer's next step (pushes so far; more than 0 for a trainer resuming a job).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The job, once defined (by this client or another).
    pub fn job(&self) -> Option<&JobSpec> {
        self.job.as_ref()
    }

    /// Defines the job on every server: the first definition wins; the same again is a
    /// no-op; a different one is [`Error::InvalidArgument`].
    pub fn define(&mut self, job: &JobSpec) -> Result<()> {
        let reqs = (0..self.servers()).map(|_| Some(Request::Define { job: job.clone() })).collect();
        self.expect_done(reqs)?;
        self.job = Some(job.clone());
        Ok(())
    }

    fn table(&self, name: &str) -> Result<&TableSpec> {
        let job = self.job.as_ref().ok_or_else(|| Error::InvalidArgument("no job defined yet".into()))?;
        job.tables
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no table named {name:?} in the job")))
    }

    /// Joins the job at step `step` (a trainer the job names as joining, or one that left):
    /// the steps from `step` on count it, and its next push is of `step`.
    pub fn join(&mut self, step: u64) -> Result<()> {
        self.expect_done((0..self.servers()).map(|_| Some(Request::Join { step })).collect())?;
        self.step = step;
        Ok(())
    }

    /// Leaves the job: this trainer holds nobody back any more (its pushes stay applied).
    pub fn leave(&mut self) -> Result<()> {
        self.expect_done((0..self.servers()).map(|_| Some(Request::Leave)).collect())
    }

    /// Every server's state.
    pub fn status(&mut self) -> Result<Vec<ServerStatus>> {
        let replies = self.call((0..self.servers()).map(|_| Some(Request::Status)).collect())?;
        replies
            .into_iter()
            .enumerate()
            .map(|(s, r)| match r {
                Some(Reply::Status { status }) => Ok(status),
                _ => Err(self.unexpected(s)),
            })
            .collect()
    }

    fn expect_done(&mut self, reqs: Vec<Option<Request>>) -> Result<()> {
        for (s, r) in self.call(reqs)?.into_iter().enumerate() {
            if !matches!(r, None | Some(Reply::Done)) {
                return Err(self.unexpected(s));
            }
        }
        Ok(())
    }

    fn unexpected(&self, s: usize) -> Error {
        Error::Protocol(format!("{} sent an unexpected reply", self.links[s].who))
    }
}

/// Room for one server's share of `total` keys spread over `n` servers by their hash: the
/// even share and an eighth more, so that the buffers filled key by key are seldom grown
/// (a regrown buffer of a step's keys is a copy of it).
fn share(total: usize, n: usize) -> usize {
    let even = total / n.max(1);
    even + even / 8 + 16
}

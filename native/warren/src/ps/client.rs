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

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::info;

use super::bags;
use super::consistency::Mode;
use super::failpoint::{self, FailPoint};
use super::link::{Link, Resolver, Session};
use super::proto::{Grad, JobSpec, PullPiece, ReceivedFloats, Reply, Request, ServerStatus, reply_error};
use super::table::{KeySpread, TableKind, TableSpec, dense_range};
use crate::cancel::CancelHandle;
use crate::error::{Error, Result};
use crate::wire::pool;

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
    pub tls: Option<crate::wire::Tls>,
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

    /// Brings every server to the same step for this trainer, given each one's `(clock,
    /// staged step)`: completes a step some server committed, undoes one none did (see the
    /// module documentation). Returns the step.
    fn settle(&mut self, deadline: Instant, seen: &[Seen]) -> Result<u64> {
        let lo = seen.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = seen.iter().map(|s| s.0).max().unwrap_or(0);
        let on = |f: fn(&Seen, u64) -> bool| -> Vec<usize> {
            seen.iter().enumerate().filter(|(_, s)| f(s, lo)).map(|(i, _)| i).collect()
        };
        let Some(t) = self.trainer else { return Ok(lo) };
        if hi == lo {
            let staged = on(|s, lo| s.1 == Some(lo));
            if !staged.is_empty() {
                info!("trainer {t}: undoing its step {lo}, staged on servers {staged:?} but committed on none");
                let reqs = (0..seen.len()).map(|i| staged.contains(&i).then_some(Request::Abort { step: lo }));
                self.expect_done(reqs.collect())?;
            }
            return Ok(lo);
        }
        if !self.sync() {
            return self.skip_to(deadline, seen, hi);
        }
        let behind = on(|s, lo| s.0 == lo);
        if hi == lo + 1 && behind.iter().all(|&i| seen[i].1 == Some(lo)) {
            info!("trainer {t}: completing its step {lo}, committed on some servers, staged on {behind:?}");
            let reqs = (0..seen.len()).map(|i| behind.contains(&i).then_some(Request::Commit { step: lo }));
            for (s, r) in self.call_by(deadline, reqs.collect(), None)?.into_iter().enumerate() {
                if !matches!(r, None | Some(Reply::Pushed { .. })) {
                    return Err(self.unexpected(s));
                }
            }
            return Ok(hi);
        }
        Err(Error::RecoveryImpossible {
            lost: vec![t.to_string()],
            reason: format!(
                "the servers are at different steps of trainer {t} ((clock, staged step) per server {seen:?}): \
                 a server restarted without the pushes it had acknowledged (its checkpoint directory was lost, \
                 replaced by an older copy, or not given, or its machine crashed while it answered pushes once \
                 written to the kernel, `--log-sync write`; `--log-sync fsync` survives that): start the job again"
            ),
        })
    }

    /// Async and SSP: moves this trainer's clock at the servers behind, per `seen`, up to
    /// step `hi`, where it is at the others (its predecessor died with a push counted at some
    /// servers only: those pushes are lost elsewhere, as in a server's restart). Returns `hi`.
    fn skip_to(&mut self, deadline: Instant, seen: &[Seen], hi: u64) -> Result<u64> {
        let t = self.trainer.expect("a trainer");
        for (s, _) in seen.iter().enumerate().filter(|(_, s)| s.0 < hi) {
            self.lost += self.links[s].resume(t, hi, deadline, "missed the last push of this trainer's predecessor")?;
        }
        Ok(hi)
    }

    /// Whether the job is sync (two-phase pushes, pushed again after a server restart).
    fn sync(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.mode == Mode::Sync)
    }

    /// Failure injection (tests, demos): this process kills itself with SIGKILL at `point` of
    /// step `step` (see [`failpoint`](super::failpoint) and `WARREN_PS_MOCK`).
    pub fn fail_at(&mut self, step: u64, point: FailPoint) {
        self.fail_at.push((step, point));
    }

    /// Dies here if told to (see [`PsClient::fail_at`]).
    fn maybe_fail(&self, point: FailPoint) {
        if self.fail_at.contains(&(self.step, point)) {
            failpoint::die(self.trainer, self.step, point);
        }
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

    /// Elements `range` of dense table `table`, from the servers holding them.
    pub fn pull_dense(&mut self, table: &str, range: Range<u64>) -> Result<Vec<f32>> {
        let mut out = vec![0f32; range.end.saturating_sub(range.start) as usize];
        self.pull_dense_into(table, range, &mut out)?;
        Ok(out)
    }

    /// [`pull_dense`](Self::pull_dense) into `out` (of `range`'s length): a caller pulling
    /// the same range every step reuses one buffer.
    pub fn pull_dense_into(&mut self, table: &str, range: Range<u64>, out: &mut [f32]) -> Result<()> {
        self.pull(&mut [Pull::Dense { table, range, out }])
    }

    /// The rows of `keys` of sparse table `table`, concatenated in the order of `keys`.
    pub fn pull_sparse(&mut self, table: &str, keys: &[u64]) -> Result<Vec<f32>> {
        let width = self.sparse_width(table)?;
        let mut out = vec![0f32; keys.len() * width];
        self.pull(&mut [Pull::Sparse { table, keys, out: &mut out }])?;
        Ok(out)
    }

    fn sparse_width(&self, table: &str) -> Result<usize> {
        match self.table(table)?.kind {
            TableKind::Sparse { width, .. } => Ok(width as usize),
            TableKind::Dense { .. } => {
                Err(Error::InvalidArgument(format!("table {table:?} is dense: pull it by range")))
            }
        }
    }

    /// [`pull_sparse`](Self::pull_sparse) into `out` (`keys.len()` rows of the table's
    /// width): every row is written, so a caller pulling every step reuses one buffer, as
    /// it is (no zeroing, no allocation).
    pub fn pull_sparse_into(&mut self, table: &str, keys: &[u64], out: &mut [f32]) -> Result<()> {
        self.pull(&mut [Pull::Sparse { table, keys, out }])
    }

    /// Pulls several tables in one round trip (a step that reads an embedding and a dense
    /// weight asks each server once, not once per table), each into its own buffer, which
    /// is written whole. Bad input (an unknown table, a pull of the wrong kind, a range
    /// outside its table, a buffer of the wrong size) fails before anything is sent.
    pub fn pull(&mut self, pulls: &mut [Pull<'_>]) -> Result<()> {
        let mut plans = self.plan_pull(pulls)?;
        // A bag's sum is its servers' sums added in server order, from zero.
        for p in pulls.iter_mut() {
            if let Pull::SparseBags { out, .. } = p {
                out.fill(0.0);
            }
        }
        let reqs = plans
            .iter_mut()
            .map(|p| (!p.pieces.is_empty()).then(|| Request::Pull { pieces: std::mem::take(&mut p.pieces) }))
            .collect();
        for (s, r) in self.call_with(reqs, Some(FailPoint::MidPull))?.into_iter().enumerate() {
            match r {
                None => {}
                Some(Reply::Received(values)) if values.len() == plans[s].len() => {
                    plans[s].place(&values, pulls);
                    self.links[s].recycle(values);
                }
                Some(Reply::Received(values)) => {
                    return Err(Error::Protocol(format!(
                        "{} returned {} floats for a pull of {}",
                        self.links[s].who,
                        values.len(),
                        plans[s].len()
                    )));
                }
                Some(_) => return Err(self.unexpected(s)),
            }
        }
        Ok(())
    }

    /// Each server's share of `pulls`, once each pull is checked.
    fn plan_pull(&mut self, pulls: &[Pull<'_>]) -> Result<Vec<ServerPull>> {
        let n = self.servers();
        let mut plans: Vec<ServerPull> = (0..n).map(|_| ServerPull::default()).collect();
        for (j, p) in pulls.iter().enumerate() {
            match p {
                Pull::Dense { table, range, out } => {
                    let len = self.dense_len(table, range, out.len())?;
                    for (s, plan) in plans.iter_mut().enumerate() {
                        let held = dense_range(len, s, n);
                        let (start, end) = (range.start.max(held.start), range.end.min(held.end));
                        if start < end {
                            let at = (start - range.start) as usize..(end - range.start) as usize;
                            plan.pieces.push(PullPiece::Dense { table: (*table).into(), start, end });
                            plan.places.push((j, Place::Span(at)));
                        }
                    }
                }
                Pull::Sparse { table, keys, out } => {
                    let width = self.sparse_width(table)?;
                    if out.len() != keys.len() * width {
                        return Err(Error::InvalidArgument(format!(
                            "a buffer of {} floats for {} rows of width {width} of table {table:?}",
                            out.len(),
                            keys.len()
                        )));
                    }
                    let cap = share(keys.len(), n);
                    let mut per: Vec<(Vec<u64>, Vec<usize>)> =
                        (0..n).map(|_| (Vec::with_capacity(cap), Vec::with_capacity(cap))).collect();
                    let spread = KeySpread::new(n);
                    for (i, &k) in keys.iter().enumerate() {
                        let s = spread.server(k);
                        per[s].0.push(k);
                        per[s].1.push(i);
                    }
                    for (plan, (keys, to)) in plans.iter_mut().zip(per) {
                        if !keys.is_empty() {
                            plan.pieces.push(PullPiece::Sparse { table: (*table).into(), keys });
                            plan.places.push((j, Place::Rows { width, to }));
                        }
                    }
                }
                Pull::SparseBags { table, keys, ends, out } => {
                    let width = self.sparse_width(table)?;
                    bags::check_rows(table, keys, ends, "a buffer", out.len(), width)?;
                    let per = bags::split(keys, ends, n);
                    for (plan, mine) in plans.iter_mut().zip(&per) {
                        if !mine.keys.is_empty() {
                            let (keys, ends) = (mine.keys.clone(), mine.ends.clone());
                            plan.pieces.push(PullPiece::SparseBags { table: (*table).into(), keys, ends });
                            plan.places.push((j, Place::BagSums { width, to: mine.bags.clone() }));
                        }
                    }
                    let table = (*table).to_string();
                    self.bag_split = Some(BagSplit { table, keys: keys.to_vec(), ends: ends.to_vec(), per });
                }
            }
        }
        Ok(plans)
    }

    /// The length of dense table `table`, once `range` is checked to lie in it and a
    /// buffer of `buffer` floats to hold it.
    fn dense_len(&self, table: &str, range: &Range<u64>, buffer: usize) -> Result<u64> {
        let TableKind::Dense { len } = self.table(table)?.kind else {
            return Err(Error::InvalidArgument(format!("table {table:?} is sparse: pull it by keys")));
        };
        if range.start > range.end || range.end > len {
            return Err(Error::InvalidArgument(format!(
                "elements {}..{} are outside table {table:?} of {len} elements",
                range.start, range.end
            )));
        }
        if buffer as u64 != range.end - range.start {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {buffer} floats for elements {}..{} of table {table:?}",
                range.start, range.end
            )));
        }
        Ok(len)
    }

    /// Pushes this step's gradients (any tables, dense pieces or sparse rows), split per
    /// server; every server gets this step's push, empty if none of the gradients is its.
    /// Bad input (an unknown table, a wrong width, a range outside a table) fails before
    /// anything is sent. In a sync job the push is staged at every server, then committed
    /// (two round trips); in async and SSP jobs it counts on arrival (one).
    pub fn push(&mut self, grads: &[Grad]) -> Result<()> {
        if self.trainer.is_none() {
            return Err(Error::InvalidArgument("an observer cannot push: connect as a trainer".into()));
        }
        let per: Vec<Arc<Vec<Grad>>> = self.split(grads)?.into_iter().map(Arc::new).collect();
        let step = self.step;
        self.maybe_fail(FailPoint::BeforePush);
        for (link, grads) in self.links.iter_mut().zip(&per) {
            link.keep(step, Arc::clone(grads));
        }
        let pushes: Vec<Option<Request>> = per.into_iter().map(|grads| Some(Request::Push { step, grads })).collect();
        let sync = self.sync();
        if !sync && self.fail_at.contains(&(step, FailPoint::HalfCommitted)) {
            return self.die_half_way(pushes, step);
        }
        let replies = self.call(pushes)?;
        let answered = |r: &Option<Reply>| match r {
            Some(Reply::Staged) => sync,
            Some(Reply::Pushed { .. }) => !sync,
            _ => false,
        };
        if let Some(s) = replies.iter().position(|r| !answered(r)) {
            return Err(self.unexpected(s));
        }
        self.maybe_fail(FailPoint::Staged);
        if sync {
            self.commit(step)?;
        }
        self.maybe_fail(FailPoint::AfterPush);
        self.step += 1;
        Ok(())
    }

    /// Commits the push of `step`, staged at every server, everywhere.
    fn commit(&mut self, step: u64) -> Result<()> {
        let commits: Vec<Option<Request>> = (0..self.servers()).map(|_| Some(Request::Commit { step })).collect();
        if self.fail_at.contains(&(step, FailPoint::HalfCommitted)) {
            return self.die_half_way(commits, step);
        }
        for (s, r) in self.call(commits)?.into_iter().enumerate() {
            if !matches!(r, Some(Reply::Pushed { .. })) {
                return Err(self.unexpected(s));
            }
        }
        Ok(())
    }

    /// Failure injection: sends server 0 its request of `reqs` (a commit, or an async or
    /// SSP push: counted there only), then dies at [`FailPoint::HalfCommitted`] of `step`.
    /// Returns only the error of that call, if it fails.
    fn die_half_way(&mut self, mut reqs: Vec<Option<Request>>, step: u64) -> Result<()> {
        reqs.iter_mut().skip(1).for_each(|r| *r = None);
        self.call(reqs)?;
        failpoint::die(self.trainer, step, FailPoint::HalfCommitted)
    }

    /// Splits gradients into each server's share.
    fn split(&mut self, grads: &[Grad]) -> Result<Vec<Vec<Grad>>> {
        let n = self.servers();
        let mut per: Vec<Vec<Grad>> = vec![Vec::new(); n];
        for g in grads {
            match (g, &self.table(g.table())?.kind) {
                (Grad::Dense { table, offset, values }, TableKind::Dense { len }) => {
                    let end = offset.checked_add(values.len() as u64).filter(|&e| e <= *len).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "gradient of elements {offset}..+{} is outside table {table:?} of {len} elements",
                            values.len()
                        ))
                    })?;
                    for (s, mine) in per.iter_mut().enumerate() {
                        let held = dense_range(*len, s, n);
                        let (a, b) = ((*offset).max(held.start), end.min(held.end));
                        if a < b {
                            let piece = &values[(a - offset) as usize..(b - offset) as usize];
                            let mut v = pool::FLOATS.take(piece.len());
                            v.extend_from_slice(piece);
                            mine.push(Grad::Dense { table: table.clone(), offset: a, values: v });
                        }
                    }
                }
                (Grad::Sparse { table, keys, values }, TableKind::Sparse { width, .. }) => {
                    let w = *width as usize;
                    if values.len() != keys.len() * w {
                        return Err(Error::InvalidArgument(format!(
                            "gradient of table {table:?}: {} floats for {} keys of width {w}",
                            values.len(),
                            keys.len()
                        )));
                    }
                    let cap = share(keys.len(), n);
                    let mut parts: Vec<(Vec<u64>, Vec<f32>)> =
                        (0..n).map(|_| (Vec::with_capacity(cap), pool::FLOATS.take(cap * w))).collect();
                    let spread = KeySpread::new(n);
                    for (k, row) in keys.iter().zip(values.chunks_exact(w)) {
                        let p = &mut parts[spread.server(*k)];
                        p.0.push(*k);
                        p.1.extend_from_slice(row);
                    }
                    for (mine, (keys, values)) in per.iter_mut().zip(parts) {
                        if keys.is_empty() {
                            pool::FLOATS.give(values);
                        } else {
                            mine.push(Grad::Sparse { table: table.clone(), keys, values });
                        }
                    }
                }
                (Grad::SparseBags { table, keys, ends, values }, TableKind::Sparse { width, .. }) => {
                    let w = *width as usize;
                    bags::check_rows(table, keys, ends, "a gradient", values.len(), w)?;
                    let parts = match self.bag_split.take() {
                        Some(last) if last.table == *table && last.keys == *keys && last.ends == *ends => last.per,
                        _ => bags::split(keys, ends, n),
                    };
                    for (mine, part) in per.iter_mut().zip(parts) {
                        if part.keys.is_empty() {
                            continue;
                        }
                        let mut v = pool::FLOATS.take(part.bags.len() * w);
                        for &b in &part.bags {
                            v.extend_from_slice(&values[b * w..(b + 1) * w]);
                        }
                        mine.push(Grad::SparseBags {
                            table: table.clone(),
                            keys: part.keys,
                            ends: part.ends,
                            values: v,
                        });
                    }
                }
                (g, _) => {
                    return Err(Error::InvalidArgument(format!("table {:?} is not of that kind", g.table())));
                }
            }
        }
        Ok(per)
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

    /// One pipelined round within the call timeout; error replies become errors.
    fn call(&mut self, reqs: Vec<Option<Request>>) -> Result<Vec<Option<Reply>>> {
        self.call_with(reqs, None)
    }

    /// [`PsClient::call`], dying at `point` once the requests are sent, if told to.
    fn call_with(&mut self, reqs: Vec<Option<Request>>, point: Option<FailPoint>) -> Result<Vec<Option<Reply>>> {
        self.call_by(Instant::now() + self.opts.call_timeout, reqs, point)
    }

    /// One pipelined round before `deadline`; error replies become errors.
    fn call_by(
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

    /// Asks `resolve` for a server's address each time its link fails (see [`Resolver`]).
    pub fn set_resolver(&mut self, resolve: Resolver) {
        self.resolve = Some(resolve);
    }

    /// Recovers link `s` (see [`Link::recover`]).
    fn recover(&mut self, s: usize, req: Option<&Request>, why: Error, deadline: Instant) -> Result<Option<Reply>> {
        let session = Session {
            trainer: self.trainer,
            job: self.job.as_ref(),
            step: self.step,
            cancel: &self.cancel,
            resolve: self.resolve.as_ref(),
        };
        self.links[s].recover(&self.secret, &session, req, why, deadline, &mut self.lost)
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

/// One table's part of a [`PsClient::pull`]: what to pull, and the buffer its values go to.
#[derive(Debug)]
pub enum Pull<'a> {
    /// Elements `range` of a dense table, into `out` (of `range`'s length).
    Dense {
        /// The table.
        table: &'a str,
        /// The elements.
        range: Range<u64>,
        /// Where they go.
        out: &'a mut [f32],
    },
    /// The rows of `keys` of a sparse table, into `out` (`keys.len()` rows of the table's
    /// width, in the order of `keys`).
    Sparse {
        /// The table.
        table: &'a str,
        /// The rows' keys.
        keys: &'a [u64],
        /// Where they go.
        out: &'a mut [f32],
    },
    /// The sum of each bag's rows of a sparse table, into `out` (`ends.len()` rows of the
    /// table's width, bag by bag): an embedding bag. Bag `b` holds the keys
    /// `ends[b - 1]..ends[b]` of `keys` (bag 0 from 0); an empty bag sums to zeros. Each
    /// server sums its keys of a bag and sends one row per bag, not one per key; the sums
    /// of a bag are added in server order. Push its gradient with [`Grad::SparseBags`].
    SparseBags {
        /// The table.
        table: &'a str,
        /// The rows' keys, bag by bag.
        keys: &'a [u64],
        /// Where each bag ends in `keys`.
        ends: &'a [u64],
        /// Where the sums go.
        out: &'a mut [f32],
    },
}

impl Pull<'_> {
    fn out(&mut self) -> &mut [f32] {
        match self {
            Pull::Dense { out, .. } | Pull::Sparse { out, .. } | Pull::SparseBags { out, .. } => out,
        }
    }
}

/// One server's share of a [`PsClient::pull`]: the pieces asked of it, and where each
/// piece's values go (the pull's index, and the place in its buffer).
#[derive(Default)]
struct ServerPull {
    pieces: Vec<PullPiece>,
    places: Vec<(usize, Place)>,
}

impl ServerPull {
    /// Values the server's reply carries.
    fn len(&self) -> usize {
        self.places.iter().map(|(_, p)| p.len()).sum()
    }

    /// Puts the server's reply `values` (of [`len`](Self::len)) where they go in `pulls`.
    fn place(&self, values: &ReceivedFloats, pulls: &mut [Pull<'_>]) {
        let mut at = 0;
        for (j, place) in &self.places {
            let out = pulls[*j].out();
            match place {
                Place::Span(span) => values.copy_to(at, &mut out[span.clone()]),
                Place::Rows { width, to } => values.scatter_rows(at, *width, to, out),
                Place::BagSums { width, to } => values.add_rows(at, *width, to, out),
            }
            at += place.len();
        }
    }
}

/// Where a piece's values go in its pull's buffer.
enum Place {
    /// Elements, in order.
    Span(Range<usize>),
    /// Rows of `width`: the piece's row `i` is the buffer's row `to[i]`.
    Rows { width: usize, to: Vec<usize> },
    /// Sums of bags' rows, of `width`: the piece's row `i` is added to the buffer's row
    /// `to[i]`.
    BagSums { width: usize, to: Vec<usize> },
}

impl Place {
    /// Values the piece carries.
    fn len(&self) -> usize {
        match self {
            Place::Span(span) => span.len(),
            Place::Rows { width, to } | Place::BagSums { width, to } => width * to.len(),
        }
    }
}

/// How often a waiting call looks whether it was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// `Ok(e)` if `e` means the link failed (the server may come back); the error otherwise.
fn link_failure(e: Error) -> Result<Error> {
    match e {
        Error::Io { .. } => Ok(e),
        other => Err(other),
    }
}

/// Room for one server's share of `total` keys spread over `n` servers by their hash: the
/// even share and an eighth more, so that the buffers filled key by key are seldom grown
/// (a regrown buffer of a step's keys is a copy of it).
fn share(total: usize, n: usize) -> usize {
    let even = total / n.max(1);
    even + even / 8 + 16
}

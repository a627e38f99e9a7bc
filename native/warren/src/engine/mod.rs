//! The public API: a [`Communicator`] joins a job through the tracker, links to its
//! neighbours, and runs collectives over them.
//!
//! ```no_run
//! # fn main() -> warren::Result<()> {
//! let mut comm = warren::Communicator::init(warren::Config::from_env()?)?;
//! let mut grad = vec![1.0f32; 1024];
//! comm.allreduce(&mut grad, warren::Op::Sum)?;
//! comm.finalize()?;
//! # Ok(()) }
//! ```
//!
//! A communicator is one worker's handle; it is not a process-wide singleton, so several can
//! live in one process (Spark runs several tasks in one executor JVM). After a failed call the
//! communicator is unusable (every later call fails with the first error), and its links are
//! closed so that its peers fail promptly too instead of waiting for their deadline.
//!
//! The engine does I/O only; what to do in a recovery is planned by [`crate::robust`], and
//! where recovery data lives is the view's [`crate::membership::Placement`]. Its parts:
//! - `init`: joining (registration, the view, links) and re-linking after a loss;
//! - `calls`: the collectives, each a call header and an algorithm, run plainly or robustly;
//! - `options`: what a call can say besides its data ([`CallOptions`]: bootstrap key, tag);
//! - `buffers`: the caller buffers a call runs on ([`BroadcastBuf`]);
//! - `lent`: results lent to the caller instead of copied ([`Lent`]);
//! - `robust_call`: one call in robust mode (failure injection, retry after a re-link);
//! - `recovery`: one recovery round: gather proposals, plan, carry the plan's transfers out;
//! - `checkpoint`: checkpoints and loading them; `durable`: their files on disk (fail-all);
//! - `elastic`: a change of view after a checkpoint (elastic membership);
//! - `stats`: latency histograms.

use log::debug;
use std::sync::Arc;
use std::time::Instant;

use crate::cancel::CancelHandle;
use crate::collective::header::{CallHeader, CallKind, Numbering};
use crate::collective::{Net, Scratch};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::hosts::HostLayout;
use crate::liveness::{Heartbeat, Watch};
use crate::membership::View;
use crate::reduce::{DataType, Op};
use crate::robust::{BootstrapKey, RecoveryState};
use crate::topology::Topology;
use crate::tracker::TrackerClient;
use crate::tracker::proto::ToTracker;
use crate::transport::{Link, PeerListener, Transport, Waiter};

mod buffers;
mod calls;
mod checkpoint;
mod durable;
mod elastic;
mod init;
mod lent;
mod options;
mod recovery;
mod robust_call;
mod snapshot;
mod stats;

pub use buffers::BroadcastBuf;
use buffers::sealed::CallBuf;
pub use elastic::ViewChange;
pub use lent::Lent;
pub use options::{BootstrapSite, CallOptions};
pub use snapshot::Checkpoint;
pub use stats::CallStats;

/// The log target of every engine record, whichever file it comes from: the logger
/// `io.warren.native.warren.engine` on the JVM, `WARREN_LOG=warren::engine=debug` natively.
const LOG: &str = "warren::engine";

/// How long a worker tries to tell the tracker of its final error before it gives up.
const FINAL_REPORT_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A robust communicator's recovery state ([`RecoveryState`], pure) and the engine's
/// bookkeeping around it.
#[derive(Debug)]
struct Robust {
    state: RecoveryState,
    /// Set after a re-link until every worker is at the same call again.
    consensus: bool,
    recoveries: u64,
    /// Bootstrap calls made (for failure injection: [`crate::mock::Point::Bootstrap`]).
    boot_calls: u32,
    /// A copy of the current call's input, to retry it after a re-link (reused).
    backup: Vec<u8>,
    /// How far a failed attempt of the current call wrote final values back into the
    /// caller's buffer (see [`crate::collective::Progress`]); cleared when a call starts.
    progress: crate::collective::Progress,
    /// Failure injection: the next attempt exits in its ring ([`crate::mock::Point::InRing`]).
    exit_in_ring: bool,
}

/// One worker's membership in a job.
pub struct Communicator {
    cfg: Config,
    /// The members of the job; the topology and the placement of recovery data derive from it.
    view: View,
    topo: Topology,
    /// The ranks grouped by host, under the hosts reduction order when several hosts have
    /// several workers (set at each linking): large allreduces then go through the hierarchy.
    hosts: Option<HostLayout>,
    links: Vec<Option<Link>>,
    waiter: Waiter,
    tracker: Option<TrackerClient>,
    listener: Option<PeerListener>,
    calls: u64,
    failed: Option<String>,
    scratch: Scratch,
    stats: CallStats,
    robust: Option<Robust>,
    /// TLS on the peer links (and the tracker connections), if on.
    tls: Option<crate::wire::Tls>,
    /// Cancels the calls from another thread (its `Waiter` and tracker socket are woken).
    cancel: CancelHandle,
    /// Stall reports and fence notices, shared by the waiter and the heartbeat thread.
    watch: Arc<Watch>,
    /// The heartbeat thread, when the tracker expects heartbeats.
    heartbeat: Option<Heartbeat>,
    /// An elastic job: the view may change after each checkpoint.
    elastic: bool,
    /// The last change of view, until the user takes it.
    view_change: Option<ViewChange>,
    /// This worker left the (elastic) job.
    left: bool,
    /// Set by a roll-back (elastic membership) until the user loads the checkpoint: whether
    /// this worker must load it from the others (it had not committed the newest one).
    rolled_back: Option<bool>,
    /// The buffers of lent results in plain mode.
    lent: lent::LentPool,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.topo.rank)
            .field("world", &self.topo.world)
            .field("calls", &self.calls)
            .finish()
    }
}

/// Whether a failed call can be recovered by re-linking (a peer went away).
fn recoverable(e: &Error) -> bool {
    matches!(e, Error::PeerLost { .. } | Error::RelinkSuperseded(_))
}

impl Communicator {
    /// This worker's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.topo.rank
    }

    /// Number of workers.
    pub fn world_size(&self) -> usize {
        self.topo.world
    }

    /// The members of the job, in rank order.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The settings this communicator was created with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of collective calls made so far.
    pub fn seq(&self) -> u64 {
        self.calls
    }

    /// Latency histograms of the calls made so far (see [`CallStats`] for what is timed).
    pub fn stats(&self) -> &CallStats {
        &self.stats
    }

    /// Checkpoint version (number of checkpoints committed; 0 before the first).
    pub fn version(&self) -> u32 {
        self.robust.as_ref().map_or(0, |r| r.state.version())
    }

    /// Number of times this worker re-linked after losing a peer.
    pub fn recoveries(&self) -> u64 {
        self.robust.as_ref().map_or(0, |r| r.recoveries)
    }

    /// A handle that cancels this communicator from another thread: the running call returns
    /// [`Error::Aborted`] within milliseconds, and so does every later call; the links close,
    /// so the peers fail as for a lost peer (or, in robust mode, wait for a replacement).
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    fn rs(&mut self) -> &mut Robust {
        self.robust.as_mut().expect("robust mode")
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.topo.world {
            return Err(Error::InvalidArgument(format!(
                "root {root} is out of range for a world of {}",
                self.topo.world
            )));
        }
        Ok(())
    }

    /// The header of the next call; in robust mode `seq` carries the position (or the
    /// bootstrap key), so that workers at different calls are told apart.
    #[allow(clippy::too_many_arguments)]
    fn header(
        &self,
        kind: CallKind,
        dtype: DataType,
        op: Op,
        elem: usize,
        root: usize,
        count: u64,
        tag: u32,
        key: Option<&BootstrapKey>,
    ) -> CallHeader {
        let (seq, numbering) = match (&self.robust, key) {
            (_, Some(k)) => (k.hash, Numbering::Bootstrap),
            (Some(r), None) => {
                let (version, seq) = r.state.point();
                (((version as u64) << 32) | seq as u64, Numbering::Checkpointed)
            }
            (None, None) => (self.calls, Numbering::Count),
        };
        CallHeader { seq, numbering, kind, dtype, op, elem_size: elem as u16, root: root as u32, count, tag }
    }

    /// Fails if an earlier call failed, or (poisoning the communicator) if it was cancelled.
    fn check_failed(&mut self) -> Result<()> {
        match &self.failed {
            Some(first) => Err(Error::Aborted {
                rank: self.topo.rank,
                reason: format!("communicator unusable after an earlier failure: {first}"),
            }),
            None => self.cancel.check().map_err(|e| self.poison(e)),
        }
    }

    /// Marks the communicator failed; closes the links (unless every rank already knows, as
    /// after a mismatch) so that peers learn at once. A call that failed because it was
    /// cancelled fails with the cancellation, whatever it was waiting for.
    fn poison(&mut self, e: Error) -> Error {
        // A roll-back leaves the communicator usable: the user loads the checkpoint.
        if matches!(e, Error::RolledBack { .. }) {
            return e;
        }
        let cancelled = self.cancel.is_cancelled();
        let e = self.named(self.cancel.explain(e));
        // A job the tracker ended was reported by the worker that failed it.
        if e.is_final() && !matches!(e, Error::JobFailed(_)) && self.failed.is_none() {
            self.report_final(&e.to_string());
        }
        self.failed = Some(e.to_string());
        if cancelled || !matches!(e, Error::Mismatch(_) | Error::Aborted { .. }) {
            self.close_links();
        }
        e
    }

    /// Tells the tracker that this worker failed with an error that cannot succeed on retry,
    /// before the error reaches the runner: the tracker then holds the re-runs that register,
    /// instead of letting each fail the same way (best effort: a tracker that cannot be told
    /// in [`FINAL_REPORT_LIMIT`] is logged and passed over).
    fn report_final(&mut self, message: &str) {
        let Some(t) = self.tracker.as_mut() else { return };
        let deadline = Instant::now() + FINAL_REPORT_LIMIT;
        if let Err(e) = t.request(&ToTracker::Failed { message: message.to_string() }, deadline) {
            debug!(target: LOG, "rank {}: could not tell the tracker of the final error: {e}", self.topo.rank);
        }
    }

    /// Fails the job with an error that no re-run can mend, found outside Warren's calls (a
    /// checkpoint the caller cannot decode, say): tells the tracker, which holds the re-runs
    /// that register from then on until the runner stops the job, and makes every later call
    /// of this communicator fail; its links are closed, so that its peers' calls fail at once.
    /// The caller then raises its own error.
    pub fn fail_job(&mut self, reason: &str) {
        if self.failed.is_none() {
            self.report_final(reason);
            self.failed = Some(reason.to_string());
            // The peers learn at once, as after any failure of this worker.
            self.close_links();
        }
    }

    /// Names the task of a lost peer from the membership view (the links know only ranks).
    fn named(&self, e: Error) -> Error {
        match e {
            Error::PeerLost { rank, task: None, reason } => {
                Error::PeerLost { rank, task: self.view.task_of(rank).map(str::to_string), reason }
            }
            e => e,
        }
    }

    /// Runs one call in plain mode: a failure poisons the communicator.
    fn plain(
        &mut self,
        hdr: CallHeader,
        body: impl FnOnce(&mut Net, &Topology, &mut Scratch) -> Result<()>,
    ) -> Result<()> {
        self.check_failed()?;
        let r = self.exec(hdr, body);
        self.calls += 1;
        r.map_err(|e| self.poison(e))
    }

    /// Runs one collective over the current links with the call deadline. In plain mode it
    /// records the call's latency; in robust mode `robust_call` records the whole call instead
    /// (waiting for a replacement, consensus and replay included).
    fn exec(
        &mut self,
        hdr: CallHeader,
        body: impl FnOnce(&mut Net, &Topology, &mut Scratch) -> Result<()>,
    ) -> Result<()> {
        let started = Instant::now();
        // Each call's waits spin afresh: a call that ended without waiting again must not
        // leave its last idle time to the next one, whose first wait would then block at once.
        self.waiter.progressed()?;
        let mut net = Net {
            me: self.topo.rank,
            links: &mut self.links,
            waiter: &mut self.waiter,
            started,
            deadline: started + self.cfg.timeout,
            exit_in_ring: self.robust.as_mut().is_some_and(|r| std::mem::take(&mut r.exit_in_ring)),
        };
        let result = body(&mut net, &self.topo, &mut self.scratch).and_then(|()| net.drain());
        if result.is_ok() && self.robust.is_none() {
            self.stats.record(hdr.kind, started.elapsed());
        }
        result
    }

    /// Each linked peer's rank and how its link carries data ([`Transport::Shm`] to a peer
    /// on this host unless `WARREN_TRANSPORT=tcp`), in rank order.
    pub fn link_transports(&self) -> Vec<(usize, Transport)> {
        self.links.iter().flatten().map(|l| (l.peer, l.transport())).collect()
    }

    /// How many links lend large transfers to their peer (shared memory with single-copy
    /// transfers on: `WARREN_SHM_CMA`, a host with a core per worker, and a kernel that lets
    /// the peer read this process's memory).
    pub fn lending_links(&self) -> usize {
        self.links.iter().flatten().filter(|l| l.can_lend()).count()
    }

    /// How many links are encrypted (TLS: the TCP links when `WARREN_TLS=1`).
    pub fn tls_links(&self) -> usize {
        self.links.iter().flatten().filter(|l| l.is_tls()).count()
    }

    fn close_links(&mut self) {
        for slot in self.links.iter_mut() {
            if let Some(mut l) = slot.take() {
                self.waiter.deregister(&mut l);
                l.close();
            }
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.heartbeat = None;
        self.close_links();
        self.cancel.detach();
    }
}

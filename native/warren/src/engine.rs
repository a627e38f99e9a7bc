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

use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::collective::{self, Net, Scratch};
use crate::config::Config;
use crate::error::{CallMismatch, Declaration, Error, Result};
use crate::membership::{Placed, Placement, View};
use crate::mock::{Mock, Point as MockPoint};
use crate::proto::{COUNT_UNKNOWN, CallHeader, CallKind, FromTracker, ToTracker};
use crate::reduce::{self, DataType, Element, Op};
use crate::robust::{
    BootstrapCache, BootstrapDecision, BootstrapKey, Decision, PROPOSAL_WORDS, Proposal, ResultBuffer, Want, decide,
    decide_bootstrap,
};
use crate::topology::Topology;
use crate::tracker::TrackerClient;
use crate::transport::{Link, LinkSetup, PeerListener, Waiter, connect_peers};

mod checkpoint;
mod stats;
pub use checkpoint::Checkpoint;
pub use stats::CallStats;

/// Local models of other ranks, by rank.
type Replicas = std::collections::BTreeMap<usize, Vec<u8>>;

/// Recovery state of a robust communicator (see [`crate::robust`]).
#[derive(Debug, Default)]
struct RobustState {
    version: u32,
    seq: u32,
    results: ResultBuffer,
    boot: BootstrapCache,
    global: Vec<u8>,
    local: Option<Vec<u8>>,
    /// Local models of the ring predecessors, replicated here at the last checkpoint.
    replicas: Replicas,
    /// Every worker's local model size at the last checkpoint (0: none).
    local_sizes: Vec<u64>,
    /// Replicas and sizes received by a checkpoint not yet committed.
    pending: Option<(Replicas, Vec<u64>)>,
    /// Set after a re-link until every worker is at the same call again.
    consensus: bool,
    recoveries: u64,
    /// Bootstrap calls made (for failure injection: [`MockPoint::Bootstrap`]).
    boot_calls: u32,
    /// A copy of the current call's input, to retry it after a re-link (reused).
    backup: Vec<u8>,
}

/// A caller's buffer as a robust call sees it: read the output, overwrite with served data.
trait CallBuf {
    fn bytes(&self) -> &[u8];
    fn set(&mut self, data: &[u8]);
}

impl CallBuf for [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn set(&mut self, data: &[u8]) {
        self.copy_from_slice(data);
    }
}

impl CallBuf for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn set(&mut self, data: &[u8]) {
        self.clear();
        self.extend_from_slice(data);
    }
}

/// How a consensus round ended for this worker.
enum Round {
    /// Everyone is at this call: run it.
    Execute,
    /// This worker was served the call's result.
    Served(Vec<u8>),
    /// This worker loaded the checkpoint.
    Loaded,
    /// This worker committed the checkpoint it was in.
    Committed,
    /// Another worker was served; propose again.
    Continue,
}

/// One worker's membership in a job.
pub struct Communicator {
    cfg: Config,
    /// The members of the job; the topology and the placement derive from it.
    view: View,
    topo: Topology,
    placement: Placement,
    /// The owners whose local models this worker keeps a replica of.
    kept: Vec<usize>,
    links: Vec<Option<Link>>,
    waiter: Waiter,
    tracker: Option<TrackerClient>,
    listener: Option<PeerListener>,
    calls: u64,
    failed: Option<String>,
    scratch: Scratch,
    stats: CallStats,
    robust: Option<RobustState>,
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

/// Splits served recovery data into the stored call header and its bytes, and checks on every
/// worker that each requester in `to` asked for that call (a mismatch is raised everywhere).
fn checked_payload(
    mut payload: Vec<u8>,
    server: usize,
    props: &[Proposal],
    to: &[usize],
    what: &str,
) -> Result<Vec<u8>> {
    use crate::proto::{HEADER_LEN, HeaderMsg, decode_header};
    if payload.len() < HEADER_LEN {
        return Err(Error::Protocol(format!("rank {server} served {what} without its header")));
    }
    let HeaderMsg::Proceed(stored) = decode_header(payload[..HEADER_LEN].try_into().unwrap(), server)? else {
        return Err(Error::Protocol(format!("rank {server} served {what} with a malformed header")));
    };
    let call = Proposal::call_hash(&stored);
    for &r in to {
        let p = &props[r];
        if p.call != call || (p.count != stored.count && p.count != COUNT_UNKNOWN) {
            let count = if p.count == COUNT_UNKNOWN { "?".to_string() } else { p.count.to_string() };
            let replay = Declaration { rank: r, call: format!("a call of {count} bytes") };
            let original = Declaration { rank: server, call: stored.describe() };
            return Err(Error::Mismatch(CallMismatch::new(replay, original, format!("rank {r} replays {what}"))));
        }
    }
    Ok(payload.split_off(HEADER_LEN))
}

/// Whether a failed call can be recovered by re-linking (a peer went away).
fn recoverable(e: &Error) -> bool {
    matches!(e, Error::PeerLost { .. } | Error::RelinkSuperseded(_))
}

impl Communicator {
    /// Joins the job described by `cfg`: registers with the tracker (none for a world of
    /// one), gets a rank, and links to the neighbours in the tree and the ring. A worker whose
    /// task id already had a rank (a restarted worker) re-joins in recovery: its first calls
    /// are served by the others until it has caught up.
    pub fn init(cfg: Config) -> Result<Communicator> {
        cfg.validate()?;
        let waiter = Waiter::new(cfg.spin)?;
        let robust = cfg.robust.then(RobustState::default);
        let Some(uri) = cfg.tracker_uri.clone() else {
            let view = View::solo(&cfg.task_id);
            return Communicator::assemble(cfg, view, waiter, None, None, robust);
        };
        let deadline = Instant::now() + cfg.connect_timeout;
        let mut tracker = TrackerClient::connect(&uri, cfg.secret.as_bytes(), deadline)?;
        let host = match &cfg.host {
            Some(h) => h.clone(),
            None => tracker.local_ip()?.to_string(),
        };
        let listener = PeerListener::bind(&host)?;
        let register =
            ToTracker::Register { task_id: cfg.task_id.clone(), host, port: listener.port, attempt: cfg.attempt };
        let reply = loop {
            match tracker.request(&register, deadline)? {
                FromTracker::Retry { message } if Instant::now() < deadline => {
                    debug!("task {}: {message}; registering again", cfg.task_id);
                    std::thread::sleep(Duration::from_millis(10));
                }
                FromTracker::Retry { message } => return Err(Error::Tracker(message)),
                other => break other,
            }
        };
        let FromTracker::Assignment { view, peers, round, recovered } = reply else {
            return Err(Error::Protocol(format!("tracker answered registration with {reply:?}")));
        };
        tracker.take_notifications();
        if view.world() != cfg.num_workers {
            return Err(Error::Config(format!(
                "{} is {} but the tracker runs a job of {} workers",
                crate::config::keys::NUM_WORKERS,
                cfg.num_workers,
                view.world()
            )));
        }
        let mut comm = Communicator::assemble(cfg, view, waiter, Some(tracker), Some(listener), robust)?;
        let rank = comm.topo.rank;
        comm.maybe_mock(MockPoint::Linking);
        match comm.install_links(&peers, deadline) {
            Err(e) if recoverable(&e) && comm.robust.is_some() => comm.relink(&e)?,
            r => r?,
        }
        if recovered {
            info!(
                "task {} re-joined as rank {rank} (round {round}); catching up from the other workers",
                comm.cfg.task_id
            );
            if let Some(r) = comm.robust.as_mut() {
                r.consensus = true;
            }
        }
        debug!("rank {rank}/{}: linked to {:?}", comm.topo.world, comm.topo.neighbours());
        Ok(comm)
    }

    /// A communicator with no links yet, placed by `view`.
    fn assemble(
        cfg: Config,
        view: View,
        waiter: Waiter,
        tracker: Option<TrackerClient>,
        listener: Option<PeerListener>,
        robust: Option<RobustState>,
    ) -> Result<Communicator> {
        let rank = view.rank_of(&cfg.task_id).ok_or_else(|| {
            Error::Protocol(format!("the tracker's view {:?} does not include task {}", view.members(), cfg.task_id))
        })?;
        let topo = view.topology(rank);
        let placement = Placement::new(view.world(), cfg.result_replicas, cfg.local_replicas);
        Ok(Communicator {
            links: (0..topo.world).map(|_| None).collect(),
            kept: placement.local_models_kept_by(rank),
            placement,
            view,
            topo,
            waiter,
            tracker,
            listener,
            calls: 0,
            failed: None,
            scratch: Scratch::default(),
            stats: CallStats::default(),
            robust,
            cfg,
        })
    }

    fn install_links(&mut self, peers: &[crate::proto::PeerAddr], deadline: Instant) -> Result<()> {
        let listener = self.listener.as_ref().expect("a tracker-joined communicator has a listener");
        let neighbours = self.topo.neighbours();
        let me = self.topo.rank;
        let tracker = &mut self.tracker;
        let mut cancel = || -> Result<()> {
            let started = match tracker.as_mut() {
                Some(t) => t.round_started()?,
                None => false,
            };
            if started {
                return Err(Error::RelinkSuperseded(format!(
                    "rank {me}: a worker failed again while the others linked"
                )));
            }
            Ok(())
        };
        let setup =
            LinkSetup { me, secret: self.cfg.secret.as_bytes(), deadline, socket_buffer: self.cfg.socket_buffer };
        let linked = connect_peers(listener, &setup, peers, &neighbours, &mut cancel)?;
        for mut l in linked {
            self.waiter.register(&mut l)?;
            let p = l.peer;
            self.links[p] = Some(l);
        }
        Ok(())
    }

    /// Re-links after a lost peer: closes every link (so the neighbours learn at once), joins
    /// the tracker's re-link round, and links to the new addresses. Retries until
    /// `connect_timeout` if a worker fails again meanwhile.
    fn relink(&mut self, cause: &Error) -> Result<()> {
        let deadline = Instant::now() + self.cfg.connect_timeout;
        warn!("rank {}: {cause}; re-linking", self.topo.rank);
        loop {
            self.close_links();
            let port = self.listener.as_ref().map(|l| l.port).unwrap_or(0);
            let host = self.listener.as_ref().map(|l| l.host.clone()).unwrap_or_default();
            let tracker =
                self.tracker.as_mut().ok_or_else(|| Error::Tracker("no tracker to re-link through".into()))?;
            tracker.send(&ToTracker::Rejoin { host, port }, deadline)?;
            let reply = tracker.recv(deadline)?;
            // Rounds announced before our assignment are the one we just joined.
            tracker.take_notifications();
            let FromTracker::Assignment { view, peers, round, .. } = reply else {
                return Err(Error::Protocol(format!("tracker answered a re-link with {reply:?}")));
            };
            if view != self.view {
                return Err(Error::Protocol(format!(
                    "the membership changed during a re-link (from {:?} to {:?}), which this version does not support",
                    self.view.members(),
                    view.members()
                )));
            }
            match self.install_links(&peers, deadline) {
                Ok(()) => {
                    let r = self.robust.as_mut().expect("only robust communicators re-link");
                    r.consensus = true;
                    r.recoveries += 1;
                    info!("rank {}: re-linked (round {round})", self.topo.rank);
                    return Ok(());
                }
                Err(e) if Instant::now() < deadline => {
                    warn!("rank {}: re-linking failed ({e}); trying again", self.topo.rank)
                }
                Err(e) => return Err(e),
            }
        }
    }

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
        self.robust.as_ref().map_or(0, |r| r.version)
    }

    /// Number of times this worker re-linked after losing a peer.
    pub fn recoveries(&self) -> u64 {
        self.robust.as_ref().map_or(0, |r| r.recoveries)
    }

    /// Reduces `buf` element-wise across all workers with `op`; every worker ends with the
    /// same bits. Payloads of `ring_threshold` bytes or more use the ring algorithm.
    pub fn allreduce<T: Element>(&mut self, buf: &mut [T], op: Op) -> Result<()> {
        let reducer = reduce::typed_reducer::<T>(op)?;
        self.allreduce_raw(bytemuck::cast_slice_mut(buf), T::DTYPE, op, T::DTYPE.size(), 0, &reducer, None)
    }

    /// A bootstrap allreduce: made once before the first checkpoint; with the bootstrap cache
    /// on, its result is kept for the whole job and served to a restarted worker by key (this
    /// call site and how many times it was called).
    #[track_caller]
    pub fn allreduce_bootstrap<T: Element>(&mut self, buf: &mut [T], op: Op) -> Result<()> {
        let key = self.bootstrap_key();
        let reducer = reduce::typed_reducer::<T>(op)?;
        self.allreduce_raw(bytemuck::cast_slice_mut(buf), T::DTYPE, op, T::DTYPE.size(), 0, &reducer, key)
    }

    /// Like [`Communicator::allreduce`] for a byte buffer whose element type is known at run
    /// time (the JVM and the benchmark use this). `buf` must be aligned to the element type.
    /// `bootstrap_key`, if given, makes it a bootstrap call with that explicit key.
    pub fn allreduce_dyn(&mut self, buf: &mut [u8], dtype: DataType, op: Op) -> Result<()> {
        self.allreduce_dyn_inner(buf, dtype, op, 0, None)
    }

    /// [`Communicator::allreduce_dyn`] with a `tag` that every rank must pass alike (a
    /// mismatch error otherwise). A caller that reduces a large buffer as several calls on
    /// its pieces (the JVM binding does) puts the whole buffer's length in the tag, so that
    /// ranks splitting buffers of different lengths are told so instead of pairing pieces of
    /// different calls.
    pub fn allreduce_dyn_tagged(&mut self, buf: &mut [u8], dtype: DataType, op: Op, tag: u32) -> Result<()> {
        self.allreduce_dyn_inner(buf, dtype, op, tag, None)
    }

    /// [`Communicator::allreduce_dyn`] as a bootstrap call under an explicit key (foreign
    /// callers pass their own call-site description).
    pub fn allreduce_dyn_keyed(&mut self, buf: &mut [u8], dtype: DataType, op: Op, bootstrap_key: &str) -> Result<()> {
        let key = self.explicit_key(bootstrap_key);
        self.allreduce_dyn_inner(buf, dtype, op, 0, key)
    }

    fn allreduce_dyn_inner(
        &mut self,
        buf: &mut [u8],
        dtype: DataType,
        op: Op,
        tag: u32,
        key: Option<BootstrapKey>,
    ) -> Result<()> {
        if dtype == DataType::User || !op.supports(dtype) || op == Op::User {
            return Err(Error::InvalidArgument(format!("operator {} is not defined for {}", op.name(), dtype.name())));
        }
        let size = dtype.size();
        if buf.len() % size != 0 || (buf.as_ptr() as usize) % size != 0 {
            return Err(Error::InvalidArgument(format!(
                "a {} buffer must be aligned to and a multiple of {size} bytes (got {} bytes)",
                dtype.name(),
                buf.len()
            )));
        }
        let reducer = move |a: &mut [u8], b: &[u8]| reduce::reduce_dyn(dtype, op, a, b);
        self.allreduce_raw(buf, dtype, op, size, tag, &reducer, key)
    }

    /// Allreduce with a user reducer over raw bytes: `reducer(acc, other)` combines `other`
    /// into `acc`; both hold whole elements of `elem_size` bytes. It must be deterministic.
    /// `tag` identifies the reducer: ranks calling with different tags get a mismatch error.
    pub fn allreduce_with(
        &mut self,
        buf: &mut [u8],
        elem_size: usize,
        tag: u32,
        reducer: impl Fn(&mut [u8], &[u8]),
    ) -> Result<()> {
        if elem_size == 0 || elem_size > u16::MAX as usize || buf.len() % elem_size != 0 {
            return Err(Error::InvalidArgument(format!(
                "buffer of {} bytes is not a whole number of {elem_size}-byte elements",
                buf.len()
            )));
        }
        self.allreduce_raw(buf, DataType::User, Op::User, elem_size, tag, &reducer, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn allreduce_raw(
        &mut self,
        buf: &mut [u8],
        dtype: DataType,
        op: Op,
        elem: usize,
        tag: u32,
        reducer: &reduce::ByteReducer,
        key: Option<BootstrapKey>,
    ) -> Result<()> {
        let kind = if buf.len() >= self.cfg.ring_threshold && self.topo.world > 1 {
            CallKind::AllreduceRing
        } else {
            CallKind::AllreduceTree
        };
        let hdr = self.header(kind, dtype, op, elem, 0, buf.len() as u64, tag, key.as_ref());
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch, data: &mut [u8]| match kind {
            CallKind::AllreduceRing => collective::allreduce_ring(net, topo, hdr, data, elem, reducer, scratch),
            _ => collective::allreduce_tree(net, topo, hdr, data, elem, reducer, scratch).map(|_| ()),
        };
        if self.robust.is_none() {
            return self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, buf));
        }
        let want = if key.is_some() { Want::Bootstrap } else { Want::Execute };
        self.robust_call(hdr, want, key.as_ref(), buf, &mut |c, b: &mut [u8]| {
            c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, b))
        })
        .map(|_| ())
    }

    /// Broadcasts `data` from `root`: on return every worker's `data` equals the root's
    /// (other workers' vectors are resized to the root's length).
    pub fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        self.broadcast_inner(data, root, None)
    }

    /// A bootstrap broadcast (see [`Communicator::allreduce_bootstrap`]).
    #[track_caller]
    pub fn broadcast_bootstrap(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        let key = self.bootstrap_key();
        self.broadcast_inner(data, root, key)
    }

    /// A bootstrap broadcast under an explicit key (foreign callers pass their call site).
    pub fn broadcast_keyed(&mut self, data: &mut Vec<u8>, root: usize, bootstrap_key: &str) -> Result<()> {
        let key = self.explicit_key(bootstrap_key);
        self.broadcast_inner(data, root, key)
    }

    fn broadcast_inner(&mut self, data: &mut Vec<u8>, root: usize, key: Option<BootstrapKey>) -> Result<()> {
        self.check_root(root)?;
        let count = if self.topo.rank == root { data.len() as u64 } else { COUNT_UNKNOWN };
        let hdr = self.header(CallKind::Broadcast, DataType::U8, Op::Sum, 1, root, count, 0, key.as_ref());
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch, data: &mut Vec<u8>| {
            let agreed = collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            let len = usize::try_from(agreed.count).map_err(|_| Error::Protocol("broadcast size overflows".into()))?;
            data.resize(len, 0);
            collective::broadcast_tree(net, topo, root, data, &hdr.describe())
        };
        if self.robust.is_none() {
            return self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, data));
        }
        let want = if key.is_some() { Want::Bootstrap } else { Want::Execute };
        self.robust_call(hdr, want, key.as_ref(), data, &mut |c, b: &mut Vec<u8>| {
            c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, b))
        })
        .map(|_| ())
    }

    /// Broadcasts a fixed-size buffer from `root`; every worker must pass the same length.
    pub fn broadcast_slice(&mut self, data: &mut [u8], root: usize) -> Result<()> {
        self.check_root(root)?;
        let hdr = self.header(CallKind::Broadcast, DataType::U8, Op::Sum, 1, root, data.len() as u64, 1, None);
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch, data: &mut [u8]| {
            collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            collective::broadcast_tree(net, topo, root, data, &hdr.describe())
        };
        if self.robust.is_none() {
            return self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, data));
        }
        self.robust_call(hdr, Want::Execute, None, data, &mut |c, b: &mut [u8]| {
            c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, b))
        })
        .map(|_| ())
    }

    /// Gathers every worker's `mine` (sizes may differ) on every worker, in rank order.
    pub fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (flat, offsets) = self.allgather_flat(mine)?;
        Ok(offsets.windows(2).map(|w| flat[w[0]..w[1]].to_vec()).collect())
    }

    /// Like [`Communicator::allgather`], returning one buffer and the `world + 1` offsets of
    /// the blocks in it.
    pub fn allgather_flat(&mut self, mine: &[u8]) -> Result<(Vec<u8>, Vec<usize>)> {
        let world = self.topo.world;
        let me = self.topo.rank;
        let hdr = self.header(CallKind::Allgather, DataType::U64, Op::Sum, 8, 0, (8 * world) as u64, 0, None);
        // The result travels as: the world + 1 offsets (u64 each), then the blocks.
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch, out: &mut Vec<u8>| {
            let mut sizes = vec![0u64; world];
            sizes[me] = mine.len() as u64;
            let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
            collective::allreduce_tree(net, topo, hdr, bytemuck::cast_slice_mut(&mut sizes), 8, &reducer, scratch)?;
            let mut offsets = vec![0usize];
            for s in &sizes {
                let s = usize::try_from(*s).map_err(|_| Error::Protocol("allgather size overflows".into()))?;
                offsets.push(offsets.last().unwrap() + s);
            }
            let mut flat = vec![0u8; *offsets.last().unwrap()];
            flat[offsets[me]..offsets[me + 1]].copy_from_slice(mine);
            let blocks: Vec<std::ops::Range<usize>> = offsets.windows(2).map(|w| w[0]..w[1]).collect();
            collective::allgather_ring(net, topo, &mut flat, &blocks, scratch, &hdr.describe())?;
            out.clear();
            offsets.iter().for_each(|o| out.extend_from_slice(&(*o as u64).to_le_bytes()));
            out.extend_from_slice(&flat);
            Ok(())
        };
        let mut packed = Vec::new();
        if self.robust.is_none() {
            self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, &mut packed))?;
        } else {
            self.robust_call(hdr, Want::Execute, None, &mut packed, &mut |c, b: &mut Vec<u8>| {
                c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, b))
            })?;
        }
        let n = 8 * (world + 1);
        let offsets: Vec<usize> =
            packed[..n].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize).collect();
        Ok((packed.split_off(n), offsets))
    }

    /// Returns once every worker has called `barrier`.
    pub fn barrier(&mut self) -> Result<()> {
        let hdr = self.header(CallKind::Barrier, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch| {
            collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch).map(|_| ())
        };
        if self.robust.is_none() {
            return self.plain(hdr, algorithm);
        }
        self.robust_call(hdr, Want::Execute, None, &mut Vec::new(), &mut |c, _: &mut Vec<u8>| c.exec(hdr, algorithm))
            .map(|_| ())
    }

    /// Commits a checkpoint: the global model (the same on every worker) and this worker's
    /// local model. In robust mode both stay in memory (the local model also on the ring
    /// successor) so that a restarted worker can load them from the others; with
    /// `WARREN_CHECKPOINT_DIR` they are also written to disk. Two phases (prepare, then
    /// acknowledge): a failure in between leaves every worker either before or after it.
    pub fn checkpoint(&mut self, global: &[u8], local: Option<&[u8]>) -> Result<()> {
        if self.robust.is_none() {
            return Err(Error::InvalidArgument("checkpoints need robust mode (WARREN_ROBUST=1)".into()));
        }
        let started = Instant::now();
        let tag = checkpoint::digest32(global);
        let me = self.topo.rank;
        let world = self.topo.world;
        let local_bytes = local.unwrap_or(&[]).to_vec();
        let prep = self.header(CallKind::Checkpoint, DataType::U8, Op::Sum, 1, 0, global.len() as u64, tag, None);
        let kept = self.kept.clone();
        let mut received = None;
        let outcome = self.robust_call(prep, Want::Checkpoint, None, &mut Vec::new(), &mut |c, _: &mut Vec<u8>| {
            c.exec(prep, |net, topo, scratch| {
                // Local models move along the ring: each worker keeps those of its
                // `copies` predecessors.
                let mut sizes = vec![0u64; world];
                sizes[me] = local_bytes.len() as u64;
                let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
                collective::allreduce_tree(
                    net,
                    topo,
                    prep,
                    bytemuck::cast_slice_mut(&mut sizes),
                    8,
                    &reducer,
                    scratch,
                )?;
                let mut replicas = std::collections::BTreeMap::new();
                let mut block = local_bytes.clone();
                for &owner in &kept {
                    let got =
                        collective::ring_shift(net, topo, &block, sizes[owner] as usize, scratch, &prep.describe())?;
                    replicas.insert(owner, got.clone());
                    block = got;
                }
                received = Some((replicas, sizes));
                Ok(())
            })
        })?;
        if let Some(r) = received.take() {
            self.rs().pending = Some(r);
        }
        if !outcome {
            let ack = self.header(CallKind::CheckpointAck, DataType::U8, Op::Sum, 1, 0, 0, tag, None);
            self.robust_call(ack, Want::Checkpoint, None, &mut Vec::new(), &mut |c, _: &mut Vec<u8>| {
                c.exec(ack, |net, topo, scratch| {
                    collective::allreduce_tree(net, topo, ack, &mut [], 1, &|_, _| {}, scratch).map(|_| ())
                })
            })?;
        }
        let r = self.rs();
        r.version += 1;
        r.seq = 0;
        r.results.clear();
        r.global = global.to_vec();
        r.local = local.map(<[u8]>::to_vec);
        // Replicas are kept only if this checkpoint delivered them: a worker that was served
        // the prepare phase (it was behind) has none of this version, and must not offer the
        // previous version's as current.
        match r.pending.take() {
            Some((replicas, sizes)) => {
                r.replicas = replicas;
                r.local_sizes = sizes;
            }
            None => r.replicas.clear(),
        }
        let v = r.version;
        checkpoint::write_durable(&self.cfg, me, v, global, local)?;
        self.stats.record(CallKind::Checkpoint, started.elapsed());
        Ok(())
    }

    /// The latest checkpoint: version 0 and empty models on a fresh start. A restarted worker
    /// gets the checkpoint from the others (its local model from the worker that replicated
    /// it); with `WARREN_CHECKPOINT_DIR` and no live copy (the fail-all strategy), it is read
    /// from disk.
    pub fn load_checkpoint(&mut self) -> Result<Checkpoint> {
        self.check_failed()?;
        let Some(r) = self.robust.as_ref() else {
            return Err(Error::InvalidArgument("checkpoints need robust mode (WARREN_ROBUST=1)".into()));
        };
        if !r.consensus {
            if r.version == 0 && self.cfg.checkpoint_dir.is_some() {
                return self.load_durable();
            }
            return Ok(Checkpoint { version: r.version, global: r.global.clone(), local: r.local.clone() });
        }
        let hdr = self.header(CallKind::Checkpoint, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        loop {
            match self.consensus_round(&hdr, Want::LoadCheckpoint, None) {
                Ok(Round::Loaded) => {
                    let r = self.rs();
                    return Ok(Checkpoint { version: r.version, global: r.global.clone(), local: r.local.clone() });
                }
                Ok(_) => continue,
                Err(e) if recoverable(&e) => self.relink(&e)?,
                Err(e) => return Err(self.poison(e)),
            }
        }
    }

    /// A fresh start with a checkpoint directory (the fail-all strategy): every worker reads
    /// its latest durable checkpoint, and all agree on the newest version every one of them
    /// has (a failure during a checkpoint can leave some one version ahead).
    fn load_durable(&mut self) -> Result<Checkpoint> {
        let me = self.topo.rank;
        let mine = checkpoint::latest_durable(&self.cfg, me)?;
        let agreed =
            self.gather::<1>([mine as u64]).map_err(|e| self.poison(e))?.iter().map(|v| v[0]).min().unwrap_or(0) as u32;
        if agreed == 0 {
            return Ok(Checkpoint::default());
        }
        let c = checkpoint::read_durable(&self.cfg, me, agreed)?.ok_or_else(|| Error::RecoveryImpossible {
            lost: vec![self.cfg.task_id.clone()],
            reason: format!("rank {me} has no durable checkpoint of version {agreed}, which every worker has"),
        })?;
        info!("rank {me}: loaded durable checkpoint version {agreed}");
        let r = self.rs();
        r.version = c.version;
        r.global = c.global.clone();
        r.local = c.local.clone();
        Ok(c)
    }

    /// Writes `msg` to the tracker's log, prefixed with this worker's rank (to the local log
    /// for a world of one).
    pub fn print(&mut self, msg: &str) -> Result<()> {
        match self.tracker.as_mut() {
            Some(t) => {
                let deadline = Instant::now() + self.cfg.connect_timeout.min(Duration::from_secs(30));
                t.request(&ToTracker::Print { msg: msg.to_string() }, deadline).map(|_| ())
            }
            None => {
                info!("[rank 0] {msg}");
                Ok(())
            }
        }
    }

    /// Leaves the job: tells the tracker this worker finished cleanly and closes the links.
    pub fn finalize(mut self) -> Result<()> {
        self.close_links();
        if let Some(t) = self.tracker.as_mut() {
            let deadline = Instant::now() + Duration::from_secs(30);
            t.request(&ToTracker::Shutdown, deadline)?;
        }
        Ok(())
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

    fn rs(&mut self) -> &mut RobustState {
        self.robust.as_mut().expect("robust mode")
    }

    /// The key of a bootstrap call from the caller's location (`#[track_caller]`); `None`
    /// when the bootstrap cache is off (the call is then an ordinary call).
    #[track_caller]
    fn bootstrap_key(&mut self) -> Option<BootstrapKey> {
        let loc = std::panic::Location::caller();
        self.site_key(&format!("{}:{}:{}", loc.file(), loc.line(), loc.column()))
    }

    /// The key of a bootstrap call under an explicit key from a foreign caller.
    fn explicit_key(&mut self, key: &str) -> Option<BootstrapKey> {
        self.site_key(&format!("key:{key}"))
    }

    fn site_key(&mut self, site: &str) -> Option<BootstrapKey> {
        let on = self.cfg.bootstrap_cache;
        let r = self.robust.as_mut()?;
        on.then(|| r.boot.next_key(site))
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
        let seq = match (&self.robust, key) {
            (_, Some(k)) => k.hash,
            (Some(r), None) => ((r.version as u64) << 32) | r.seq as u64,
            (None, None) => self.calls,
        };
        CallHeader { seq, kind, dtype, op, elem_size: elem as u16, root: root as u32, count, tag }
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(first) => Err(Error::Aborted {
                rank: self.topo.rank,
                reason: format!("communicator unusable after an earlier failure: {first}"),
            }),
            None => Ok(()),
        }
    }

    /// Marks the communicator failed; closes the links (unless every rank already knows, as
    /// after a mismatch) so that peers learn at once.
    fn poison(&mut self, e: Error) -> Error {
        self.failed = Some(e.to_string());
        if !matches!(e, Error::Mismatch(_) | Error::Aborted { .. }) {
            self.close_links();
        }
        e
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
        let mut net = Net {
            me: self.topo.rank,
            links: &mut self.links,
            waiter: &mut self.waiter,
            started,
            deadline: started + self.cfg.timeout,
        };
        let result = body(&mut net, &self.topo, &mut self.scratch);
        if result.is_ok() && self.robust.is_none() {
            self.stats.record(hdr.kind, started.elapsed());
        }
        result
    }

    /// Exits abruptly if `WARREN_MOCK` names this worker at this point (failure injection).
    fn maybe_mock(&self, point: MockPoint) {
        let me = Mock { rank: self.topo.rank, point, attempt: self.cfg.attempt };
        if self.cfg.mock.contains(&me) {
            eprintln!("WARREN_MOCK: rank {} exits at {me}", me.rank);
            // SAFETY: _exit ends the process at once, like a crash; nothing runs after it.
            unsafe { libc::_exit(86) }
        }
    }

    /// One call in robust mode. `exec` runs the call collectively on the caller's `buf` (its
    /// input is kept to run it again after a re-link); a result served by another worker is
    /// written into `buf` instead. Returns `true` if the call was a checkpoint phase that ended
    /// by committing (see [`Decision::CommitCheckpoint`]).
    fn robust_call<B: CallBuf + ?Sized>(
        &mut self,
        hdr: CallHeader,
        want: Want,
        key: Option<&BootstrapKey>,
        buf: &mut B,
        exec: &mut dyn FnMut(&mut Communicator, &mut B) -> Result<()>,
    ) -> Result<bool> {
        self.check_failed()?;
        let started = Instant::now();
        let point = {
            let r = self.rs();
            (r.version, r.seq)
        };
        match key {
            None => self.maybe_mock(MockPoint::Call { version: point.0, seq: point.1 }),
            Some(_) => {
                let n = self.rs().boot_calls;
                self.rs().boot_calls += 1;
                self.maybe_mock(MockPoint::Bootstrap(n));
            }
        }
        let mut backup = std::mem::take(&mut self.rs().backup);
        backup.clear();
        backup.extend_from_slice(buf.bytes());
        let outcome = loop {
            if self.rs().consensus {
                match self.consensus_round(&hdr, want, key) {
                    Ok(Round::Execute) => self.rs().consensus = false,
                    Ok(Round::Served(data)) => {
                        buf.set(&data);
                        self.record(hdr, key, &data)?;
                        break Ok(false);
                    }
                    Ok(Round::Committed) => break Ok(true),
                    Ok(Round::Loaded | Round::Continue) => continue,
                    Err(e) if recoverable(&e) => {
                        self.relink(&e).map_err(|e| self.poison(e))?;
                        continue;
                    }
                    Err(e) => break Err(self.poison(e)),
                }
            }
            match exec(self, buf) {
                Ok(()) => {
                    self.calls += 1;
                    self.record(hdr, key, buf.bytes())?;
                    break Ok(false);
                }
                Err(e) if recoverable(&e) && self.tracker.is_some() => {
                    buf.set(&backup);
                    self.relink(&e).map_err(|e| self.poison(e))?;
                }
                Err(e) => break Err(self.poison(e)),
            }
        };
        self.rs().backup = backup;
        // A checkpoint's two phases are timed together, by `checkpoint`.
        if outcome.is_ok() && !matches!(hdr.kind, CallKind::Checkpoint | CallKind::CheckpointAck) {
            self.stats.record(hdr.kind, started.elapsed());
        }
        outcome
    }

    /// Keeps a call's result: in the bootstrap cache by key, or in the result buffer at the
    /// next sequence number.
    fn record(&mut self, mut hdr: CallHeader, key: Option<&BootstrapKey>, data: &[u8]) -> Result<()> {
        if hdr.count == COUNT_UNKNOWN {
            hdr.count = data.len() as u64; // a broadcast receiver learns the size from the root
        }
        let me = self.topo.rank;
        let seq = self.rs().seq;
        let keep = key.is_none() && self.placement.holders(Placed::Result(seq)).contains(&me);
        let r = self.rs();
        match key {
            Some(k) => r.boot.insert(k, hdr, data.to_vec()).map_err(|[cached, new]| {
                let (first, second) = (Declaration { rank: me, call: cached }, Declaration { rank: me, call: new });
                Error::Mismatch(CallMismatch::new(first, second, "bootstrap key collision"))
            }),
            None => {
                r.results.push(seq, hdr, data, keep);
                r.seq += 1;
                Ok(())
            }
        }
    }

    /// Gathers every worker's proposal on every worker (a small tree allreduce: each worker
    /// fills its own slot).
    fn gather<const W: usize>(&mut self, mine: [u64; W]) -> Result<Vec<[u64; W]>> {
        let world = self.topo.world;
        let mut all = vec![0u64; world * W];
        all[self.topo.rank * W..][..W].copy_from_slice(&mine);
        let hdr = CallHeader {
            seq: 0,
            kind: CallKind::Consensus,
            dtype: DataType::U64,
            op: Op::Sum,
            elem_size: 8,
            root: 0,
            count: (world * W * 8) as u64,
            tag: W as u32,
        };
        let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
        self.exec(hdr, |net, topo, scratch| {
            collective::allreduce_tree(net, topo, hdr, bytemuck::cast_slice_mut(&mut all), 8, &reducer, scratch)
                .map(|_| ())
        })?;
        Ok(all.chunks_exact(W).map(|c| c.try_into().unwrap()).collect())
    }

    /// Sends `data` from `server` to every worker (recovery data).
    fn serve(&mut self, server: usize, data: &mut Vec<u8>) -> Result<()> {
        let count = if self.topo.rank == server { data.len() as u64 } else { COUNT_UNKNOWN };
        let hdr = CallHeader {
            seq: 0,
            kind: CallKind::RecoveryData,
            dtype: DataType::U8,
            op: Op::Sum,
            elem_size: 1,
            root: server as u32,
            count,
            tag: 0,
        };
        self.exec(hdr, |net, topo, scratch| {
            let agreed = collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            data.resize(agreed.count as usize, 0);
            collective::broadcast_tree(net, topo, server, data, "recovery data")
        })
    }

    /// One round of recovery consensus (see [`crate::robust`]).
    fn consensus_round(&mut self, hdr: &CallHeader, want: Want, key: Option<&BootstrapKey>) -> Result<Round> {
        let me = self.topo.rank;
        let point = {
            let r = self.rs();
            (r.version, r.seq)
        };
        let mine =
            Proposal { point, want, key: key.map_or(0, |k| k.hash), call: Proposal::call_hash(hdr), count: hdr.count };
        let props: Vec<Proposal> = self
            .gather::<PROPOSAL_WORDS>(mine.encode())?
            .iter()
            .enumerate()
            .map(|(r, w)| {
                Proposal::decode(w).ok_or_else(|| Error::Protocol(format!("rank {r} sent no recovery proposal")))
            })
            .collect::<Result<_>>()?;
        let decision = decide(&props, &self.placement);
        debug!("rank {me}: recovery consensus {decision:?}");
        match decision {
            Decision::Execute => Ok(Round::Execute),
            Decision::Mismatch(m) => Err(Error::Mismatch(m)),
            Decision::Impossible { lost, reason } => Err(self.impossible(&lost, reason)),
            Decision::CommitCheckpoint { to } => Ok(if to.contains(&me) { Round::Committed } else { Round::Continue }),
            Decision::ServeResult { point: (_, seq), server, to } => {
                let mut payload = Vec::new();
                if me == server {
                    let r = self.rs();
                    let stored = r.results.get(seq).ok_or_else(|| {
                        Error::Protocol(format!(
                            "rank {me} was chosen to serve the result of call #{seq} but does not hold it"
                        ))
                    })?;
                    payload.extend_from_slice(&stored.header.encode());
                    payload.extend_from_slice(&stored.data);
                }
                self.serve(server, &mut payload)?;
                let data = checked_payload(payload, server, &props, &to, &format!("call #{seq}"))?;
                Ok(if to.contains(&me) { Round::Served(data) } else { Round::Continue })
            }
            Decision::LookupBootstrap { keys } => {
                let mut mask = 0u64;
                for (i, k) in keys.iter().enumerate() {
                    if self.rs().boot.get(*k).is_some() {
                        mask |= 1 << i;
                    }
                }
                let holds: Vec<u64> = self.gather::<1>([mask])?.into_iter().map(|h| h[0]).collect();
                match decide_bootstrap(&props, &keys, &holds) {
                    BootstrapDecision::Execute => Ok(Round::Execute),
                    BootstrapDecision::Impossible { lost, reason } => Err(self.impossible(&lost, reason)),
                    BootstrapDecision::Serve { key: k, server, to } => {
                        let mut payload = Vec::new();
                        if me == server {
                            let (_, h, d) = self.rs().boot.get(k).expect("the server holds the key");
                            payload.extend_from_slice(&h.encode());
                            payload.extend_from_slice(d);
                        }
                        self.serve(server, &mut payload)?;
                        let data = checked_payload(payload, server, &props, &to, &format!("bootstrap key {k:#x}"))?;
                        Ok(if to.contains(&me) { Round::Served(data) } else { Round::Continue })
                    }
                }
            }
            Decision::ServeCheckpoint { server, version, to } => {
                if let Some(server) = server {
                    // The global model, preceded by every worker's local model size.
                    let mut payload = Vec::new();
                    if me == server {
                        let r = self.rs();
                        r.local_sizes.iter().for_each(|s| payload.extend_from_slice(&s.to_le_bytes()));
                        payload.extend_from_slice(&r.global);
                    }
                    self.serve(server, &mut payload)?;
                    let world = self.topo.world;
                    if payload.len() < 8 * world && !payload.is_empty() {
                        return Err(Error::Protocol("short checkpoint payload".into()));
                    }
                    let sizes: Vec<u64> = if payload.is_empty() {
                        vec![0; world]
                    } else {
                        payload[..8 * world]
                            .chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                            .collect()
                    };
                    let global = payload.get(8 * world..).unwrap_or_default().to_vec();
                    // Each loader's local model comes from the live worker nearest to it that
                    // holds a replica (every worker says which of the loaders' replicas it has).
                    let mut holds = 0u64;
                    for (i, r) in to.iter().enumerate().take(64) {
                        // Only replicas of the version being served (safety net: pending
                        // checkpoints are committed before loaders are served).
                        if !to.contains(&me) && self.rs().version == version && self.rs().replicas.contains_key(r) {
                            holds |= 1 << i;
                        }
                    }
                    let holds: Vec<u64> = self.gather::<1>([holds])?.into_iter().map(|h| h[0]).collect();
                    let mut my_local = None;
                    for (i, &r) in to.iter().enumerate() {
                        if sizes.get(r).copied().unwrap_or(0) == 0 {
                            continue;
                        }
                        let holders = (0..world).filter(|&h| i < 64 && holds[h] >> i & 1 == 1);
                        let Some(holder) = holders.min_by_key(|&h| (crate::topology::tree_distance(h, r), h)) else {
                            let replicas = self.placement.holders(Placed::LocalModel(r));
                            let reason = format!(
                                "no live worker holds the local model of rank {r} (replicated on ranks {replicas:?} at \
                                 the last checkpoint; raise WARREN_LOCAL_REPLICAS to survive more simultaneous losses)"
                            );
                            let lost: Vec<usize> = std::iter::once(r).chain(replicas).collect();
                            return Err(self.impossible(&lost, reason));
                        };
                        let mut replica = if me == holder { self.rs().replicas[&r].clone() } else { Vec::new() };
                        self.serve(holder, &mut replica)?;
                        if r == me {
                            my_local = Some(replica);
                        }
                    }
                    // Each loader also gets back the replicas it keeps for its predecessors, from
                    // their owners, so that replication is whole again.
                    let mut my_replicas = Replicas::new();
                    for &r in &to {
                        for owner in self.placement.local_models_kept_by(r) {
                            if to.contains(&owner) || sizes.get(owner).copied().unwrap_or(0) == 0 {
                                continue;
                            }
                            let mut local =
                                if me == owner { self.rs().local.clone().unwrap_or_default() } else { Vec::new() };
                            self.serve(owner, &mut local)?;
                            if r == me {
                                my_replicas.insert(owner, local);
                            }
                        }
                    }
                    if to.contains(&me) {
                        let rs = self.rs();
                        rs.version = version;
                        rs.seq = 0;
                        rs.results.clear();
                        rs.global = global;
                        rs.local = my_local;
                        rs.replicas = my_replicas;
                        rs.local_sizes = sizes;
                        info!("rank {me}: loaded checkpoint version {version} from rank {server}");
                        return Ok(Round::Loaded);
                    }
                    return Ok(Round::Continue);
                }
                Ok(if to.contains(&me) { Round::Loaded } else { Round::Continue })
            }
        }
    }

    /// The error of an impossible recovery, naming the task ids of the lost ranks.
    fn impossible(&self, lost: &[usize], reason: String) -> Error {
        Error::RecoveryImpossible { lost: self.view.tasks_of(lost), reason }
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
        self.close_links();
    }
}

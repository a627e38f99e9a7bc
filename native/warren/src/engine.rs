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

use log::{debug, info};

use crate::collective::{self, Net, Scratch};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::proto::{COUNT_UNKNOWN, CallHeader, CallKind, FromTracker, ToTracker};
use crate::reduce::{self, DataType, Element, Op};
use crate::topology::Topology;
use crate::tracker::TrackerClient;
use crate::transport::{Link, PeerListener, Waiter, connect_peers};

/// Latency statistics of the calls made on a communicator.
mod stats;
pub use stats::CallStats;

/// One worker's membership in a job.
pub struct Communicator {
    cfg: Config,
    topo: Topology,
    links: Vec<Option<Link>>,
    waiter: Waiter,
    tracker: Option<TrackerClient>,
    seq: u64,
    failed: Option<String>,
    scratch: Scratch,
    stats: CallStats,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.topo.rank)
            .field("world", &self.topo.world)
            .field("seq", &self.seq)
            .finish()
    }
}

impl Communicator {
    /// Joins the job described by `cfg`: registers with the tracker (none for a world of
    /// one), gets a rank, and links to the neighbours in the tree and the ring.
    pub fn init(cfg: Config) -> Result<Communicator> {
        cfg.validate()?;
        let waiter = Waiter::new(cfg.spin)?;
        let Some(uri) = cfg.tracker_uri.clone() else {
            return Ok(Communicator {
                topo: Topology::new(0, 1),
                links: vec![None],
                waiter,
                tracker: None,
                seq: 0,
                failed: None,
                scratch: Scratch::default(),
                stats: CallStats::default(),
                cfg,
            });
        };
        let deadline = Instant::now() + cfg.connect_timeout;
        let mut tracker = TrackerClient::connect(&uri, cfg.secret.as_bytes(), deadline)?;
        let host = match &cfg.host {
            Some(h) => h.clone(),
            None => tracker.local_ip()?.to_string(),
        };
        let listener = PeerListener::bind(&host)?;
        let reply = tracker.request(
            &ToTracker::Register {
                task_id: cfg.task_id.clone(),
                host: host.clone(),
                port: listener.port,
                attempt: cfg.attempt,
            },
            deadline,
        )?;
        let FromTracker::Assignment {
            rank,
            world,
            peers,
            epoch,
            recovered,
        } = reply
        else {
            return Err(Error::Protocol(format!(
                "tracker answered registration with {reply:?}"
            )));
        };
        if world != cfg.num_workers {
            return Err(Error::Config(format!(
                "{} is {} but the tracker runs a job of {world} workers",
                crate::config::keys::NUM_WORKERS,
                cfg.num_workers
            )));
        }
        if recovered {
            info!(
                "task {} re-joined as rank {rank} (epoch {epoch}); recovery is not enabled in this mode",
                cfg.task_id
            );
        }
        let topo = Topology::new(rank, world);
        let neighbours = topo.neighbours();
        let linked = connect_peers(
            &listener,
            rank,
            &peers,
            &neighbours,
            cfg.secret.as_bytes(),
            deadline,
            cfg.socket_buffer,
        )?;
        let mut links: Vec<Option<Link>> = (0..world).map(|_| None).collect();
        for mut l in linked {
            waiter.register(&mut l)?;
            let p = l.peer;
            links[p] = Some(l);
        }
        debug!("rank {rank}/{world}: linked to {neighbours:?}");
        Ok(Communicator {
            cfg,
            topo,
            links,
            waiter,
            tracker: Some(tracker),
            seq: 0,
            failed: None,
            scratch: Scratch::default(),
            stats: CallStats::default(),
        })
    }

    /// This worker's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.topo.rank
    }

    /// Number of workers.
    pub fn world_size(&self) -> usize {
        self.topo.world
    }

    /// The settings this communicator was created with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Number of collective calls made so far.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Latency histograms of the calls made so far.
    pub fn stats(&self) -> &CallStats {
        &self.stats
    }

    /// Reduces `buf` element-wise across all workers with `op`; every worker ends with the
    /// same bits. Payloads of `ring_threshold` bytes or more use the ring algorithm.
    pub fn allreduce<T: Element>(&mut self, buf: &mut [T], op: Op) -> Result<()> {
        let reducer = reduce::typed_reducer::<T>(op)?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        self.allreduce_raw(bytes, T::DTYPE, op, T::DTYPE.size(), 0, &reducer)
    }

    /// Like [`Communicator::allreduce`] for a byte buffer whose element type is known at run
    /// time (the JVM and the benchmark use this). `buf` must be aligned to the element type.
    pub fn allreduce_dyn(&mut self, buf: &mut [u8], dtype: DataType, op: Op) -> Result<()> {
        if dtype == DataType::User || !op.supports(dtype) || op == Op::User {
            return Err(Error::InvalidArgument(format!(
                "operator {} is not defined for {}",
                op.name(),
                dtype.name()
            )));
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
        self.allreduce_raw(buf, dtype, op, size, 0, &reducer)
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
        self.allreduce_raw(buf, DataType::User, Op::User, elem_size, tag, &reducer)
    }

    fn allreduce_raw(
        &mut self,
        buf: &mut [u8],
        dtype: DataType,
        op: Op,
        elem: usize,
        tag: u32,
        reducer: &reduce::ByteReducer,
    ) -> Result<()> {
        let kind = if buf.len() >= self.cfg.ring_threshold && self.topo.world > 1 {
            CallKind::AllreduceRing
        } else {
            CallKind::AllreduceTree
        };
        let hdr = self.header(kind, dtype, op, elem, 0, buf.len() as u64, tag);
        self.run(hdr, |net, topo, scratch| match kind {
            CallKind::AllreduceRing => {
                collective::allreduce_ring(net, topo, hdr, buf, elem, reducer, scratch)
            }
            _ => {
                collective::allreduce_tree(net, topo, hdr, buf, elem, reducer, scratch).map(|_| ())
            }
        })
    }

    /// Broadcasts `data` from `root`: on return every worker's `data` equals the root's
    /// (other workers' vectors are resized to the root's length).
    pub fn broadcast(&mut self, data: &mut Vec<u8>, root: usize) -> Result<()> {
        self.check_root(root)?;
        let count = if self.topo.rank == root {
            data.len() as u64
        } else {
            COUNT_UNKNOWN
        };
        let hdr = self.header(
            CallKind::Broadcast,
            DataType::U8,
            Op::Sum,
            1,
            root,
            count,
            0,
        );
        self.run(hdr, |net, topo, scratch| {
            let agreed =
                collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            let len = usize::try_from(agreed.count)
                .map_err(|_| Error::Protocol("broadcast size overflows".into()))?;
            data.resize(len, 0);
            collective::broadcast_tree(net, topo, root, data, &hdr.describe())
        })
    }

    /// Broadcasts a fixed-size buffer from `root`; every worker must pass the same length.
    pub fn broadcast_slice(&mut self, data: &mut [u8], root: usize) -> Result<()> {
        self.check_root(root)?;
        let hdr = self.header(
            CallKind::Broadcast,
            DataType::U8,
            Op::Sum,
            1,
            root,
            data.len() as u64,
            0,
        );
        self.run(hdr, |net, topo, scratch| {
            collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            collective::broadcast_tree(net, topo, root, data, &hdr.describe())
        })
    }

    /// Gathers every worker's `mine` (sizes may differ) on every worker, in rank order.
    pub fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (flat, offsets) = self.allgather_flat(mine)?;
        Ok(offsets
            .windows(2)
            .map(|w| flat[w[0]..w[1]].to_vec())
            .collect())
    }

    /// Like [`Communicator::allgather`], returning one buffer and the `world + 1` offsets of
    /// the blocks in it.
    pub fn allgather_flat(&mut self, mine: &[u8]) -> Result<(Vec<u8>, Vec<usize>)> {
        let world = self.topo.world;
        let me = self.topo.rank;
        let hdr = self.header(
            CallKind::Allgather,
            DataType::U64,
            Op::Sum,
            8,
            0,
            (8 * world) as u64,
            0,
        );
        let mut out = Vec::new();
        let mut offsets = Vec::new();
        self.run(hdr, |net, topo, scratch| {
            let mut sizes = vec![0u64; world];
            sizes[me] = mine.len() as u64;
            let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
            collective::allreduce_tree(
                net,
                topo,
                hdr,
                bytemuck::cast_slice_mut(&mut sizes),
                8,
                &reducer,
                scratch,
            )?;
            offsets.push(0usize);
            for s in &sizes {
                let s = usize::try_from(*s)
                    .map_err(|_| Error::Protocol("allgather size overflows".into()))?;
                offsets.push(offsets.last().unwrap() + s);
            }
            out = vec![0u8; *offsets.last().unwrap()];
            out[offsets[me]..offsets[me + 1]].copy_from_slice(mine);
            let blocks: Vec<std::ops::Range<usize>> =
                offsets.windows(2).map(|w| w[0]..w[1]).collect();
            collective::allgather_ring(net, topo, &mut out, &blocks, scratch, &hdr.describe())
        })?;
        Ok((out, offsets))
    }

    /// Returns once every worker has called `barrier`.
    pub fn barrier(&mut self) -> Result<()> {
        let hdr = self.header(CallKind::Barrier, DataType::U8, Op::Sum, 1, 0, 0, 0);
        self.run(hdr, |net, topo, scratch| {
            collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch).map(|_| ())
        })
    }

    /// Writes `msg` to the tracker's log, prefixed with this worker's rank (to the local log
    /// for a world of one).
    pub fn print(&mut self, msg: &str) -> Result<()> {
        match self.tracker.as_mut() {
            Some(t) => {
                let deadline =
                    Instant::now() + self.cfg.connect_timeout.min(Duration::from_secs(30));
                t.request(
                    &ToTracker::Print {
                        msg: msg.to_string(),
                    },
                    deadline,
                )
                .map(|_| ())
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
    ) -> CallHeader {
        CallHeader {
            seq: self.seq,
            kind,
            dtype,
            op,
            elem_size: elem as u16,
            root: root as u32,
            count,
            tag,
        }
    }

    /// Runs one call: refuses if an earlier call failed, applies the deadline, records the
    /// latency, and on failure closes the links so peers learn at once.
    fn run(
        &mut self,
        hdr: CallHeader,
        body: impl FnOnce(&mut Net, &Topology, &mut Scratch) -> Result<()>,
    ) -> Result<()> {
        if let Some(first) = &self.failed {
            return Err(Error::Aborted {
                rank: self.topo.rank,
                reason: format!("communicator unusable after an earlier failure: {first}"),
            });
        }
        let started = Instant::now();
        let mut net = Net {
            me: self.topo.rank,
            links: &mut self.links,
            waiter: &mut self.waiter,
            started,
            deadline: started + self.cfg.timeout,
        };
        let result = body(&mut net, &self.topo, &mut self.scratch);
        self.seq += 1;
        match result {
            Ok(()) => {
                self.stats.record(hdr.kind, started.elapsed());
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                if !matches!(e, Error::Mismatch(_) | Error::Aborted { .. }) {
                    self.close_links();
                }
                Err(e)
            }
        }
    }

    fn close_links(&mut self) {
        for l in self.links.iter_mut().flatten() {
            self.waiter.deregister(l);
            l.close();
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.close_links();
    }
}

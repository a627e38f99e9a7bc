//! The collectives: each one a call header and an algorithm over the links, run plainly (a
//! lost peer fails the call) or robustly (see `robust_call`).

use std::time::{Duration, Instant};

use log::info;

use super::buffers::LentInput;
use super::recovery::Round;
use super::robust_call::Exec;
use super::{BroadcastBuf, CallBuf, CallOptions, Communicator, LOG, Lent, recoverable};
use crate::collective::header::{CallHeader, CallKind};
use crate::collective::{self, Input, Net, Progress, Scratch};
use crate::config::ReductionOrder;
use crate::error::{Error, Result};
use crate::mock::Point as MockPoint;
use crate::reduce::{self, DataType, Element, Op};
use crate::robust::{BootstrapKey, Want};
use crate::topology::Topology;
use crate::tracker::proto::ToTracker;

impl Communicator {
    /// Reduces `buf` element-wise across all workers with `op`; every worker ends with the
    /// same bits. Payloads of `ring_threshold` bytes or more use the ring algorithm, or, under
    /// the hosts reduction order ([`crate::config::ReductionOrder`]) when several hosts run
    /// several workers each, the hierarchy of hosts (its fixed order is documented in
    /// `collective/allreduce_hier.rs`); smaller ones a tree (flat in a world of 4: rank 0
    /// reduces `x0 op x1 op x2 op x3`, see [`Topology::call_tree`]). Under the ranks order
    /// (the default) the bits depend on the ranks alone, not on where they run.
    /// If the call fails, `buf` holds unspecified values (a robust ring allreduce writes its
    /// result into `buf` as it goes, and resumes from there when it is retried).
    pub fn allreduce<T: Element>(&mut self, buf: &mut [T], op: Op) -> Result<()> {
        self.allreduce_with(buf, op, &CallOptions::new())
    }

    /// [`Communicator::allreduce`] with call options: a bootstrap call
    /// (`&CallOptions::new().bootstrap()`), a tag every rank must pass alike.
    pub fn allreduce_with<T: Element>(&mut self, buf: &mut [T], op: Op, opts: &CallOptions) -> Result<()> {
        let reducer = reduce::typed_reducer::<T>(op)?;
        let key = self.key_for(opts);
        let bytes = bytemuck::cast_slice_mut(buf);
        self.allreduce_raw(Dest::InPlace(bytes), T::DTYPE, op, T::DTYPE.size(), opts.tag_value(), &reducer, key)
    }

    /// Reduces `input` element-wise across all workers with `op`, as
    /// [`Communicator::allreduce`] does (the same algorithms, the same bits), but out of place:
    /// `input` is left as it was and the result is lent, read-only (see [`Lent`]). In robust
    /// mode this writes the result once, into the buffer every worker keeps to serve a
    /// restarted worker, where an in-place call also copies it into the caller's buffer; in
    /// plain mode the result buffers are reused once their `Lent`s are dropped.
    pub fn allreduce_lent<T: Element>(&mut self, input: &[T], op: Op) -> Result<Lent<T>> {
        self.allreduce_lent_with(input, op, &CallOptions::new())
    }

    /// [`Communicator::allreduce_lent`] with call options: a tag every rank must pass alike.
    /// A lent call cannot be a bootstrap call (its result is kept under its key, whole, by
    /// [`Communicator::allreduce_with`]).
    pub fn allreduce_lent_with<T: Element>(&mut self, input: &[T], op: Op, opts: &CallOptions) -> Result<Lent<T>> {
        if opts.is_bootstrap() {
            return Err(Error::InvalidArgument(
                "a lent allreduce cannot be a bootstrap call: use allreduce_with".into(),
            ));
        }
        let reducer = reduce::typed_reducer::<T>(op)?;
        let mut lent = None;
        let dest = Dest::Lent { input: bytemuck::cast_slice(input), out: &mut lent };
        self.allreduce_raw(dest, T::DTYPE, op, T::DTYPE.size(), opts.tag_value(), &reducer, None)?;
        Ok(Lent::new(lent.expect("a call that succeeded lends its result")))
    }

    /// Like [`Communicator::allreduce_with`] for a byte buffer whose element type `dtype` is
    /// known at run time (the JVM binding and the benchmark use this). `buf` must be aligned
    /// to the element type and hold whole elements of it.
    pub fn allreduce_bytes(&mut self, buf: &mut [u8], dtype: DataType, op: Op, opts: &CallOptions) -> Result<()> {
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
        let key = self.key_for(opts);
        self.allreduce_raw(Dest::InPlace(buf), dtype, op, size, opts.tag_value(), &reducer, key)
    }

    /// Allreduce with a user reducer over raw bytes: `reducer(acc, other)` combines `other`
    /// into `acc`; both hold whole elements of `elem_size` bytes. It must be deterministic.
    /// Give the reducer an identity in the options' tag (`CallOptions::new().tag(42)`): ranks
    /// calling with different tags get a mismatch error instead of mixing two reducers.
    pub fn allreduce_custom(
        &mut self,
        buf: &mut [u8],
        elem_size: usize,
        opts: &CallOptions,
        reducer: impl Fn(&mut [u8], &[u8]),
    ) -> Result<()> {
        if elem_size == 0 || elem_size > u16::MAX as usize || buf.len() % elem_size != 0 {
            return Err(Error::InvalidArgument(format!(
                "buffer of {} bytes is not a whole number of {elem_size}-byte elements",
                buf.len()
            )));
        }
        let key = self.key_for(opts);
        self.allreduce_raw(Dest::InPlace(buf), DataType::User, Op::User, elem_size, opts.tag_value(), &reducer, key)
    }

    #[allow(clippy::too_many_arguments)]
    fn allreduce_raw(
        &mut self,
        dest: Dest<'_>,
        dtype: DataType,
        op: Op,
        elem: usize,
        tag: u32,
        reducer: &reduce::ByteReducer,
        key: Option<BootstrapKey>,
    ) -> Result<()> {
        let len = match &dest {
            Dest::InPlace(buf) => buf.len(),
            Dest::Lent { input, .. } => input.len(),
        };
        // The only choice the host layout enters: the hierarchy, under the hosts order alone
        // (`self.hosts` is `None` under the ranks order). The threshold, the tree and the ring
        // are fixed by the ranks and the settings.
        let large = len >= self.cfg.ring_threshold && self.topo.world > 1;
        let order = self.cfg.reduction_order;
        let hosts = if large && order == ReductionOrder::Hosts { self.hosts.clone() } else { None };
        let kind = match (large, &hosts) {
            (true, Some(_)) => CallKind::AllreduceHier,
            (true, None) => CallKind::AllreduceRing,
            (false, _) => CallKind::AllreduceTree,
        };
        // A large call's header carries its slice and reduction order in the root field, so
        // every rank checks them.
        let root = if kind == CallKind::AllreduceTree {
            0
        } else {
            CallHeader::large_allreduce_root(self.cfg.ring_slice, order)
        };
        let hdr = self.header(kind, dtype, op, elem, root, len as u64, tag, key.as_ref());
        // `input`: where the input is when it is not in `data` (a robust call keeps it intact,
        // or, in a ring, writes final values back over it and resumes from them).
        let algorithm =
            |net: &mut Net, topo: &Topology, scratch: &mut Scratch, input: Input, data: &mut [u8]| match kind {
                CallKind::AllreduceRing => {
                    collective::allreduce_ring(net, topo, hdr, input, data, elem, reducer, scratch)
                }
                CallKind::AllreduceHier => {
                    let hosts = hosts.as_ref().expect("a hierarchical call has a host layout");
                    collective::allreduce_hier(net, topo, hosts, hdr, input.read(), data, elem, reducer, scratch)
                }
                _ => {
                    if let Some(input) = input.read() {
                        data.copy_from_slice(input);
                    }
                    collective::allreduce_tree(net, topo, hdr, data, elem, reducer, scratch).map(|_| ())
                }
            };
        let buf = match dest {
            Dest::InPlace(buf) => buf,
            Dest::Lent { input, out } => {
                if self.robust.is_none() {
                    let mut data = self.lent.take(len);
                    self.plain(hdr, |net, topo, scratch| {
                        algorithm(net, topo, scratch, Input::Separate(input), &mut data)
                    })?;
                    let data = std::sync::Arc::new(data);
                    self.lent.lent(&data);
                    *out = Some(data);
                    return Ok(());
                }
                let mut exec = |c: &mut Communicator, input: &[u8], data: &mut [u8]| {
                    c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, Input::Separate(input), data))
                };
                let mut caller = LentInput { input, served: None };
                let mut lent = None;
                self.robust_call_with(hdr, Want::Execute, None, &mut caller, Exec::Lent(&mut exec, &mut lent))?;
                *out = lent.or_else(|| caller.served.map(std::sync::Arc::new));
                return Ok(());
            }
        };
        if self.robust.is_none() {
            return self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, Input::InPlace, buf));
        }
        let want = if key.is_some() { Want::Bootstrap } else { Want::Execute };
        if kind == CallKind::AllreduceRing {
            // The result lands in the caller's buffer during the call (see `allreduce_ring`).
            let mut exec = |c: &mut Communicator, caller: &mut [u8], out: &mut [u8], done: &mut Progress| {
                let keep = key.is_some() || c.rs().state.keeps_next();
                let input = Input::WriteBack { caller, done, keep };
                c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, input, out))
            };
            return self.robust_call_with(hdr, want, key.as_ref(), buf, Exec::WriteBack(&mut exec)).map(|_| ());
        }
        let mut exec = |c: &mut Communicator, input: &[u8], out: &mut [u8]| {
            c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, Input::Separate(input), out))
        };
        self.robust_call_with(hdr, want, key.as_ref(), buf, Exec::OutOfPlace(&mut exec)).map(|_| ())
    }

    /// Broadcasts `data` from `root`: on return every worker's `data` equals the root's. A
    /// `Vec<u8>` is resized to the root's length (only the root needs to know it); a `[u8]`
    /// keeps its length, which must be the same on every worker.
    pub fn broadcast<B: BroadcastBuf + ?Sized>(&mut self, data: &mut B, root: usize) -> Result<()> {
        self.broadcast_with(data, root, &CallOptions::new())
    }

    /// [`Communicator::broadcast`] with call options (a bootstrap call, a tag).
    pub fn broadcast_with<B: BroadcastBuf + ?Sized>(
        &mut self,
        data: &mut B,
        root: usize,
        opts: &CallOptions,
    ) -> Result<()> {
        self.check_root(root)?;
        let key = self.key_for(opts);
        let count = data.declared_count(self.topo.rank == root);
        let hdr =
            self.header(CallKind::Broadcast, DataType::U8, Op::Sum, 1, root, count, opts.tag_value(), key.as_ref());
        let algorithm = |net: &mut Net, topo: &Topology, scratch: &mut Scratch, data: &mut B| {
            let agreed = collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            let len = usize::try_from(agreed.count).map_err(|_| Error::Protocol("broadcast size overflows".into()))?;
            collective::broadcast_tree(net, topo, root, data.fit(len)?, &hdr.describe())
        };
        self.call(hdr, key.as_ref(), data, algorithm)
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
        self.call(hdr, None, &mut packed, algorithm)?;
        let n = 8 * (world + 1);
        let offsets: Vec<usize> =
            packed[..n].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize).collect();
        Ok((packed.split_off(n), offsets))
    }

    /// Returns once every worker has called `barrier`.
    pub fn barrier(&mut self) -> Result<()> {
        self.rendezvous(CallKind::Barrier)
    }

    /// A barrier declared as `kind` ([`CallKind::Barrier`], or [`CallKind::Finalize`], so
    /// that a worker waiting in `finalize` while others call on is named as such): a tree
    /// pass with no data, on the tree every call opens with, where a mismatch with any other
    /// call is found at once.
    fn rendezvous(&mut self, kind: CallKind) -> Result<()> {
        let hdr = self.header(kind, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        self.call(hdr, None, &mut Vec::new(), |net, topo, scratch, _| {
            collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch).map(|_| ())
        })
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
                info!(target: LOG, "[rank 0] {msg}");
                Ok(())
            }
        }
    }

    /// Leaves the job: tells the tracker this worker finished cleanly and closes the links.
    /// A cancelled communicator does not finish: it leaves as lost (so that, in robust mode,
    /// a replacement may take over) and this returns [`Error::Aborted`].
    ///
    /// In robust mode a member first waits, in one last barrier, until every worker has
    /// reached `finalize`, serving as in any call a replacement of a worker lost meanwhile
    /// (its checkpoint and the results it replays): a worker that finished would take those
    /// with it. So `finalize` returns when the last worker reaches it (waiting at most
    /// `WARREN_TIMEOUT_S`, as any call does for a slower worker), and fails if a lost worker
    /// is not replaced in time.
    /// Past that barrier a member tells the tracker it finished and still lets go of nothing
    /// until the tracker says every member has: a worker lost after the barrier and before
    /// the tracker heard it finish is replaced like any other. Its replacement, re-running
    /// the user's code from the start, registers; the finished members re-link and serve it
    /// (the checkpoint, the results it replays, the final barrier's), then finish again, and
    /// the replacement finishes with the same results. That wait is bounded by
    /// `WARREN_CONNECT_TIMEOUT_S`, as a re-link's wait for a replacement is.
    /// A worker reaching `finalize` while the others make another call (a loop that ran
    /// fewer times on one rank) is a call mismatch, `finalize` against that call, which every
    /// rank reports at once (every call opens with a pass on the same tree).
    pub fn finalize(mut self) -> Result<()> {
        let member = self.robust.is_some() && self.failed.is_none() && !self.left && self.world_size() > 1;
        if member {
            self.cancel.check()?;
            self.maybe_mock(MockPoint::Finalize);
            self.rendezvous(CallKind::Finalize)?;
            // Served the barrier (a replacement, or a worker that was behind): the others
            // are past it, serving; serve with them until nobody needs anything.
            if self.rs().consensus {
                self.serve_the_replaced()?;
            }
            self.maybe_mock(MockPoint::Shutdown);
        } else {
            self.close_links();
            // No heartbeats once finished (the tracker expects none from a worker gone).
            self.heartbeat = None;
        }
        self.cancel.check()?;
        if self.tracker.is_none() {
            return Ok(());
        }
        loop {
            let deadline = Instant::now() + Duration::from_secs(30);
            let t = self.tracker.as_mut().expect("a tracker");
            let said = t.request(&ToTracker::Shutdown, deadline);
            if self.failed.is_some() {
                // A failed worker only says it is gone; the tracker may have ended the job
                // (and the connection) already, after an error that cannot succeed on retry.
                return Ok(());
            }
            said.map_err(|e| self.cancel.explain(e))?;
            if !member {
                return Ok(());
            }
            let deadline = Instant::now() + self.cfg.connect_timeout;
            let t = self.tracker.as_mut().expect("a tracker");
            if t.await_job_done(deadline).map_err(|e| self.cancel.explain(finishing(e)))? {
                self.close_links();
                self.heartbeat = None;
                return Ok(());
            }
            // A member lost before it finished is being replaced: serve its replacement.
            let cause = Error::Tracker("a member lost before it finished the job is being replaced".into());
            self.relink(&cause).map_err(|e| self.poison(e))?;
            self.serve_the_replaced()?;
        }
    }

    /// Serves, in recovery rounds ([`Want::Serve`]), what the replacement of a member lost
    /// after the final barrier needs (the checkpoint, the results it replays, the barrier's
    /// own), until nobody needs anything more; a loss meanwhile re-links, as in any call.
    fn serve_the_replaced(&mut self) -> Result<()> {
        let hdr = self.header(CallKind::Finalize, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        loop {
            match self.recovery_round(&hdr, Want::Serve, None) {
                Ok(Round::Released) => return Ok(()),
                Ok(_) => continue,
                Err(e) if recoverable(&e) => self.relink(&e).map_err(|e| self.poison(e))?,
                Err(e) => return Err(self.poison(e)),
            }
        }
    }

    /// Runs a call plainly, or robustly (retried after a re-link, served when replayed):
    /// `algorithm` over the caller's `buf`. `key` makes it a bootstrap call.
    fn call<B: CallBuf + ?Sized>(
        &mut self,
        hdr: CallHeader,
        key: Option<&BootstrapKey>,
        buf: &mut B,
        mut algorithm: impl FnMut(&mut Net, &Topology, &mut Scratch, &mut B) -> Result<()>,
    ) -> Result<()> {
        if self.robust.is_none() {
            return self.plain(hdr, |net, topo, scratch| algorithm(net, topo, scratch, buf));
        }
        let want = if key.is_some() { Want::Bootstrap } else { Want::Execute };
        self.robust_call(hdr, want, key, buf, &mut |c, b| {
            c.exec(hdr, |net, topo, scratch| algorithm(net, topo, scratch, b))
        })
        .map(|_| ())
    }
}

/// Where an allreduce's result goes.
enum Dest<'a> {
    /// Into the caller's buffer, which holds the input.
    InPlace(&'a mut [u8]),
    /// Into a buffer lent to the caller ([`Lent`]); the input is only read.
    Lent { input: &'a [u8], out: &'a mut Option<std::sync::Arc<Vec<u8>>> },
}

/// A finished member's wait for the job to be done that ran out: says what it waited for.
fn finishing(e: Error) -> Error {
    match e {
        Error::Timeout { what, after } => Error::Timeout {
            what: format!("every member to finish (finalize, after its final barrier): {what}"),
            after,
        },
        e => e,
    }
}

//! Tree allreduce, pipelined: data flows up the tree to rank 0, reduced on the way, and the
//! result flows back down, both as a stream so that large payloads overlap at every level.
//!
//! Each node reduces in a fixed order (its own data, then child 1, then child 2), whatever the
//! order of arrival, so results are the same bits on every run. Every rank ends with the
//! root's bytes, so results are the same bits on every rank.
//!
//! The call headers travel with the data: a node sends its header up only once its children's
//! headers agree with its own, and the root sends its header down only once the whole tree
//! agrees. A disagreement becomes an abort that reaches every rank; no rank can return
//! successfully because the root never sends data down.
//!
//! With an empty buffer this is the "agree" pass that checks a call before other algorithms.
//! Every pass runs on the worker's call tree ([`Topology::call_tree`]), whatever the call, so
//! that ranks making different calls meet on a link one of them reads.

use super::header::CallHeader;
use crate::error::{Error, Result};
use crate::reduce::ByteReducer;
use crate::topology::Topology;

use super::Scratch;
use super::net::{HeaderIn, HeaderOut, HeaderState, Net, declared};

struct Child {
    rank: usize,
    head_in: HeaderIn,
    recv: usize,
    head_out: HeaderOut,
    sent: usize,
}

/// Runs the tree allreduce of `buf` (elements of `elem` bytes) with `reducer`, on `topo`'s
/// call tree. Returns the header all ranks agreed on.
pub(crate) fn allreduce_tree(
    net: &mut Net,
    topo: &Topology,
    hdr: CallHeader,
    buf: &mut [u8],
    elem: usize,
    reducer: &ByteReducer,
    scratch: &mut Scratch,
) -> Result<CallHeader> {
    let mut call = TreeCall::new(&topo.call_tree(), hdr, buf.len(), elem, scratch);
    loop {
        let mut progressed = call.agree_children(net)?;
        if call.agreed.is_some() {
            progressed |= call.reduce_children(net, buf, reducer)?;
            progressed |= call.send_up(net, buf)?;
        }
        progressed |= call.receive_down(net, buf)?;
        progressed |= call.send_down(net, buf)?;
        if let Some(h) = call.done() {
            return Ok(h);
        }
        net.settle(progressed, || call.waiting_for())?;
    }
}

/// One tree allreduce in progress on this rank: each step moves what it can and says whether
/// anything moved.
struct TreeCall<'s> {
    me: usize,
    parent: Option<usize>,
    hdr: CallHeader,
    n: usize,
    elem: usize,
    children: Vec<Child>,
    child_bufs: Vec<&'s mut [u8]>,
    /// The subtree's agreed header, once every child's arrived.
    agreed: Option<CallHeader>,
    up_head: HeaderOut,
    up_sent: usize,
    down_head: Option<HeaderIn>,
    /// The whole tree's header: from the parent, or the agreed one at the root.
    final_hdr: Option<CallHeader>,
    down_recv: usize,
    reduced: usize,
    /// Parent and children: where an abort goes.
    everyone: Vec<usize>,
}

impl<'s> TreeCall<'s> {
    fn new(topo: &Topology, hdr: CallHeader, n: usize, elem: usize, scratch: &'s mut Scratch) -> TreeCall<'s> {
        let children: Vec<Child> = topo
            .children
            .iter()
            .map(|&c| Child { rank: c, head_in: HeaderIn::new(c), recv: 0, head_out: HeaderOut::new(), sent: 0 })
            .collect();
        TreeCall {
            me: topo.rank,
            parent: topo.parent,
            hdr,
            n,
            elem,
            child_bufs: scratch.get(children.len(), n),
            reduced: if children.is_empty() { n } else { 0 },
            children,
            agreed: None,
            up_head: HeaderOut::new(),
            up_sent: 0,
            down_head: topo.parent.map(HeaderIn::new),
            final_hdr: None,
            down_recv: 0,
            everyone: topo.parent.into_iter().chain(topo.children.iter().copied()).collect(),
        }
    }

    /// Children's headers, then agreement of the subtree (at the root: of the whole tree).
    fn agree_children(&mut self, net: &mut Net) -> Result<bool> {
        if self.agreed.is_some() {
            return Ok(false);
        }
        let mut progressed = false;
        let mut all = true;
        for c in self.children.iter_mut() {
            let (p, st) = c.head_in.poll(net)?;
            progressed |= p;
            match st {
                HeaderState::Pending => all = false,
                HeaderState::Proceed(_) => {}
                HeaderState::Abort(a) => return Err(net.forward_abort(&self.everyone, &a)),
            }
        }
        if !all {
            return Ok(progressed);
        }
        let mut merged = self.hdr;
        for c in &self.children {
            let theirs = c.head_in.header().expect("received");
            match merged.merge(&theirs, self.me, c.rank) {
                Ok(m) => merged = m,
                Err(_) => return Err(net.abort_mismatch(&self.everyone, declared(self.me, &merged, c.rank, &theirs))),
            }
        }
        self.agreed = Some(merged);
        if self.parent.is_some() {
            self.up_head.set(&merged);
        } else {
            self.decided(merged);
        }
        Ok(true)
    }

    /// The whole tree's header is known: it goes down to the children first.
    fn decided(&mut self, h: CallHeader) {
        self.final_hdr = Some(h);
        self.children.iter_mut().for_each(|c| c.head_out.set(&h));
    }

    /// Children's data, reduced in child order as soon as every child has it.
    fn reduce_children(&mut self, net: &mut Net, buf: &mut [u8], reducer: &ByteReducer) -> Result<bool> {
        let (n, mut progressed) = (self.n, false);
        for (c, cb) in self.children.iter_mut().zip(self.child_bufs.iter_mut()) {
            if c.recv < n {
                let got = net.link(c.rank)?.read_some(&mut cb[c.recv..n])?;
                c.recv += got;
                progressed |= got > 0;
            }
        }
        if !self.children.is_empty() {
            let ready = self.children.iter().map(|c| c.recv).min().unwrap_or(n);
            let ready = ready - ready % self.elem;
            if ready > self.reduced {
                for cb in self.child_bufs.iter() {
                    reducer(&mut buf[self.reduced..ready], &cb[self.reduced..ready]);
                }
                self.reduced = ready;
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// Up to the parent: the header, then what is reduced.
    fn send_up(&mut self, net: &mut Net, buf: &[u8]) -> Result<bool> {
        let Some(parent) = self.parent else { return Ok(false) };
        if self.up_head.done() && self.up_sent >= self.reduced {
            return Ok(false);
        }
        let (h, d) = match net.send2(parent, self.up_head.rest(), &buf[self.up_sent..self.reduced]) {
            Ok(sent) => sent,
            Err(lost) => return Err(self.abort_left_by_parent(net, lost)),
        };
        self.up_head.advance(h);
        self.up_sent += d;
        Ok(h + d > 0)
    }

    /// The parent was found gone while this rank wrote to it (`lost`). A parent that aborted
    /// the call (a mismatch) sent its abort down before it left, so the abort is already here
    /// to read, before the end of the link: then it is this rank's error (passed on to the
    /// children), not the loss, which would have this rank re-link and wait for a replacement
    /// that never comes.
    fn abort_left_by_parent(&mut self, net: &mut Net, lost: Error) -> Error {
        if let (None, Some(dh)) = (self.final_hdr, self.down_head.as_mut()) {
            loop {
                match dh.poll(net) {
                    Ok((_, HeaderState::Abort(a))) => return net.forward_abort(&self.children_ranks(), &a),
                    Ok((true, HeaderState::Pending)) => continue,
                    _ => break,
                }
            }
        }
        lost
    }

    /// The parent's verdict, then the result.
    fn receive_down(&mut self, net: &mut Net, buf: &mut [u8]) -> Result<bool> {
        let (Some(parent), Some(dh)) = (self.parent, self.down_head.as_mut()) else { return Ok(false) };
        let mut progressed = false;
        if self.final_hdr.is_none() {
            let (p, st) = dh.poll(net)?;
            progressed |= p;
            match st {
                HeaderState::Pending => {}
                HeaderState::Abort(a) => return Err(net.forward_abort(&self.children_ranks(), &a)),
                HeaderState::Proceed(h) => {
                    let mine = self.agreed.unwrap_or(self.hdr);
                    match mine.merge(&h, self.me, parent) {
                        Ok(h) => self.decided(h),
                        Err(_) => {
                            return Err(net.abort_mismatch(&self.everyone, declared(self.me, &mine, parent, &h)));
                        }
                    }
                }
            }
        }
        if self.final_hdr.is_some() && self.down_recv < self.up_sent {
            let got = net.link(parent)?.read_some(&mut buf[self.down_recv..self.up_sent])?;
            self.down_recv += got;
            progressed |= got > 0;
        }
        Ok(progressed)
    }

    /// Down to the children: the header, then the result as far as it is known.
    fn send_down(&mut self, net: &mut Net, buf: &[u8]) -> Result<bool> {
        let result_upto = if self.parent.is_some() { self.down_recv } else { self.reduced };
        let mut progressed = false;
        for c in self.children.iter_mut() {
            if c.head_out.is_set() && (!c.head_out.done() || c.sent < result_upto) {
                let (h, d) = net.send2(c.rank, c.head_out.rest(), &buf[c.sent..result_upto])?;
                c.head_out.advance(h);
                c.sent += d;
                progressed |= h + d > 0;
            }
        }
        Ok(progressed)
    }

    fn children_ranks(&self) -> Vec<usize> {
        self.children.iter().map(|c| c.rank).collect()
    }

    /// The agreed header, once everything has moved.
    fn done(&self) -> Option<CallHeader> {
        let n = self.n;
        let up_done = self.parent.is_none() || (self.up_head.done() && self.up_sent == n && self.down_recv == n);
        let down_done = self.children.iter().all(|c| c.head_out.done() && c.sent == n);
        (self.reduced == n && up_done && down_done).then_some(self.final_hdr).flatten()
    }

    /// What this rank waits for, for a timeout's message.
    fn waiting_for(&self) -> String {
        let mut waiting = Vec::new();
        for c in &self.children {
            if c.head_in.header().is_none() || c.recv < self.n {
                waiting.push(format!("child rank {}", c.rank));
            }
        }
        if let Some(p) = self.parent {
            waiting.push(format!("parent rank {p}"));
        }
        format!("{} on rank {}: {}", self.hdr.describe(), self.me, waiting.join(", "))
    }
}

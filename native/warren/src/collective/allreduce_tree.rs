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

use crate::error::Result;
use crate::proto::CallHeader;
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

/// Runs the tree allreduce of `buf` (elements of `elem` bytes) with `reducer`. Returns the
/// header all ranks agreed on.
pub(crate) fn allreduce_tree(
    net: &mut Net,
    topo: &Topology,
    hdr: CallHeader,
    buf: &mut [u8],
    elem: usize,
    reducer: &ByteReducer,
    scratch: &mut Scratch,
) -> Result<CallHeader> {
    let n = buf.len();
    let me = topo.rank;
    let mut children: Vec<Child> = topo
        .children
        .iter()
        .map(|&c| Child { rank: c, head_in: HeaderIn::new(c), recv: 0, head_out: HeaderOut::new(), sent: 0 })
        .collect();
    let mut child_bufs = scratch.get(children.len(), n);
    let mut agreed: Option<CallHeader> = None;
    let mut up_head = HeaderOut::new();
    let mut up_sent = 0usize;
    let mut down_head = topo.parent.map(HeaderIn::new);
    let mut final_hdr: Option<CallHeader> = None;
    let mut down_recv = 0usize;
    let mut reduced = if children.is_empty() { n } else { 0 };
    let everyone: Vec<usize> = topo.parent.into_iter().chain(topo.children.iter().copied()).collect();
    let child_ranks: Vec<usize> = topo.children.clone();

    loop {
        let mut progressed = false;

        // Children's headers, then agreement of the subtree.
        if agreed.is_none() {
            let mut all = true;
            for c in children.iter_mut() {
                let (p, st) = c.head_in.poll(net)?;
                progressed |= p;
                match st {
                    HeaderState::Pending => all = false,
                    HeaderState::Proceed(_) => {}
                    HeaderState::Abort(a) => return Err(net.forward_abort(&everyone, &a)),
                }
            }
            if all {
                let mut merged = hdr;
                for c in &children {
                    let theirs = c.head_in.header().expect("received");
                    match merged.merge(&theirs, me, c.rank) {
                        Ok(m) => merged = m,
                        Err(_) => return Err(net.abort_mismatch(&everyone, declared(me, &merged, c.rank, &theirs))),
                    }
                }
                agreed = Some(merged);
                if topo.parent.is_some() {
                    up_head.set(&merged);
                } else {
                    final_hdr = Some(merged);
                    children.iter_mut().for_each(|c| c.head_out.set(&merged));
                }
                progressed = true;
            }
        }

        if agreed.is_some() {
            // Children's data, reduced in child order as soon as every child has it.
            for (c, cb) in children.iter_mut().zip(child_bufs.iter_mut()) {
                if c.recv < n {
                    let got = net.link(c.rank)?.read_some(&mut cb[c.recv..n])?;
                    c.recv += got;
                    progressed |= got > 0;
                }
            }
            if !children.is_empty() {
                let ready = children.iter().map(|c| c.recv).min().unwrap_or(n);
                let ready = ready - ready % elem;
                if ready > reduced {
                    for cb in child_bufs.iter() {
                        reducer(&mut buf[reduced..ready], &cb[reduced..ready]);
                    }
                    reduced = ready;
                    progressed = true;
                }
            }
            // Up to the parent: header, then what is reduced.
            if let Some(parent) = topo.parent {
                if !up_head.done() || up_sent < reduced {
                    let (h, d) = net.send2(parent, up_head.rest(), &buf[up_sent..reduced])?;
                    up_head.advance(h);
                    up_sent += d;
                    progressed |= h + d > 0;
                }
            }
        }

        // The parent's verdict, then the result.
        if let (Some(parent), Some(dh)) = (topo.parent, down_head.as_mut()) {
            if final_hdr.is_none() {
                let (p, st) = dh.poll(net)?;
                progressed |= p;
                match st {
                    HeaderState::Pending => {}
                    HeaderState::Abort(a) => return Err(net.forward_abort(&child_ranks, &a)),
                    HeaderState::Proceed(h) => {
                        let mine = agreed.unwrap_or(hdr);
                        let h = match mine.merge(&h, me, parent) {
                            Ok(h) => h,
                            Err(_) => return Err(net.abort_mismatch(&everyone, declared(me, &mine, parent, &h))),
                        };
                        final_hdr = Some(h);
                        children.iter_mut().for_each(|c| c.head_out.set(&h));
                    }
                }
            }
            if final_hdr.is_some() && down_recv < up_sent {
                let got = net.link(parent)?.read_some(&mut buf[down_recv..up_sent])?;
                down_recv += got;
                progressed |= got > 0;
            }
        }

        // Down to the children: header, then the result as far as it is known.
        let result_upto = if topo.parent.is_some() { down_recv } else { reduced };
        for c in children.iter_mut() {
            if c.head_out.is_set() && (!c.head_out.done() || c.sent < result_upto) {
                let (h, d) = net.send2(c.rank, c.head_out.rest(), &buf[c.sent..result_upto])?;
                c.head_out.advance(h);
                c.sent += d;
                progressed |= h + d > 0;
            }
        }

        let done = final_hdr.is_some()
            && reduced == n
            && (topo.parent.is_none() || (up_head.done() && up_sent == n && down_recv == n))
            && children.iter().all(|c| c.head_out.done() && c.sent == n);
        if done {
            return Ok(final_hdr.expect("set when done"));
        }
        net.settle(progressed, || {
            let mut waiting = Vec::new();
            for c in &children {
                if c.head_in.header().is_none() || c.recv < n {
                    waiting.push(format!("child rank {}", c.rank));
                }
            }
            if let Some(p) = topo.parent {
                waiting.push(format!("parent rank {p}"));
            }
            format!("{} on rank {me}: {}", hdr.describe(), waiting.join(", "))
        })?;
    }
}

//! Collective algorithms over a set of links; no fault tolerance here.
//!
//! Every algorithm is a loop over non-blocking reads and writes that moves whatever can move,
//! then waits (spin, then block) only when nothing could. Sends and receives on all links
//! overlap, and reductions run as soon as whole elements have arrived.
//!
//! Every call starts with a tree pass that checks that all ranks declared the same call
//! ([`header::CallHeader`]): a mismatch found anywhere is turned into an abort that
//! reaches every rank before any rank returns, so all of them report it. Every tree pass
//! runs on one tree ([`Topology::call_tree`](crate::topology::Topology::call_tree)), so
//! ranks making different calls always meet.

mod allgather_ring;
mod allreduce_hier;
mod allreduce_ring;
mod allreduce_tree;
mod broadcast_tree;
pub mod header;
mod net;
mod ring;
mod stream_copy;

pub(crate) use allgather_ring::{allgather_ring, ring_shift};
pub(crate) use allreduce_hier::allreduce_hier;
pub(crate) use allreduce_ring::allreduce_ring;
pub(crate) use allreduce_tree::allreduce_tree;
pub(crate) use broadcast_tree::{broadcast_tree, broadcast_tree_to};
pub(crate) use net::Net;
pub(crate) use ring::{Input, Progress};

/// Element-aligned scratch memory reused across calls.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    bufs: Vec<Vec<u64>>,
}

impl Scratch {
    /// `count` aligned byte buffers of at least `len` bytes each.
    pub(crate) fn get(&mut self, count: usize, len: usize) -> Vec<&mut [u8]> {
        let words = len.div_ceil(8);
        while self.bufs.len() < count {
            self.bufs.push(Vec::new());
        }
        self.bufs
            .iter_mut()
            .take(count)
            .map(|b| {
                if b.len() < words {
                    b.resize(words, 0);
                }
                &mut bytemuck::cast_slice_mut::<u64, u8>(b)[..len]
            })
            .collect()
    }
}

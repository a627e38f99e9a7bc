//! Ring allgather of blocks of different sizes: block `b` goes around the ring from rank `b`,
//! each rank forwarding what it received in the previous step.

use std::ops::Range;

use crate::error::Result;
use crate::topology::Topology;

use super::ring::{Input, Step, ring_pipeline};
use super::{Net, Scratch};

/// Fills `out` (every rank's block, in rank order, at `blocks[rank]`); this rank's own block
/// must already be in place.
pub(crate) fn allgather_ring(
    net: &mut Net,
    topo: &Topology,
    out: &mut [u8],
    blocks: &[Range<usize>],
    scratch: &mut Scratch,
    what: &str,
) -> Result<()> {
    let w = topo.world;
    if w == 1 {
        return Ok(());
    }
    let r = topo.rank;
    let steps: Vec<Step> = (0..w - 1)
        .map(|s| Step {
            send: blocks[(r + w - s) % w].clone(),
            recv: blocks[(r + 2 * w - s - 1) % w].clone(),
            reduce: false,
            send_input: false,
            fin: None,
        })
        .collect();
    ring_pipeline(net, topo.ring_prev, topo.ring_next, Input::InPlace, out, &steps, 1, None, scratch, what)
}

/// Sends `mine` to the successor and returns the predecessor's block, whose length `prev_len`
/// the caller learned beforehand, in a ring given by this rank's `(predecessor, successor)`
/// (not necessarily the collective ring: a checkpoint's replica ring).
pub(crate) fn ring_shift(
    net: &mut Net,
    (prev, next): (usize, usize),
    mine: &[u8],
    prev_len: usize,
    scratch: &mut Scratch,
    what: &str,
) -> Result<Vec<u8>> {
    if prev == net.me {
        return Ok(mine.to_vec());
    }
    let mut buf = mine.to_vec();
    buf.resize(mine.len() + prev_len, 0);
    let steps = [Step {
        send: 0..mine.len(),
        recv: mine.len()..mine.len() + prev_len,
        reduce: false,
        send_input: false,
        fin: None,
    }];
    ring_pipeline(net, prev, next, Input::InPlace, &mut buf, &steps, 1, None, scratch, what)?;
    Ok(buf.split_off(mine.len()))
}

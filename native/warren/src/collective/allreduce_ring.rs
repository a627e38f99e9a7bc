//! Ring allreduce: reduce-scatter then allgather over `world` chunks. Each chunk is reduced
//! along a fixed chain of ranks (deterministic), then the owner's result is copied to everyone
//! (identical on every rank). Moves `2 (world-1)/world` of the payload per rank: bandwidth-
//! optimal for large payloads.

use super::header::CallHeader;
use crate::error::Result;
use crate::reduce::ByteReducer;
use crate::topology::{Topology, chunk_offsets};

use super::ring::{Step, ring_pipeline};
use super::{Net, Scratch, allreduce_tree};

/// Runs the ring allreduce of `buf`, after a tree pass that checks the call header. With
/// `input`, the input is read from there (left intact) and `buf` receives the result: the same
/// bits as in place.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce_ring(
    net: &mut Net,
    topo: &Topology,
    hdr: CallHeader,
    input: Option<&[u8]>,
    buf: &mut [u8],
    elem: usize,
    reducer: &ByteReducer,
    scratch: &mut Scratch,
) -> Result<()> {
    allreduce_tree(net, topo, hdr, &mut [], 1, reducer, scratch)?;
    let w = topo.world;
    if w == 1 || buf.is_empty() {
        if let Some(input) = input {
            buf.copy_from_slice(input);
        }
        return Ok(());
    }
    let steps = ring_steps(topo.rank, w, &chunk_offsets(buf.len(), w, elem));
    ring_pipeline(
        net,
        topo.ring_prev,
        topo.ring_next,
        input,
        buf,
        &steps,
        elem,
        Some(reducer),
        scratch,
        &hdr.describe(),
    )
}

/// The steps of rank `r`'s ring allreduce in a ring of `w` over the chunks at `offs`
/// (`w + 1` offsets): `w - 1` reduce-scatter steps, then `w - 1` allgather steps.
pub(crate) fn ring_steps(r: usize, w: usize, offs: &[usize]) -> Vec<Step> {
    let chunk = |i: usize| offs[i % w]..offs[i % w + 1];
    let mut steps = Vec::with_capacity(2 * (w - 1));
    for s in 0..w - 1 {
        steps.push(Step { send: chunk(r + w - s), recv: chunk(r + 2 * w - s - 1), reduce: true, send_input: s == 0 });
    }
    for j in 0..w - 1 {
        steps.push(Step { send: chunk(r + 1 + w - j), recv: chunk(r + w - j), reduce: false, send_input: false });
    }
    steps
}

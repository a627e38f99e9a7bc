//! Ring allreduce: reduce-scatter then allgather over `world` chunks. Each chunk is reduced
//! along a fixed chain of ranks (deterministic), then the owner's result is copied to everyone
//! (identical on every rank). Moves `2 (world-1)/world` of the payload per rank: bandwidth-
//! optimal for large payloads.
//!
//! Resuming ([`Input::WriteBack`]): an attempt that failed part-way may have overwritten part
//! of a rank's input with final values, a prefix of each chunk ([`Progress`]). The retry's
//! header pass also agrees, per chunk, on the longest such prefix on any rank and who holds
//! it; that rank broadcasts it, and the ring runs over the rest of each chunk, whose input
//! every rank still holds. Each element is still reduced along its chunk's chain, so the
//! result has the same bits as an attempt that never failed.

use std::ops::Range;

use super::header::CallHeader;
use crate::error::{Error, Result};
use crate::reduce::{self, ByteReducer, Op};
use crate::topology::{Topology, chunk_offsets};

use super::ring::{Input, Progress, Step, ring_pipeline};
use super::{Net, Scratch, allreduce_tree, broadcast_tree};

/// Bits of a resume mark that hold the rank (the rest: the prefix length).
const RANK_BITS: u32 = 20;

/// Runs the ring allreduce of `buf`, after a tree pass that checks the call header. Out of
/// place (`input` separate or written back), `buf` receives the result: the same bits as in
/// place.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce_ring(
    net: &mut Net,
    topo: &Topology,
    hdr: CallHeader,
    mut input: Input,
    buf: &mut [u8],
    elem: usize,
    reducer: &ByteReducer,
    scratch: &mut Scratch,
) -> Result<()> {
    let w = topo.world;
    let offs = chunk_offsets(buf.len(), w, elem);
    let from = match &mut input {
        Input::WriteBack { caller, done, .. } => resume(net, topo, hdr, caller, buf, done, &offs, scratch)?,
        _ => {
            allreduce_tree(net, topo, hdr, &mut [], 1, reducer, scratch)?;
            offs[..w].to_vec()
        }
    };
    if w == 1 || buf.is_empty() {
        if let Some(input) = input.read() {
            buf.copy_from_slice(input);
        }
        return Ok(());
    }
    let steps = ring_steps(topo.rank, w, &offs, &from, slice_of(&hdr, elem));
    let what = hdr.describe();
    ring_pipeline(net, topo.ring_prev, topo.ring_next, input, buf, &steps, elem, Some(reducer), scratch, &what)
}

/// The call's slice (its header's) rounded down to whole elements; 0 (whole chunks) if that
/// leaves none.
pub(crate) fn slice_of(hdr: &CallHeader, elem: usize) -> usize {
    let slice = hdr.ring_slice().unwrap_or(0);
    slice - slice % elem.max(1)
}

/// The header pass of a written-back call, carrying a mark per chunk: the prefix of final
/// values this rank holds, and its rank (the highest mark wins: the longest prefix, then the
/// lowest rank). Each agreed prefix is broadcast from its holder into `out` (so kept there)
/// and written back into `caller`. Returns where the ring starts in each chunk.
#[allow(clippy::too_many_arguments)]
fn resume(
    net: &mut Net,
    topo: &Topology,
    hdr: CallHeader,
    caller: &mut [u8],
    out: &mut [u8],
    done: &mut Progress,
    offs: &[usize],
    scratch: &mut Scratch,
) -> Result<Vec<usize>> {
    let (w, me) = (topo.world, topo.rank);
    let fresh = done.len() != w || (0..w).any(|c| !(offs[c]..=offs[c + 1]).contains(&done[c]));
    if fresh {
        *done = offs[..w].to_vec();
    }
    if me >= 1 << RANK_BITS {
        return Err(Error::InvalidArgument(format!("a robust ring allreduce supports {} ranks", 1 << RANK_BITS)));
    }
    let mark = |c: usize| (((done[c] - offs[c]) as u64) << RANK_BITS) | ((1u64 << RANK_BITS) - 1 - me as u64);
    let mut marks: Vec<u64> = (0..w).map(mark).collect();
    let max = reduce::typed_reducer::<u64>(Op::Max)?;
    allreduce_tree(net, topo, hdr, bytemuck::cast_slice_mut(&mut marks), 8, &max, scratch)?;
    for c in 0..w {
        let held = (marks[c] >> RANK_BITS) as usize;
        if held == 0 {
            continue;
        }
        let root = ((1u64 << RANK_BITS) - 1 - (marks[c] & ((1 << RANK_BITS) - 1))) as usize;
        let end = offs[c] + held;
        if end > offs[c + 1] || root >= w {
            return Err(Error::Protocol(format!("resume mark {:#x} out of range for chunk {c}", marks[c])));
        }
        if root == me {
            out[offs[c]..end].copy_from_slice(&caller[offs[c]..end]);
        }
        log::info!(target: "warren::collective", "rank {me}: {}: resumed; rank {root} serves the {held} bytes of chunk {c} it completed", hdr.describe());
        broadcast_tree(net, topo, root, &mut out[offs[c]..end], &hdr.describe())?;
        caller[done[c]..end].copy_from_slice(&out[done[c]..end]);
        done[c] = end;
    }
    Ok(done.clone())
}

/// The steps of rank `r`'s ring allreduce in a ring of `w` over the chunks at `offs`
/// (`w + 1` offsets), chunk `i` from `from[i]` on, in slices of `slice` bytes of every chunk
/// (0: whole chunks; a multiple of the element size): for each slice, `w - 1` reduce-scatter
/// steps, then `w - 1` allgather steps. The last reduce step and every allgather step receive
/// final values, so each chunk's final values grow from its start. Every element is reduced
/// along its chunk's chain whatever the slice: the same bits.
pub(crate) fn ring_steps(r: usize, w: usize, offs: &[usize], from: &[usize], slice: usize) -> Vec<Step> {
    let longest = (0..w).map(|c| offs[c + 1] - from[c]).max().unwrap_or(0);
    // Whole chunks are one slice as long as the longest chunk.
    let slice = if slice == 0 { longest.max(1) } else { slice };
    let slices = longest.div_ceil(slice).max(1);
    let at = |c: usize, k: usize| (from[c] + k * slice).min(offs[c + 1]);
    let mut steps = Vec::with_capacity(2 * (w - 1) * slices);
    for k in 0..slices {
        ring_slice_steps(r, w, |i| at(i % w, k)..at(i % w, k + 1), &mut steps);
    }
    steps
}

/// Appends the `2 (w - 1)` steps of rank `r` over the ranges `chunk(i)` of chunks `i mod w`.
fn ring_slice_steps(r: usize, w: usize, chunk: impl Fn(usize) -> Range<usize>, steps: &mut Vec<Step>) {
    for s in 0..w - 1 {
        let recv = r + 2 * w - s - 1;
        let fin = (s == w - 2).then_some(recv % w);
        steps.push(Step { send: chunk(r + w - s), recv: chunk(recv), reduce: true, send_input: s == 0, fin });
    }
    for j in 0..w - 1 {
        let recv = r + w - j;
        steps.push(Step {
            send: chunk(r + 1 + w - j),
            recv: chunk(recv),
            reduce: false,
            send_input: false,
            fin: Some(recv % w),
        });
    }
}

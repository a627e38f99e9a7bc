//! Hierarchical allreduce, for several workers per host on several hosts: reduce within each
//! host along a chain (over shared memory), ring allreduce across the hosts' leaders, then
//! pass the result back along each chain. Only one rank per host sends across hosts.
//!
//! The fixed order (the same bits on every rank and run): on a host with ranks `l0 < l1 <
//! ... < lk` (`l0` its leader), the last rank sends its input to the one before it, which
//! reduces it into its own (`acc = x[l(k-1)]`, `other = x[lk]`), and so on to the leader:
//! `x[l0] op (x[l1] op (... op x[lk]))`. The leaders' sums then go through the ring allreduce
//! over the leaders in rank order (its own fixed order, `allreduce_ring`), and every rank ends
//! with its leader's result, which is the same on every leader. This order differs from the
//! flat ring's; it is fixed by the host layout (host ids and ranks), so it runs only under
//! `WARREN_REDUCTION_ORDER=hosts` ([`crate::config::ReductionOrder`]): under the default,
//! ranks, a large allreduce is the flat ring on every placement.

use super::header::CallHeader;
use crate::error::Result;
use crate::hosts::HostLayout;
use crate::reduce::ByteReducer;
use crate::topology::{Topology, chunk_offsets};

use super::allreduce_ring::{ring_steps, slice_of};
use super::ring::{Input, Step, ring_pipeline};
use super::{Net, Scratch, allreduce_tree};

/// Runs the hierarchical allreduce of `buf` over `hosts`, after a tree pass that checks the
/// call header. With `input`, the input is read from there (left intact) and `buf` receives
/// the result.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce_hier(
    net: &mut Net,
    topo: &Topology,
    hosts: &HostLayout,
    hdr: CallHeader,
    input: Option<&[u8]>,
    buf: &mut [u8],
    elem: usize,
    reducer: &ByteReducer,
    scratch: &mut Scratch,
) -> Result<()> {
    allreduce_tree(net, topo, hdr, &mut [], 1, reducer, scratch)?;
    let me = topo.rank;
    let (up, down) = (hosts.up(me), hosts.down(me));
    let what = hdr.describe();
    let all = 0..buf.len();
    let none = 0..0;
    let step = |send: &std::ops::Range<usize>, recv: &std::ops::Range<usize>, reduce: bool, send_input: bool| Step {
        send: send.clone(),
        recv: recv.clone(),
        reduce,
        send_input,
        fin: None,
    };
    let separate = || input.map_or(Input::InPlace, Input::Separate);
    // Up the chain: receive the sum of the ranks after this one, reduce it into this rank's
    // input, pass it on towards the leader.
    match (up, down) {
        (_, Some(d)) => {
            let mut steps = vec![step(&none, &all, true, false)];
            steps.extend(up.map(|_| step(&all, &none, false, false)));
            ring_pipeline(net, d, up.unwrap_or(d), separate(), buf, &steps, elem, Some(reducer), scratch, &what)?;
        }
        (Some(u), None) => {
            ring_pipeline(net, u, u, separate(), buf, &[step(&all, &none, false, true)], elem, None, scratch, &what)?;
        }
        (None, None) => {
            if let Some(input) = input {
                buf.copy_from_slice(input);
            }
        }
    }
    // Across the hosts: the leaders' ring, in place on their sums.
    if let Some((i, prev, next)) = hosts.leader_ring(me) {
        let w = hosts.leaders.len();
        let offs = chunk_offsets(buf.len(), w, elem);
        let steps = ring_steps(i, w, &offs, &offs[..w], slice_of(&hdr, elem));
        ring_pipeline(net, prev, next, Input::InPlace, buf, &steps, elem, Some(reducer), scratch, &what)?;
    }
    // Down the chain: the leader's result, forwarded as it arrives.
    let mut steps = Vec::new();
    if up.is_some() {
        steps.push(step(&none, &all, false, false));
    }
    if down.is_some() {
        steps.push(step(&all, &none, false, false));
    }
    match (up, down) {
        (None, None) => Ok(()),
        (u, d) => {
            let (prev, next) = (u.or(d).expect("a neighbour"), d.or(u).expect("a neighbour"));
            ring_pipeline(net, prev, next, Input::InPlace, buf, &steps, elem, None, scratch, &what)
        }
    }
}

//! The ring pipeline shared by ring allreduce and ring allgather: a sequence of steps, each
//! sending one range of the buffer to the next rank while receiving one range from the
//! previous rank (reduced into the buffer, or copied). A step's send may start as soon as the
//! bytes it forwards have been received, so steps overlap byte by byte.
//!
//! The pipeline runs in place (the buffer holds this rank's input and ends with the result) or
//! out of place: this rank's input is read from a separate slice, left intact, and the buffer
//! only receives: a robust call keeps its input (to run again after a re-link) and its result
//! (to serve a restarted worker), so out of place it copies neither before or after the call.
//!
//! Received data is reduced on arrival: from a 256 KiB staging buffer over TCP, or straight
//! from the ring of a shared-memory link (no staging copy) when whole elements lie there.

use std::ops::Range;

use crate::error::Result;
use crate::reduce::ByteReducer;

use super::Scratch;
use super::net::Net;

/// Bytes of scratch used to receive data that is reduced on arrival.
const RECV_CHUNK: usize = 256 << 10;

/// One step of the ring.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) send: Range<usize>,
    pub(crate) recv: Range<usize>,
    pub(crate) reduce: bool,
    /// The send range holds this rank's own input, not yet written into the buffer (read from
    /// the separate input when running out of place).
    pub(crate) send_input: bool,
}

/// Runs `steps` between `prev` and `next` over `buf`. With `input` (as long as `buf`), this
/// rank's own data is read from `input` (steps marked `send_input`, and the local operand of
/// every reduction) and `buf` is only written: each reduce step's range becomes `input`'s
/// range reduced with the received one, in the same operand order as in place.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ring_pipeline(
    net: &mut Net,
    prev: usize,
    next: usize,
    input: Option<&[u8]>,
    buf: &mut [u8],
    steps: &[Step],
    elem: usize,
    reducer: Option<&ByteReducer>,
    scratch: &mut Scratch,
    what: &str,
) -> Result<()> {
    let mut stage = scratch.get(1, RECV_CHUNK - RECV_CHUNK % elem.max(1));
    let stage = &mut stage[0];
    let (mut si, mut so) = (0usize, 0usize); // send step, offset in it
    let (mut ri, mut ro, mut rdone) = (0usize, 0usize, 0usize); // recv step, bytes read, bytes processed
    let me = net.me;
    loop {
        let mut progressed = false;
        // Skip finished or empty steps.
        while si < steps.len() && so == steps[si].send.len() {
            si += 1;
            so = 0;
        }
        while ri < steps.len() && rdone == steps[ri].recv.len() {
            ri += 1;
            ro = 0;
            rdone = 0;
        }
        if si == steps.len() && ri == steps.len() {
            return Ok(());
        }
        // Send what this step may send: all of step 0, else what the previous step received.
        if si < steps.len() {
            let s = &steps[si];
            let limit = if si == 0 || ri >= si {
                s.send.len()
            } else if ri + 1 == si {
                rdone
            } else {
                0
            };
            if so < limit {
                let src: &[u8] = if s.send_input { input.unwrap_or(&*buf) } else { &*buf };
                let n = net.link(next)?.write_some(&src[s.send.start + so..s.send.start + limit])?;
                so += n;
                progressed |= n > 0;
            }
        }
        // Receive into the buffer, reducing whole elements on arrival.
        if ri < steps.len() {
            let r = &steps[ri];
            let len = r.recv.len();
            // Nothing staged: over shared memory, reduce straight from the ring where it can.
            let rest = r.recv.start + ro..r.recv.end;
            let direct = if r.reduce && ro == rdone {
                reduce_direct(net, prev, input.map(|i| &i[rest.clone()]), &mut buf[rest], elem, reducer)?
            } else {
                None
            };
            if let Some(n) = direct {
                ro += n;
                rdone = ro;
                progressed |= n > 0;
            } else if r.reduce {
                let pending = ro - rdone;
                let room = (stage.len() - pending).min(len - ro);
                let n = net.link(prev)?.read_some(&mut stage[pending..pending + room])?;
                ro += n;
                progressed |= n > 0;
                let have = ro - rdone;
                let whole = have - have % elem;
                if whole > 0 {
                    let at = r.recv.start + rdone;
                    let reduce = reducer.expect("reduce step needs a reducer");
                    reduce_from(
                        input.map(|i| &i[at..at + whole]),
                        &mut buf[at..at + whole],
                        &stage[..whole],
                        elem,
                        reduce,
                    );
                    stage.copy_within(whole..have, 0);
                    rdone += whole;
                }
            } else {
                let n = net.link(prev)?.read_some(&mut buf[r.recv.start + ro..r.recv.end])?;
                ro += n;
                rdone = ro;
                progressed |= n > 0;
            }
        }
        net.settle(progressed, || {
            format!("{what} on rank {me}: ring step {si} sending to rank {next}, step {ri} receiving from rank {prev}")
        })?;
    }
}

/// Reduces the next elements from `prev` into `out` (from `input`'s same range, if out of
/// place, else in place) where they lie in a shared-memory ring, without staging them.
/// `None` if the link cannot hand them over in place (TCP, or not whole aligned elements).
fn reduce_direct(
    net: &mut Net,
    prev: usize,
    input: Option<&[u8]>,
    out: &mut [u8],
    elem: usize,
    reducer: Option<&ByteReducer>,
) -> Result<Option<usize>> {
    let reduce = reducer.expect("reduce step needs a reducer");
    let max = out.len();
    let mut done = 0;
    let mut apply = |src: &[u8]| {
        let at = done..done + src.len();
        reduce_from(input.map(|i| &i[at.clone()]), &mut out[at], src, elem, reduce);
        done += src.len();
    };
    net.link(prev)?.read_in_place(max, elem, &mut apply)
}

/// Bytes reduced at a time out of place: the input's copy is still in the L1 cache when the
/// reduction reads it back.
const FUSED_BLOCK: usize = 16 << 10;

/// `out = input op other` out of place (`input`: this rank's operand, left intact), else
/// `out = out op other` in place; `other` as long as `out`, whole `elem`-byte elements.
fn reduce_from(input: Option<&[u8]>, out: &mut [u8], other: &[u8], elem: usize, reduce: &ByteReducer) {
    let Some(input) = input else { return reduce(out, other) };
    let block = (FUSED_BLOCK - FUSED_BLOCK % elem).max(elem);
    for ((o, i), x) in out.chunks_mut(block).zip(input.chunks(block)).zip(other.chunks(block)) {
        o.copy_from_slice(i);
        reduce(o, x);
    }
}

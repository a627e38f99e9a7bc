//! The ring pipeline shared by ring allreduce and ring allgather: a sequence of steps, each
//! sending one range of the buffer to the next rank while receiving one range from the
//! previous rank (reduced into the buffer, or copied). A step's send may start as soon as the
//! bytes it forwards have been received, so steps overlap byte by byte.
//!
//! The pipeline runs in place (the buffer holds this rank's input and ends with the result) or
//! out of place ([`Input`]): this rank's input is read from a separate slice and the buffer
//! only receives. A robust call keeps its result (to serve a restarted worker) in the buffer
//! and writes each final value back over the caller's input as soon as it is computed, while
//! it is still in the cache ([`Input::WriteBack`]): a range of the caller's buffer holds either
//! its input or its final value, and [`Progress`] records which, so that a retry after a
//! re-link resumes from there (see `allreduce_ring`).
//!
//! Received data is reduced on arrival: from a 256 KiB staging buffer over TCP, or straight
//! from the ring of a shared-memory link (no staging copy) when whole elements lie there.

use std::ops::Range;

use crate::error::Result;
use crate::reduce::ByteReducer;

use super::Scratch;
use super::net::Net;
use super::stream_copy::stream_copy;
use crate::transport::Link;

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
    /// The receive range ends with final values of chunk `i` (written back with
    /// [`Input::WriteBack`]).
    pub(crate) fin: Option<usize>,
}

/// Per chunk of a ring allreduce, the buffer offset up to which the caller's buffer holds the
/// chunk's final values (from the chunk's start on; the rest of the chunk still holds this
/// rank's input). Empty before a call's first attempt.
pub(crate) type Progress = Vec<usize>;

/// Where this rank's input lies.
pub(crate) enum Input<'a> {
    /// In the buffer itself, which ends with the result.
    InPlace,
    /// In a separate slice, left intact.
    Separate(&'a [u8]),
    /// In the caller's slice, whose ranges are overwritten with their final values as they are
    /// computed (each input byte is read once, before its final value exists); the progress
    /// records how far per chunk. The final values are kept in the buffer as well only if
    /// `keep` (this rank keeps the call's result for a restarted worker).
    WriteBack { caller: &'a mut [u8], done: &'a mut Progress, keep: bool },
}

impl Input<'_> {
    /// The input, if not in the buffer.
    pub(crate) fn read(&self) -> Option<&[u8]> {
        match self {
            Input::InPlace => None,
            Input::Separate(i) => Some(i),
            Input::WriteBack { caller, .. } => Some(caller),
        }
    }

    /// `out` (the buffer at `at`) becomes this rank's input there reduced with `other`;
    /// written back as well if the range ends with final values of chunk `fin`.
    fn reduce(
        &mut self,
        at: usize,
        out: &mut [u8],
        other: &[u8],
        elem: usize,
        reduce: &ByteReducer,
        fin: Option<usize>,
    ) {
        let block = (FUSED_BLOCK - FUSED_BLOCK % elem).max(elem);
        let range = at..at + out.len();
        match (self, fin) {
            (Input::InPlace, _) => reduce(out, other),
            (Input::WriteBack { caller, done, keep }, Some(c)) => {
                // Reduced in the caller's buffer (its input read there once), then kept.
                let i = &mut caller[range.clone()];
                for ((o, i), x) in out.chunks_mut(block).zip(i.chunks_mut(block)).zip(other.chunks(block)) {
                    reduce(i, x);
                    if *keep {
                        stream_copy(o, i);
                    }
                }
                done[c] = range.end;
            }
            (input, _) => {
                let i = &input.read().expect("out of place")[range];
                for ((o, i), x) in out.chunks_mut(block).zip(i.chunks(block)).zip(other.chunks(block)) {
                    o.copy_from_slice(i);
                    reduce(o, x);
                }
            }
        }
    }

    /// Reads from `link` into the buffer's `range`: into the caller's buffer and kept in `buf`
    /// if they are final values of chunk `fin` written back.
    fn receive(&mut self, link: &mut Link, buf: &mut [u8], range: Range<usize>, fin: Option<usize>) -> Result<usize> {
        match (self, fin) {
            (Input::WriteBack { caller, done, keep }, Some(c)) => {
                let n = link.read_some(&mut caller[range.clone()])?;
                let got = range.start..range.start + n;
                if *keep {
                    stream_copy(&mut buf[got.clone()], &caller[got.clone()]);
                }
                done[c] = got.end;
                Ok(n)
            }
            _ => link.read_some(&mut buf[range]),
        }
    }

    /// What step `si` sends from: this rank's input, or the caller's buffer where the step
    /// forwards final values written back there (still in the cache, unlike the kept copy).
    fn send_source<'b>(&'b self, buf: &'b [u8], steps: &[Step], si: usize) -> &'b [u8] {
        let forwards_final = si > 0 && steps[si - 1].fin.is_some();
        match self {
            Input::Separate(i) if steps[si].send_input => i,
            Input::WriteBack { caller, .. } if steps[si].send_input || forwards_final => caller,
            _ => buf,
        }
    }
}

/// Runs `steps` between `prev` and `next` over `buf`. With a separate `input` (as long as
/// `buf`), this rank's own data is read from there (steps marked `send_input`, and the local
/// operand of every reduction) and `buf` is only written: each reduce step's range becomes
/// `input`'s range reduced with the received one, in the same operand order as in place.
///
/// Over a shared-memory link that lends, the copy steps (allgather) lend what they send
/// ([`Link::send_stable`]): `next` copies it out of this process. That is safe because a sent
/// range is not written again before `next` has copied it (the value that overwrites it is
/// one `next` computed from it, or arrives at the call's end), and this function returns
/// only once `next` has copied everything lent, or after taking the loan back on a failure.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ring_pipeline(
    net: &mut Net,
    prev: usize,
    next: usize,
    input: Input,
    buf: &mut [u8],
    steps: &[Step],
    elem: usize,
    reducer: Option<&ByteReducer>,
    scratch: &mut Scratch,
    what: &str,
) -> Result<()> {
    let me = net.me;
    let ran = run_steps(net, prev, next, input, buf, steps, elem, reducer, scratch, what).and_then(|()| {
        while next != me && net.link(next)?.lending()? {
            net.settle(false, || format!("{what} on rank {me}: rank {next} to copy the last bytes lent to it"))?;
        }
        Ok(())
    });
    if ran.is_err() && next != me {
        if let Ok(link) = net.link(next) {
            link.take_back();
        }
    }
    ran
}

/// The loop of [`ring_pipeline`].
#[allow(clippy::too_many_arguments)]
fn run_steps(
    net: &mut Net,
    prev: usize,
    next: usize,
    mut input: Input,
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
    // Failure injection (`crate::mock::Point::InRing`): this rank forwards at most half of
    // each range of final values and exits once it has gathered half of the first one, so
    // that no rank completes the call and every rank holds part of the result.
    let first_gather = steps.iter().position(|s| !s.reduce && s.fin.is_some() && !s.recv.is_empty());
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
        if si < steps.len() {
            let s = &steps[si];
            let mut limit = send_limit(steps, si, ri, rdone);
            let mocked = net.exit_in_ring && !s.reduce;
            if mocked {
                limit = limit.min(s.send.len() / 2);
            }
            if so < limit {
                let src = &input.send_source(buf, steps, si)[s.send.start + so..s.send.start + limit];
                let link = net.link(next)?;
                let n = if s.reduce {
                    link.write_some(src)?
                } else {
                    link.send_stable(src, limit < s.send.len() && !mocked)?
                };
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
                reduce_direct(net, prev, &mut input, rest.start, &mut buf[rest], elem, reducer, r.fin)?
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
                    input.reduce(at, &mut buf[at..at + whole], &stage[..whole], elem, reduce, r.fin);
                    stage.copy_within(whole..have, 0);
                    rdone += whole;
                }
            } else {
                let mut end = r.recv.end;
                if net.exit_in_ring && first_gather == Some(ri) {
                    net.maybe_exit_in_ring(2 * ro >= len);
                    end = end.min(r.recv.start + len / 2);
                }
                let n = input.receive(net.link(prev)?, buf, r.recv.start + ro..end, r.fin)?;
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

/// How many bytes of step `si`'s range may be sent while step `ri` has received and processed
/// `rdone` bytes: all of this rank's input, else what the previous step received (the range
/// step `si` forwards). A step that sends input, like the first of each slice of a ring
/// allreduce, does not wait: the step before it may have a longer range than its own.
fn send_limit(steps: &[Step], si: usize, ri: usize, rdone: usize) -> usize {
    let s = &steps[si];
    if si == 0 || s.send_input || ri >= si {
        s.send.len()
    } else if ri + 1 == si {
        rdone.min(s.send.len())
    } else {
        0
    }
}

/// Reduces the next elements from `prev` into `out` (the buffer at `at`; with `input`'s
/// operand there) where they lie in a shared-memory ring, without staging them. `None` if the
/// link cannot hand them over in place (TCP, or not whole aligned elements).
#[allow(clippy::too_many_arguments)]
fn reduce_direct(
    net: &mut Net,
    prev: usize,
    input: &mut Input,
    at: usize,
    out: &mut [u8],
    elem: usize,
    reducer: Option<&ByteReducer>,
    fin: Option<usize>,
) -> Result<Option<usize>> {
    let reduce = reducer.expect("reduce step needs a reducer");
    let max = out.len();
    let mut done = 0;
    let mut apply = |src: &[u8]| {
        input.reduce(at + done, &mut out[done..done + src.len()], src, elem, reduce, fin);
        done += src.len();
    };
    net.link(prev)?.read_in_place(max, elem, &mut apply)
}

/// Bytes reduced at a time out of place: the input's copy is still in the L1 cache when the
/// reduction reads it back.
const FUSED_BLOCK: usize = 16 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::allreduce_ring::ring_steps;

    /// Rank 0 of a ring of 2 over chunks of 10 and 10 bytes in slices of 4: the last slice (2
    /// bytes) starts with its input while the step before it (4 bytes) is partly received.
    #[test]
    fn a_step_never_sends_beyond_its_range_nor_waits_to_send_its_input() {
        let offs = [0, 10, 20];
        let steps = ring_steps(0, 2, &offs, &offs[..2], 4);
        let ranges: Vec<(Range<usize>, Range<usize>)> =
            steps.iter().map(|s| (s.send.clone(), s.recv.clone())).collect();
        assert_eq!(
            ranges,
            [(0..4, 10..14), (10..14, 0..4), (4..8, 14..18), (14..18, 4..8), (8..10, 18..20), (18..20, 8..10)]
        );
        let last_slice = 4;
        assert!(steps[last_slice].send_input);
        // The step before it has received 3 of its 4 bytes: the input goes out whole, no more.
        assert_eq!(send_limit(&steps, last_slice, last_slice - 1, 3), 2);
        assert_eq!(send_limit(&steps, last_slice, last_slice - 1, 0), 2);
        // A forwarding step sends what the step before it has received, within its range.
        assert_eq!(send_limit(&steps, 5, 4, 1), 1);
        assert_eq!(send_limit(&steps, 3, 2, 3), 3);
        assert_eq!(send_limit(&steps, 3, 1, 4), 0);
        assert_eq!(send_limit(&steps, 3, 3, 0), 4);
    }

    /// Whole chunks (slice 0) and slices longer than every chunk give the same steps.
    #[test]
    fn slices_longer_than_the_chunks_change_nothing() {
        let offs = [0, 12, 24, 36];
        let from = [4, 12, 30];
        let key =
            |v: Vec<Step>| v.into_iter().map(|s| (s.send, s.recv, s.reduce, s.send_input, s.fin)).collect::<Vec<_>>();
        for r in 0..3 {
            assert_eq!(key(ring_steps(r, 3, &offs, &from, 0)), key(ring_steps(r, 3, &offs, &from, 64)));
        }
    }
}

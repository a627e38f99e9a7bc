//! A rank's call declared to every linked peer at once, and theirs checked against it: the
//! first step of `finalize`'s barrier. A tree pass only meets the peers its tree reads from,
//! so a rank that reached `finalize` while the others make another call (a loop that ran
//! fewer times on one rank) could wait unseen until the call timeout: a small allreduce in a
//! world of 4 reads rank 0's children on the flat tree, a barrier waits on the heap tree.
//! Whatever call the others are in, one of them reads from this rank first (every call needs
//! every rank's part), finds this declaration where it expected its own call's, and aborts the
//! call everywhere with the mismatch.

use std::time::{Duration, Instant};

use super::header::CallHeader;
use super::net::{HeaderIn, HeaderOut, HeaderState, Net, declared};
use crate::error::Result;

/// Sends `hdr` to every rank in `peers` and reads each one's declaration, which must match
/// (else every peer is told of the mismatch, and it is this rank's error).
pub(crate) fn declare_to_peers(net: &mut Net, me: usize, peers: &[usize], hdr: CallHeader) -> Result<()> {
    let mut outs: Vec<HeaderOut> = peers
        .iter()
        .map(|_| {
            let mut o = HeaderOut::new();
            o.set(&hdr);
            o
        })
        .collect();
    let mut ins: Vec<HeaderIn> = peers.iter().map(|&p| HeaderIn::new(p)).collect();
    loop {
        let mut progressed = false;
        for (out, &p) in outs.iter_mut().zip(peers) {
            if !out.done() {
                let n = net.link(p)?.write_some(out.rest())?;
                out.advance(n);
                progressed |= n > 0;
            }
        }
        let mut all = outs.iter().all(HeaderOut::done);
        let mut lost = None;
        for i in ins.iter_mut() {
            let st = match i.poll(net) {
                Ok((p, st)) => {
                    progressed |= p;
                    st
                }
                // Another peer's abort may be on its way: see below.
                Err(e) => {
                    lost.get_or_insert(e);
                    continue;
                }
            };
            match st {
                HeaderState::Pending => all = false,
                HeaderState::Proceed(theirs) => {
                    if hdr.merge(&theirs, me, i.from).is_err() {
                        return Err(net.abort_mismatch(peers, declared(me, &hdr, i.from, &theirs)));
                    }
                }
                HeaderState::Abort(a) => return Err(net.forward_abort(peers, &a)),
            }
        }
        if let Some(e) = lost {
            return Err(abort_before(net, &mut ins, peers).unwrap_or(e));
        }
        if all {
            return Ok(());
        }
        let waiting = || {
            let pending: Vec<usize> = ins.iter().filter(|i| i.header().is_none()).map(|i| i.from).collect();
            format!("{} on rank {me}: the declarations of ranks {pending:?}", hdr.describe())
        };
        net.settle(progressed, waiting)?;
    }
}

/// How long a rank that lost a peer while declaring waits for another peer's abort.
const ABORT_GRACE: Duration = Duration::from_millis(200);

/// A peer was lost while this rank declared. When the others found the mismatch, the rank
/// that found it sends each its abort, and those that got it leave (closing their links) at
/// once: the abort to this rank may arrive just after a departure. So the error is the abort
/// if one arrives within [`ABORT_GRACE`], else the loss.
fn abort_before(net: &mut Net, ins: &mut [HeaderIn], peers: &[usize]) -> Option<crate::error::Error> {
    let until = Instant::now() + ABORT_GRACE;
    while Instant::now() < until {
        for i in ins.iter_mut() {
            if let Ok((_, HeaderState::Abort(a))) = i.poll(net) {
                return Some(net.forward_abort(peers, &a));
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

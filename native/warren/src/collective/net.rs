//! The links of one call, the waiter and the call's deadline; header and abort plumbing shared
//! by the algorithms.

use std::time::Instant;

use super::header::{self, CallHeader, HEADER_LEN, HeaderMsg};
use crate::error::{CallMismatch, Error, Result};
use crate::transport::{Link, Waiter};

/// Abort codes carried in an abort header (byte 1).
const ABORT_MISMATCH: u8 = 1;
const ABORT_OTHER: u8 = 2;

/// Links indexed by peer rank, the waiter and the deadline of the current call.
pub(crate) struct Net<'a> {
    pub(crate) me: usize,
    pub(crate) links: &'a mut [Option<Link>],
    pub(crate) waiter: &'a mut Waiter,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    /// Failure injection (`WARREN_MOCK`, [`crate::mock::Point::InRing`]): the process exits
    /// once a ring allreduce has gathered half of its final values.
    pub(crate) exit_in_ring: bool,
}

impl Net<'_> {
    pub(crate) fn link(&mut self, rank: usize) -> Result<&mut Link> {
        self.links.get_mut(rank).and_then(|l| l.as_mut()).ok_or_else(|| Error::PeerLost {
            rank,
            task: None,
            reason: "no link to this peer".into(),
        })
    }

    /// Exits the process, like a crash, if failure injection asks for it in this ring and it
    /// has gathered `half` of the first range of final values it gathers.
    pub(crate) fn maybe_exit_in_ring(&self, half: bool) {
        if self.exit_in_ring && half {
            eprintln!(
                "WARREN_MOCK: rank {} exits in a ring allreduce, half of its first gathered range received",
                self.me
            );
            // SAFETY: _exit ends the process at once, like a crash; nothing runs after it.
            unsafe { libc::_exit(86) }
        }
    }

    /// Records whether a round moved data, and if not waits for readiness.
    pub(crate) fn settle(&mut self, progressed: bool, waiting_for: impl Fn() -> String) -> Result<()> {
        if progressed {
            // A transfer that always moves data never waits: notice a cancellation here too.
            self.waiter.progressed()
        } else {
            self.waiter.wait(self.deadline, self.started, waiting_for, self.links)
        }
    }

    /// Sends what TLS links still hold of this call's writes ([`Link::flush`]) before the
    /// call returns: their peers wait for those bytes in this call.
    pub(crate) fn drain(&mut self) -> Result<()> {
        loop {
            let mut pending = false;
            for l in self.links.iter_mut().flatten() {
                pending |= !l.flush()?;
            }
            if !pending {
                return Ok(());
            }
            let waiting_for = || "the peers to take the last bytes of the call (TLS)".to_string();
            self.waiter.wait(self.deadline, self.started, waiting_for, self.links)?;
        }
    }

    /// Sends `head` (the rest of a header) then `data` to `rank` with one vectored write.
    /// Returns how many bytes of each were taken.
    pub(crate) fn send2(&mut self, rank: usize, head: &[u8], data: &[u8]) -> Result<(usize, usize)> {
        let n = self.link(rank)?.write_vectored_some(head, data)?;
        let h = n.min(head.len());
        Ok((h, n - h))
    }

    /// Sends `bytes` to every rank in `to`, blocking until done or a short deadline; used to
    /// deliver aborts, so failures are ignored (that peer is gone anyway).
    pub(crate) fn flush_to(&mut self, to: &[usize], bytes: &[u8]) {
        let give_up = self.deadline.min(Instant::now() + std::time::Duration::from_secs(5));
        for &r in to {
            let mut sent = 0;
            while sent < bytes.len() && Instant::now() < give_up {
                match self.link(r).and_then(|l| l.write_some(&bytes[sent..])) {
                    Ok(0) => std::thread::yield_now(),
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
        }
    }

    /// Raises a mismatch here (two ranks declared different calls): tells `to` and returns
    /// the error for this rank. The declarations travel as data (JSON in the abort's reason).
    pub(crate) fn abort_mismatch(&mut self, to: &[usize], mismatch: CallMismatch) -> Error {
        let reason = serde_json::to_string(&mismatch).expect("a mismatch always serializes");
        self.send_abort(to, self.me, ABORT_MISMATCH, &reason);
        Error::Mismatch(mismatch)
    }

    /// Passes on an abort received from elsewhere and returns the error for this rank.
    pub(crate) fn forward_abort(&mut self, to: &[usize], a: &AbortInfo) -> Error {
        self.send_abort(to, a.origin, if a.mismatch { ABORT_MISMATCH } else { ABORT_OTHER }, &a.reason);
        if !a.mismatch {
            return Error::Aborted { rank: a.origin, reason: a.reason.clone() };
        }
        match serde_json::from_str::<CallMismatch>(&a.reason) {
            Ok(mut m) => {
                m.context = format!("detected by rank {}", a.origin);
                Error::Mismatch(m)
            }
            Err(e) => Error::Protocol(format!("rank {} reported a malformed mismatch ({e}): {}", a.origin, a.reason)),
        }
    }

    fn send_abort(&mut self, to: &[usize], origin: usize, code: u8, reason: &str) {
        let mut bytes = header::encode_abort(origin, reason);
        bytes[1] = code;
        self.flush_to(to, &bytes);
    }
}

/// The mismatch of this rank's declaration `mine` with `peer`'s declaration `theirs`.
pub(crate) fn declared(me: usize, mine: &CallHeader, peer: usize, theirs: &CallHeader) -> CallMismatch {
    CallMismatch::new(mine.declaration(me, None), theirs.declaration(peer, None), "")
}

/// An abort received from a peer.
#[derive(Debug, Clone)]
pub(crate) struct AbortInfo {
    pub(crate) origin: usize,
    pub(crate) mismatch: bool,
    pub(crate) reason: String,
}

/// What a header being received says so far.
pub(crate) enum HeaderState {
    Pending,
    Proceed(CallHeader),
    Abort(AbortInfo),
}

/// Receives one call header (and an abort reason, if it is an abort) from a peer.
pub(crate) struct HeaderIn {
    pub(crate) from: usize,
    bytes: [u8; HEADER_LEN],
    got: usize,
    reason: Vec<u8>,
    reason_len: Option<(usize, usize, bool)>,
    done: Option<CallHeader>,
}

impl HeaderIn {
    pub(crate) fn new(from: usize) -> HeaderIn {
        HeaderIn { from, bytes: [0; HEADER_LEN], got: 0, reason: Vec::new(), reason_len: None, done: None }
    }

    /// The header, once received and not an abort.
    pub(crate) fn header(&self) -> Option<CallHeader> {
        self.done
    }

    /// Reads what is available; returns whether anything was read and the state.
    pub(crate) fn poll(&mut self, net: &mut Net) -> Result<(bool, HeaderState)> {
        if let Some(h) = self.done {
            return Ok((false, HeaderState::Proceed(h)));
        }
        let link = net.link(self.from)?;
        let mut progressed = false;
        if self.got < HEADER_LEN {
            let n = link.read_some(&mut self.bytes[self.got..])?;
            progressed |= n > 0;
            self.got += n;
            if self.got < HEADER_LEN {
                return Ok((progressed, HeaderState::Pending));
            }
            match header::decode_header(&self.bytes, self.from)? {
                HeaderMsg::Proceed(h) => {
                    self.done = Some(h);
                    return Ok((true, HeaderState::Proceed(h)));
                }
                HeaderMsg::Abort { origin, reason_len } => {
                    let mismatch = self.bytes[1] == ABORT_MISMATCH;
                    self.reason = vec![0; reason_len as usize];
                    self.reason_len = Some((origin as usize, 0, mismatch));
                }
            }
        }
        let (origin, mut at, mismatch) = self.reason_len.expect("abort header decoded");
        let n = link.read_some(&mut self.reason[at..])?;
        progressed |= n > 0;
        at += n;
        self.reason_len = Some((origin, at, mismatch));
        if at < self.reason.len() {
            return Ok((progressed, HeaderState::Pending));
        }
        let reason = String::from_utf8_lossy(&self.reason).into_owned();
        Ok((true, HeaderState::Abort(AbortInfo { origin, mismatch, reason })))
    }
}

/// Bytes of a header still to send.
pub(crate) struct HeaderOut {
    bytes: [u8; HEADER_LEN],
    sent: usize,
    ready: bool,
}

impl HeaderOut {
    pub(crate) fn new() -> HeaderOut {
        HeaderOut { bytes: [0; HEADER_LEN], sent: 0, ready: false }
    }

    pub(crate) fn set(&mut self, h: &CallHeader) {
        self.bytes = h.encode();
        self.ready = true;
    }

    pub(crate) fn is_set(&self) -> bool {
        self.ready
    }

    pub(crate) fn rest(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    pub(crate) fn advance(&mut self, n: usize) {
        self.sent += n;
    }

    pub(crate) fn done(&self) -> bool {
        self.ready && self.sent == HEADER_LEN
    }
}

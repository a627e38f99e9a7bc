//! Shared-memory links between workers on one host: two single-producer single-consumer byte
//! rings in a [`Segment`], one per direction. A link still has its TCP socket: it carries
//! no data, only wake-ups (one byte, sent to a peer that said it sleeps) and the peer's
//! liveness (its end closing, when it exits or is killed, wakes this end's `epoll`).
//!
//! Sleeping without losing a wake-up: an end about to block sets its `sleeping` flag (one for
//! "waits for data", one for "waits for room") and then looks at the rings again
//! ([`ShmEnd::arm`]); an end that writes (reads) publishes its counter and then looks at the
//! other's "waits for data" ("waits for room") flag. With a full fence on both sides, at least one of them
//! sees the other's write: the sleeper sees the data, or the mover sees the flag and wakes it.
//!
//! Lending (single copy): instead of copying bytes into the ring, a writer may publish the
//! address and length of bytes in its own memory ([`ShmEnd::lend`]), which the reader copies
//! straight into their destination with `process_vm_readv` ([`cma`]). A loan takes the ring's
//! place in the byte stream: it is only posted once the ring is drained, and nothing else is
//! written until the reader has copied all of it, so the bytes still arrive in order. The
//! writer must leave the lent bytes unchanged until then, or take the loan back
//! ([`ShmEnd::revoke`]) before it touches them: a reader checks after each copy that the loan
//! was not revoked meanwhile (with a full fence on both sides, as for the sleeping flags), and
//! fails the link if it was. A writer only lends to a reader that has found it can read the
//! writer's memory (a probe of the peer's mapping of this segment).

mod cma;
mod segment;

use segment::MAGIC;
#[cfg(test)]
use segment::MIN_RING;
pub(crate) use segment::Segment;

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::fence;

/// Most bytes copied out of a loan by one system call: the copy stays in the cache while the
/// reader uses it, and a forwarding reader lends on what it has so far (measured here: 5 %
/// faster than whole loans at 16 MiB).
const BORROW_MAX: usize = 256 << 10;

/// The `sleeping` flag of an end that waits for data in its incoming ring.
const WAITS_DATA: usize = 0;
/// The `sleeping` flag of an end that waits for room in its outgoing ring.
const WAITS_ROOM: usize = 1;

/// Why a shared-memory read or write failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The peer left the shared state impossible (a protocol error).
    Corrupt(String),
    /// The bytes the peer lent cannot be had: it is gone, or it took them back.
    Gone(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Corrupt(s) | Fault::Gone(s) => f.write_str(s),
        }
    }
}

/// One end of a shared-memory link: end 0 (the connector) writes ring 0 and reads ring 1,
/// end 1 the other way round.
#[derive(Debug)]
pub(crate) struct ShmEnd {
    seg: Segment,
    end: usize,
    /// Lending and borrowing are on here.
    cma: bool,
    /// The peer's pid, once this end found it can read the peer's memory.
    lender: Option<i32>,
    /// The probe of the peer's memory was made (or lending is off here).
    probed: bool,
    /// The last read found nothing (data is what this end waits for).
    want_read: bool,
    /// The last write found the ring full (room is what this end waits for).
    want_write: bool,
    /// The last attempt to lend found the ring not yet drained.
    want_drain: bool,
}

impl ShmEnd {
    /// End `end` (0 or 1) of the link in `seg`, lending and borrowing if `cma`.
    pub(crate) fn new(seg: Segment, end: usize, cma: bool) -> ShmEnd {
        assert!(end < 2, "a link has two ends");
        seg.pid(end).store(u64::from(std::process::id()), Relaxed);
        seg.mapped_at(end).store(seg.base() as u64, Release);
        let mut e = ShmEnd {
            seg,
            end,
            cma,
            lender: None,
            probed: !cma,
            want_read: false,
            want_write: false,
            want_drain: false,
        };
        e.probe();
        e
    }

    /// Finds out, once the peer's end is set up, whether this end can read the peer's memory
    /// (its mapping of the segment must read as the segment's magic), and if so says so in
    /// the segment: the peer may lend from then on.
    fn probe(&mut self) {
        if self.probed {
            return;
        }
        let peer = 1 - self.end;
        let at = self.seg.mapped_at(peer).load(Acquire);
        let pid = self.seg.pid(peer).load(Relaxed);
        if at == 0 || pid == 0 {
            return;
        }
        self.probed = true;
        let mut word = [0u8; 8];
        match cma::read(pid as i32, at, &mut word) {
            Ok(8) if u64::from_le_bytes(word) == MAGIC => {
                self.lender = Some(pid as i32);
                self.seg.can_borrow(self.end).store(1, Release);
            }
            Ok(n) => log::debug!(
                "shared memory: the probe of pid {pid}'s memory read {n} bytes, not the segment; using the rings only"
            ),
            Err(e) => log::debug!("shared memory: cannot read pid {pid}'s memory ({e}); using the rings only"),
        }
    }

    /// Copies what is available (up to `buf.len()` bytes) out of the incoming ring, or out of
    /// the peer's memory if it lent the next bytes. Returns
    /// the bytes read and whether the peer sleeps and must be woken. An error if the peer left
    /// the counters in an impossible state.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<(usize, bool), Fault> {
        self.probe();
        let r = 1 - self.end;
        let (cap, head) = (self.seg.cap(), self.seg.head(r).load(Relaxed));
        let avail = self.available(r, head)?;
        if avail == 0 && !buf.is_empty() {
            if let Some((n, wake)) = self.borrow(buf)? {
                self.want_read = n == 0;
                return Ok((n, wake));
            }
        }
        let n = avail.min(buf.len());
        self.want_read = n == 0 && !buf.is_empty();
        if n == 0 {
            return Ok((0, false));
        }
        let off = (head as usize) & (cap - 1);
        let first = n.min(cap - off);
        let data = self.seg.data(r);
        // SAFETY: [head, head + n) is written and published by the peer (tail, acquired), and
        // it does not write it again until `head` moves past it; `buf` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(data.add(off), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, buf.as_mut_ptr().add(first), n - first);
        }
        self.seg.head(r).store(head + n as u64, Release);
        Ok((n, self.peer_sleeps(WAITS_ROOM)))
    }

    /// Reads in place: hands `f` the longest run of whole `elem`-byte elements (at most `max`
    /// bytes) that lies contiguous and `elem`-aligned in the incoming ring, then consumes it.
    /// Returns the bytes consumed (0: nothing available) and whether the peer must be woken,
    /// or `None` if the next bytes cannot be handed over in place (misaligned, a partial
    /// element, one that wraps around, or lent bytes): then [`ShmEnd::read`] them.
    pub(crate) fn read_in_place(
        &mut self,
        max: usize,
        elem: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<Option<(usize, bool)>, Fault> {
        self.probe();
        let r = 1 - self.end;
        let (cap, head) = (self.seg.cap(), self.seg.head(r).load(Relaxed));
        let avail = self.available(r, head)?;
        if avail == 0 && self.loan_open(r) {
            return Ok(None);
        }
        let off = (head as usize) & (cap - 1);
        let data = self.seg.data(r);
        if max == 0 || (data as usize + off) % elem != 0 {
            return Ok(None);
        }
        let run = avail.min(max).min(cap - off);
        let n = run - run % elem;
        if n == 0 {
            self.want_read = avail == 0;
            return Ok(if avail == 0 { Some((0, false)) } else { None });
        }
        self.want_read = false;
        // SAFETY: as in `read`: [head, head + n) is published and the peer leaves it alone
        // until `head` moves past it, which happens after `f` returns.
        f(unsafe { std::slice::from_raw_parts(data.add(off), n) });
        self.seg.head(r).store(head + n as u64, Release);
        Ok(Some((n, self.peer_sleeps(WAITS_ROOM))))
    }

    /// Copies as much of `a` then `b` as fits into the outgoing ring. Returns the bytes
    /// written and whether the peer sleeps and must be woken.
    pub(crate) fn write(&mut self, a: &[u8], b: &[u8]) -> Result<(usize, bool), Fault> {
        let r = self.end;
        if self.loan_open(r) {
            // The loan comes first in the stream.
            self.want_write = a.len() + b.len() > 0;
            return Ok((0, false));
        }
        let (cap, tail) = (self.seg.cap(), self.seg.tail(r).load(Relaxed));
        let head = self.seg.head(r).load(Acquire);
        let used = tail.wrapping_sub(head);
        if used > cap as u64 {
            return Err(Fault::Corrupt(format!("outgoing ring counters are corrupt (head {head}, tail {tail})")));
        }
        let mut free = cap - used as usize;
        let mut pos = tail;
        for part in [a, b] {
            let n = part.len().min(free);
            self.copy_in(pos, &part[..n]);
            pos += n as u64;
            free -= n;
            if n < part.len() {
                break;
            }
        }
        let n = (pos - tail) as usize;
        self.want_write = n == 0 && a.len() + b.len() > 0;
        if n == 0 {
            return Ok((0, false));
        }
        self.seg.tail(r).store(pos, Release);
        Ok((n, self.peer_sleeps(WAITS_DATA)))
    }

    /// About to block: asks the peer for a wake-up, then says whether what this end waited
    /// for (data, or room, or a drained ring, or its loan copied) has arrived meanwhile, in which case it should not block. Forgets
    /// what it waited for: the next reads and writes say it again.
    pub(crate) fn arm(&mut self) -> bool {
        if !self.want_read && !self.want_write {
            return false;
        }
        self.seg.sleeping(self.end, WAITS_DATA).store(u32::from(self.want_read), SeqCst);
        self.seg.sleeping(self.end, WAITS_ROOM).store(u32::from(self.want_write), SeqCst);
        fence(SeqCst);
        let (r, w) = (1 - self.end, self.end);
        let data =
            self.want_read && (self.seg.tail(r).load(Acquire) != self.seg.head(r).load(Relaxed) || self.loan_open(r));
        let used = self.seg.tail(w).load(Relaxed).wrapping_sub(self.seg.head(w).load(Acquire));
        let room = self.want_write
            && !self.loan_open(w)
            && if self.want_drain { used == 0 } else { used < self.seg.cap() as u64 };
        self.want_read = false;
        self.want_write = false;
        self.want_drain = false;
        data || room
    }

    /// Awake again: the peer need not wake this end any more.
    pub(crate) fn disarm(&self) {
        self.seg.sleeping(self.end, WAITS_DATA).store(0, Relaxed);
        self.seg.sleeping(self.end, WAITS_ROOM).store(0, Relaxed);
    }

    /// Whether this end may lend to its peer: lending is on at both ends and the peer found
    /// it can read this process's memory.
    pub(crate) fn can_lend(&self) -> bool {
        self.cma && self.seg.can_borrow(1 - self.end).load(Relaxed) != 0
    }

    /// Lends `src` (non-empty) to the peer instead of copying it into the ring: the peer
    /// copies it out of this process's memory. `src` must stay unchanged and mapped until
    /// the peer has copied all of it ([`ShmEnd::lending`] turns false) or the loan is taken
    /// back ([`ShmEnd::revoke`]). Bytes that follow an open loan in memory extend it
    /// ([`ShmEnd::extends`]). Returns the bytes lent (all of `src`, or 0 while the ring still
    /// holds bytes or an open loan is elsewhere) and whether the peer must be woken; `None`
    /// if this end may not lend ([`ShmEnd::can_lend`]).
    pub(crate) fn lend(&mut self, src: &[u8]) -> Option<(usize, bool)> {
        if !self.can_lend() || src.is_empty() {
            return None;
        }
        let w = self.end;
        let lent = self.seg.lent(w).load(Relaxed);
        if !self.extends(src) {
            let drained = self.seg.tail(w).load(Relaxed) == self.seg.head(w).load(Acquire);
            if !drained || self.loan_open(w) {
                self.want_write = true;
                self.want_drain = true;
                return Some((0, false));
            }
            let (addr, start) = self.seg.loan(w);
            addr.store(src.as_ptr() as u64, Relaxed);
            start.store(lent, Relaxed);
        }
        self.seg.lent(w).store(lent + src.len() as u64, Release);
        Some((src.len(), self.peer_sleeps(WAITS_DATA)))
    }

    /// Whether `src` starts where this end's open loan ends in memory (lending it extends
    /// the loan: the peer may be copying the loan meanwhile, its address and start stay).
    pub(crate) fn extends(&self, src: &[u8]) -> bool {
        let w = self.end;
        let lent = self.seg.lent(w).load(Relaxed);
        let (addr, start) = (self.seg.loan(w).0.load(Relaxed), self.seg.loan(w).1.load(Relaxed));
        self.loan_open(w) && addr.wrapping_add(lent - start) == src.as_ptr() as u64
    }

    /// Whether the peer has yet to copy some of this end's loan (then this end waits for it:
    /// the next [`ShmEnd::arm`] asks to be woken when it has).
    pub(crate) fn lending(&mut self) -> bool {
        let open = self.loan_open(self.end);
        self.want_write |= open;
        open
    }

    /// Takes back an open loan: the peer fails its link rather than keep bytes it copied
    /// after this (the lent memory may change from now on).
    pub(crate) fn revoke(&mut self) {
        let w = self.end;
        if self.loan_open(w) {
            self.seg.revoked(w).store(self.seg.loan(w).1.load(Relaxed) + 1, SeqCst);
            fence(SeqCst);
        }
    }

    /// Whether ring `r`'s writer has lent bytes its reader has not copied yet.
    fn loan_open(&self, r: usize) -> bool {
        self.seg.lent(r).load(Acquire) != self.seg.borrowed(r).load(Acquire)
    }

    /// Copies the next lent bytes (at most `buf.len()`) out of the peer's memory. `None` if
    /// no loan is open; else the bytes copied and whether the peer must be woken.
    fn borrow(&mut self, buf: &mut [u8]) -> Result<Option<(usize, bool)>, Fault> {
        let r = 1 - self.end;
        let lent = self.seg.lent(r).load(Acquire);
        let taken = self.seg.borrowed(r).load(Relaxed);
        if lent == taken {
            return Ok(None);
        }
        let Some(pid) = self.lender else {
            return Err(Fault::Corrupt("the peer lent bytes this end did not agree to borrow".into()));
        };
        // Fixed while the loan is open: a new one starts only once this one is copied.
        let (addr, start) = (self.seg.loan(r).0.load(Relaxed), self.seg.loan(r).1.load(Relaxed));
        if taken < start || taken > lent || addr.checked_add(lent - start).is_none() {
            return Err(Fault::Corrupt(format!(
                "loan counters are corrupt (lent {lent}, copied {taken}, loan from {start})"
            )));
        }
        let n = ((lent - taken) as usize).min(buf.len()).min(BORROW_MAX);
        let got = cma::read(pid, addr + (taken - start), &mut buf[..n])
            .map_err(|e| Fault::Gone(format!("copying the {n} bytes it lent: {e}")))?;
        // Ordered after the copy; the lender's revocation is ordered before it changes them.
        fence(SeqCst);
        if self.seg.revoked(r).load(Relaxed) == start + 1 {
            return Err(Fault::Gone("it took back the bytes it lent (it left the call)".into()));
        }
        if got == 0 {
            return Err(Fault::Gone(format!("copying the {n} bytes it lent: none could be read")));
        }
        self.seg.borrowed(r).store(taken + got as u64, Release);
        Ok(Some((got, self.peer_sleeps(WAITS_ROOM))))
    }

    /// Bytes published by the peer in ring `r` and not read yet.
    fn available(&self, r: usize, head: u64) -> Result<usize, Fault> {
        let tail = self.seg.tail(r).load(Acquire);
        let avail = tail.wrapping_sub(head);
        if avail > self.seg.cap() as u64 {
            return Err(Fault::Corrupt(format!("incoming ring counters are corrupt (head {head}, tail {tail})")));
        }
        Ok(avail as usize)
    }

    fn copy_in(&self, pos: u64, src: &[u8]) {
        let (cap, r) = (self.seg.cap(), self.end);
        let off = (pos as usize) & (cap - 1);
        let first = src.len().min(cap - off);
        let data = self.seg.data(r);
        // SAFETY: [pos, pos + len) is free (the peer has read it: head, acquired) and inside
        // the ring once wrapped; the peer does not read it before `tail` is published.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), data.add(off), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), data, src.len() - first);
        }
    }

    /// After publishing a counter: whether the peer sleeps waiting for what it brings (`waits`;
    /// the flag is cleared, so that only one wake-up is sent per sleep).
    fn peer_sleeps(&self, waits: usize) -> bool {
        fence(SeqCst);
        let flag = self.seg.sleeping(1 - self.end, waits);
        flag.load(Relaxed) != 0 && flag.swap(0, SeqCst) != 0
    }
}

impl Drop for ShmEnd {
    fn drop(&mut self) {
        // The lent memory may be freed once this end is gone.
        self.revoke();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cap: usize) -> (ShmEnd, ShmEnd) {
        let mut created = Segment::create(cap).unwrap();
        let opened = Segment::open(&created.name()).unwrap();
        created.unlink();
        (ShmEnd::new(created, 0, true), ShmEnd::new(opened, 1, true))
    }

    #[test]
    fn bytes_cross_in_order_through_wrap_arounds() {
        let (mut a, mut b) = pair(MIN_RING);
        let sent: Vec<u8> = (0..5 * MIN_RING + 123).map(|i| (i * 7 % 251) as u8).collect();
        let (mut s, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 1000];
        while got.len() < sent.len() {
            let end = (s + 3001).min(sent.len());
            let (n, _) = a.write(&sent[s..end.min(s + 10)], &sent[(s + 10).min(end)..end]).unwrap();
            s += n;
            let (m, _) = b.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..m]);
        }
        assert_eq!(got, sent);
    }

    #[test]
    fn a_full_ring_takes_nothing_and_an_empty_one_gives_nothing() {
        let (mut a, mut b) = pair(MIN_RING);
        assert_eq!(a.write(&vec![1; MIN_RING + 5], &[]).unwrap().0, MIN_RING);
        assert_eq!(a.write(&[1], &[]).unwrap().0, 0);
        let mut buf = vec![0u8; 2 * MIN_RING];
        assert_eq!(b.read(&mut buf).unwrap().0, MIN_RING);
        assert_eq!(b.read(&mut buf).unwrap().0, 0);
        // The other direction is independent.
        assert_eq!(b.write(&[9, 8], &[7]).unwrap().0, 3);
        assert_eq!(a.read(&mut buf).unwrap(), (3, false));
        assert_eq!(&buf[..3], &[9, 8, 7]);
    }

    #[test]
    fn a_sleeper_is_woken_once_by_the_next_progress() {
        let (mut a, mut b) = pair(MIN_RING);
        let mut buf = [0u8; 4];
        assert_eq!(b.read(&mut buf).unwrap().0, 0);
        assert!(!b.arm(), "nothing arrived: block");
        assert_eq!(a.write(&[1], &[]).unwrap(), (1, true), "the writer must wake the sleeper");
        assert_eq!(a.write(&[2], &[]).unwrap(), (1, false), "one wake-up per sleep");
        assert_eq!(b.read(&mut buf).unwrap(), (2, false));
        // Data that arrives between the failed read and the arming: do not block.
        assert_eq!(b.read(&mut buf).unwrap().0, 0);
        a.write(&[3], &[]).unwrap();
        assert!(b.arm(), "data arrived before the flag: do not block");
        b.disarm();
        assert_eq!(a.write(&[4], &[]).unwrap(), (1, false));
        // A sleeper waiting for data is not woken by the peer reading (making room).
        let mut buf = [0u8; 8];
        assert_eq!(b.read(&mut buf).unwrap().0, 2);
        b.write(&[5], &[]).unwrap();
        assert_eq!(b.read(&mut buf).unwrap().0, 0);
        assert!(!b.arm());
        assert_eq!(a.read(&mut buf).unwrap(), (1, false), "reading makes room: b waits for data");
        assert_eq!(a.write(&[6], &[]).unwrap(), (1, true), "writing brings data: wake b");
        // Nothing waited for: nothing to arm, and never a reason not to block.
        let (mut c, _d) = pair(MIN_RING);
        assert!(!c.arm());
    }

    #[test]
    fn in_place_reads_hand_over_whole_aligned_elements_and_step_aside_otherwise() {
        let (mut a, mut b) = pair(MIN_RING);
        let mut seen = Vec::new();
        let take = |end: &mut ShmEnd, max: usize, elem: usize, seen: &mut Vec<u8>| {
            end.read_in_place(max, elem, &mut |s: &[u8]| seen.extend_from_slice(s)).unwrap().map(|(n, _)| n)
        };
        assert_eq!(take(&mut b, 64, 4, &mut seen), Some(0), "empty");
        a.write(&[1, 2, 3, 4, 5, 6], &[]).unwrap();
        assert_eq!(take(&mut b, 64, 4, &mut seen), Some(4), "one whole element of two bytes");
        assert_eq!(take(&mut b, 64, 4, &mut seen), None, "a partial element: read it instead");
        a.write(&[7, 8], &[]).unwrap();
        assert_eq!(take(&mut b, 64, 4, &mut seen), Some(4));
        assert_eq!(seen, [1, 2, 3, 4, 5, 6, 7, 8]);
        a.write(&[9], &[]).unwrap();
        assert_eq!(b.read(&mut [0u8; 1]).unwrap().0, 1);
        a.write(&[0; 8], &[]).unwrap();
        assert_eq!(take(&mut b, 64, 4, &mut seen), None, "misaligned: read it instead");
        // An element that wraps around is not handed over in place.
        let (mut a, mut b) = pair(MIN_RING);
        a.write(&vec![0; MIN_RING - 2], &[]).unwrap();
        assert_eq!(b.read(&mut vec![0; MIN_RING - 2]).unwrap().0, MIN_RING - 2);
        a.write(&[1, 2, 3, 4], &[]).unwrap();
        assert_eq!(take(&mut b, 64, 2, &mut seen), Some(2), "up to the end of the ring");
        assert_eq!(take(&mut b, 64, 2, &mut seen), Some(2), "then from its start");
        assert_eq!(&seen[seen.len() - 4..], &[1, 2, 3, 4]);
    }

    fn pair_lending(cap: usize, cma: bool) -> (ShmEnd, ShmEnd) {
        let mut created = Segment::create(cap).unwrap();
        let opened = Segment::open(&created.name()).unwrap();
        created.unlink();
        (ShmEnd::new(created, 0, cma), ShmEnd::new(opened, 1, cma))
    }

    /// Whether this kernel lets a process read its own memory through `process_vm_readv`
    /// (some sandboxes forbid it: the links then only use their rings).
    fn cma_allowed() -> bool {
        let x = [7u8; 8];
        cma::read(std::process::id() as i32, x.as_ptr() as u64, &mut [0u8; 8]).is_ok()
    }

    #[test]
    fn a_loan_follows_the_ring_bytes_and_precedes_later_ones() {
        let (mut a, mut b) = pair_lending(MIN_RING, true);
        if !cma_allowed() {
            assert!(!a.can_lend(), "no cross-memory attach here: nothing may be lent");
            return;
        }
        assert!(a.can_lend(), "end 1 probed end 0's memory when it opened the segment");
        let big: Vec<u8> = (0..3 * MIN_RING).map(|i| (i * 13 % 251) as u8).collect();
        assert_eq!(a.write(&[1, 2, 3], &[]).unwrap().0, 3);
        assert_eq!(a.lend(&big), Some((0, false)), "the ring holds bytes: no loan yet");
        let mut got = vec![0u8; 2];
        assert_eq!(b.read(&mut got).unwrap().0, 2);
        assert_eq!(a.lend(&big), Some((0, false)), "one ring byte still unread");
        let mut rest = vec![0u8; 10];
        assert_eq!(b.read(&mut rest).unwrap().0, 1, "the ring's byte before the lent ones");
        got.push(rest[0]);
        assert_eq!(a.lend(&big).unwrap().0, big.len());
        assert!(a.lending());
        assert_eq!(a.write(&[4], &[]).unwrap().0, 0, "nothing overtakes an open loan");
        let other = vec![9u8; MIN_RING];
        assert_eq!(a.lend(&other), Some((0, false)), "a loan elsewhere waits for this one");
        let (head, tail) = big.split_at(MIN_RING);
        let (mut a2, mut b2) = pair_lending(MIN_RING, true);
        assert_eq!(a2.lend(head).unwrap().0, MIN_RING);
        let mut part = vec![0u8; 100];
        assert_eq!(b2.read(&mut part).unwrap().0, 100);
        assert!(a2.extends(tail), "the bytes right after the open loan");
        assert_eq!(a2.lend(tail).unwrap().0, tail.len(), "extended while the reader copies");
        let mut all = part.clone();
        let mut piece = vec![0u8; 3 * MIN_RING];
        while a2.lending() {
            let (n, _) = b2.read(&mut piece).unwrap();
            all.extend_from_slice(&piece[..n]);
        }
        assert_eq!(all, big);
        let mut inplace = |_: &[u8]| panic!("lent bytes are not in the ring");
        assert_eq!(b.read_in_place(64, 4, &mut inplace).unwrap(), None, "lent bytes are read, not handed over");
        let mut piece = vec![0u8; MIN_RING + 5];
        while a.lending() {
            let (n, _) = b.read(&mut piece).unwrap();
            assert!(n > 0, "an open loan is always readable");
            got.extend_from_slice(&piece[..n]);
        }
        assert_eq!(a.write(&[4], &[]).unwrap().0, 1, "the loan copied: the ring again");
        let (n, _) = b.read(&mut piece).unwrap();
        got.extend_from_slice(&piece[..n]);
        let mut want = vec![1, 2, 3];
        want.extend_from_slice(&big);
        want.push(4);
        assert_eq!(got, want);
        // The other way round, once end 0 has probed end 1 (on its first read).
        assert!(!b.can_lend());
        assert_eq!(a.read(&mut [0u8; 1]).unwrap().0, 0);
        assert!(b.can_lend());
    }

    #[test]
    fn a_loan_taken_back_fails_the_reader_and_lending_off_at_either_end_means_rings() {
        let (mut a, mut b) = pair_lending(MIN_RING, true);
        if !cma_allowed() {
            return;
        }
        let big = vec![5u8; 2 * MIN_RING];
        assert_eq!(a.lend(&big).unwrap().0, big.len());
        let mut piece = vec![0u8; MIN_RING];
        assert_eq!(b.read(&mut piece).unwrap().0, MIN_RING);
        a.revoke();
        let e = b.read(&mut piece).unwrap_err();
        assert!(matches!(&e, Fault::Gone(s) if s.contains("took back")), "{e}");
        // A loan the reader is woken for: it sleeps, the lender wakes it.
        let (mut a, mut b) = pair_lending(MIN_RING, true);
        assert_eq!(b.read(&mut piece).unwrap().0, 0);
        assert!(!b.arm());
        assert_eq!(a.lend(&big), Some((big.len(), true)), "the lender must wake the sleeper");
        b.disarm();
        // Lending off at the reader: it never probes, so the writer may not lend.
        let (a, _b) = pair_lending(MIN_RING, false);
        assert!(!a.can_lend());
        let mut created = Segment::create(MIN_RING).unwrap();
        let opened = Segment::open(&created.name()).unwrap();
        created.unlink();
        let (mut a, _b) = (ShmEnd::new(created, 0, false), ShmEnd::new(opened, 1, true));
        assert!(!a.can_lend() && a.lend(&big).is_none(), "lending off at the writer");
    }

    #[test]
    fn corrupt_counters_and_bad_names_are_clear_errors() {
        let (a, mut b) = pair(MIN_RING);
        a.seg.tail(0).store(10 * MIN_RING as u64, Relaxed);
        let e = b.read(&mut [0u8; 8]).unwrap_err();
        assert!(matches!(&e, Fault::Corrupt(s) if s.contains("corrupt")), "{e}");
        for name in ["../etc/passwd", "warren-x/../../y", "other-file"] {
            let e = Segment::open(name).unwrap_err().to_string();
            assert!(e.contains("not a shared-memory segment name"), "{e}");
        }
        assert!(Segment::open("warren-0-nonexistent").is_err());
    }
}

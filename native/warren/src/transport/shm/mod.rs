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

mod segment;

pub(crate) use segment::{MAX_RING, MIN_RING, Segment};

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::fence;

/// The `sleeping` flag of an end that waits for data in its incoming ring.
const WAITS_DATA: usize = 0;
/// The `sleeping` flag of an end that waits for room in its outgoing ring.
const WAITS_ROOM: usize = 1;

/// One end of a shared-memory link: end 0 (the connector) writes ring 0 and reads ring 1,
/// end 1 the other way round.
#[derive(Debug)]
pub(crate) struct ShmEnd {
    seg: Segment,
    end: usize,
    /// The last read found nothing (data is what this end waits for).
    want_read: bool,
    /// The last write found the ring full (room is what this end waits for).
    want_write: bool,
}

impl ShmEnd {
    /// End `end` (0 or 1) of the link in `seg`.
    pub(crate) fn new(seg: Segment, end: usize) -> ShmEnd {
        assert!(end < 2, "a link has two ends");
        ShmEnd { seg, end, want_read: false, want_write: false }
    }

    /// Copies what is available (up to `buf.len()` bytes) out of the incoming ring. Returns
    /// the bytes read and whether the peer sleeps and must be woken. An error if the peer left
    /// the counters in an impossible state.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<(usize, bool), String> {
        let r = 1 - self.end;
        let (cap, head) = (self.seg.cap(), self.seg.head(r).load(Relaxed));
        let avail = self.available(r, head)?;
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
    /// element, or one that wraps around): then [`ShmEnd::read`] them.
    pub(crate) fn read_in_place(
        &mut self,
        max: usize,
        elem: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<Option<(usize, bool)>, String> {
        let r = 1 - self.end;
        let (cap, head) = (self.seg.cap(), self.seg.head(r).load(Relaxed));
        let avail = self.available(r, head)?;
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
    pub(crate) fn write(&mut self, a: &[u8], b: &[u8]) -> Result<(usize, bool), String> {
        let r = self.end;
        let (cap, tail) = (self.seg.cap(), self.seg.tail(r).load(Relaxed));
        let head = self.seg.head(r).load(Acquire);
        let used = tail.wrapping_sub(head);
        if used > cap as u64 {
            return Err(format!("outgoing ring counters are corrupt (head {head}, tail {tail})"));
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
    /// for (data, or room) has arrived meanwhile, in which case it should not block. Forgets
    /// what it waited for: the next reads and writes say it again.
    pub(crate) fn arm(&mut self) -> bool {
        if !self.want_read && !self.want_write {
            return false;
        }
        self.seg.sleeping(self.end, WAITS_DATA).store(u32::from(self.want_read), SeqCst);
        self.seg.sleeping(self.end, WAITS_ROOM).store(u32::from(self.want_write), SeqCst);
        fence(SeqCst);
        let (r, w) = (1 - self.end, self.end);
        let data = self.want_read && self.seg.tail(r).load(Acquire) != self.seg.head(r).load(Relaxed);
        let room = self.want_write
            && self.seg.tail(w).load(Relaxed).wrapping_sub(self.seg.head(w).load(Acquire)) < self.seg.cap() as u64;
        self.want_read = false;
        self.want_write = false;
        data || room
    }

    /// Awake again: the peer need not wake this end any more.
    pub(crate) fn disarm(&self) {
        self.seg.sleeping(self.end, WAITS_DATA).store(0, Relaxed);
        self.seg.sleeping(self.end, WAITS_ROOM).store(0, Relaxed);
    }

    /// Bytes published by the peer in ring `r` and not read yet.
    fn available(&self, r: usize, head: u64) -> Result<usize, String> {
        let tail = self.seg.tail(r).load(Acquire);
        let avail = tail.wrapping_sub(head);
        if avail > self.seg.cap() as u64 {
            return Err(format!("incoming ring counters are corrupt (head {head}, tail {tail})"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cap: usize) -> (ShmEnd, ShmEnd) {
        let mut created = Segment::create(cap).unwrap();
        let opened = Segment::open(&created.name()).unwrap();
        created.unlink();
        (ShmEnd::new(created, 0), ShmEnd::new(opened, 1))
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

    #[test]
    fn corrupt_counters_and_bad_names_are_clear_errors() {
        let (a, mut b) = pair(MIN_RING);
        a.seg.tail(0).store(10 * MIN_RING as u64, Relaxed);
        let e = b.read(&mut [0u8; 8]).unwrap_err();
        assert!(e.contains("corrupt"), "{e}");
        for name in ["../etc/passwd", "warren-x/../../y", "other-file"] {
            let e = Segment::open(name).unwrap_err().to_string();
            assert!(e.contains("not a shared-memory segment name"), "{e}");
        }
        assert!(Segment::open("warren-0-nonexistent").is_err());
    }
}

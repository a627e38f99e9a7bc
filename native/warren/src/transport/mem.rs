//! The in-memory transport: links between workers that are threads of one process
//! (`WARREN_TRANSPORT=mem`), for tests and simulations of many workers. No socket is involved:
//! a worker's listener is an entry in this process's switchboard, named by a number it
//! advertises to the tracker as its port (host `mem`); a link is a pair of bounded byte
//! queues. The robust protocol above runs unchanged: the tracker, rendezvous, re-links and
//! recovery are the real ones, and so are the failures: a worker whose communicator is
//! dropped (its thread ended, or a test "killed" it) closes its links, and its peers see the
//! peer lost exactly as over TCP.
//!
//! Waiting: a link has no readiness a poll could watch, so before its waiter blocks, each
//! end hands the waiter's [`mio::Waker`] to its queues ([`MemEnd::arm`]); a write wakes the
//! reader that armed, a read wakes an armed writer (space freed), and the end of a link wakes
//! both. Like an edge-triggered poll, arming reports only what changed since the end last
//! looked (bytes written, bytes taken, the end of the link), not bytes that wait unread: the
//! algorithm may not want them yet. Spurious wake-ups only cost one more round of I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::error::{Error, Result};

/// The host a worker on the in-memory transport advertises.
pub const MEM_HOST: &str = "mem";

/// One direction of a link: a bounded byte queue, who to wake, and whether either end is gone.
#[derive(Debug)]
struct Queue {
    state: Mutex<QueueState>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct QueueState {
    bytes: VecDeque<u8>,
    /// Bytes ever written into the queue.
    written: u64,
    /// Bytes ever taken out of it.
    taken: u64,
    /// Why the link ended (an end was dropped or closed), once it has.
    gone: Option<&'static str>,
    /// The waker of the reading end while it is armed.
    reader: Option<Arc<mio::Waker>>,
    /// The waker of the writing end while it is armed.
    writer: Option<Arc<mio::Waker>>,
}

impl Queue {
    fn new(capacity: usize) -> Arc<Queue> {
        Arc::new(Queue { state: Mutex::new(QueueState::default()), capacity })
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn end(&self, why: &'static str) {
        let mut s = self.lock();
        s.gone.get_or_insert(why);
        for w in [s.reader.take(), s.writer.take()].into_iter().flatten() {
            let _ = w.wake();
        }
    }
}

/// This worker's end of an in-memory link: it writes into `tx` and reads from `rx`.
#[derive(Debug)]
pub struct MemEnd {
    tx: Arc<Queue>,
    rx: Arc<Queue>,
    /// What this end saw when it last looked: `rx`'s bytes written, `tx`'s bytes taken, and
    /// whether the link had ended.
    seen: (u64, u64, bool),
}

impl MemEnd {
    /// Two connected ends whose queues hold up to `capacity` bytes each way.
    pub fn pair(capacity: usize) -> (MemEnd, MemEnd) {
        let (a, b) = (Queue::new(capacity), Queue::new(capacity));
        let seen = (0, 0, false);
        (MemEnd { tx: a.clone(), rx: b.clone(), seen }, MemEnd { tx: b, rx: a, seen })
    }

    /// Reads what is there into `buf`: `Ok(0)` if nothing is; `Err(reason)` once the queue is
    /// drained and the link has ended.
    pub fn read(&self, buf: &mut [u8]) -> std::result::Result<usize, &'static str> {
        let mut s = self.rx.lock();
        let n = buf.len().min(s.bytes.len());
        if n == 0 {
            return match s.gone {
                Some(why) if !buf.is_empty() => Err(why),
                _ => Ok(0),
            };
        }
        let (a, b) = s.bytes.as_slices();
        let from_a = n.min(a.len());
        buf[..from_a].copy_from_slice(&a[..from_a]);
        buf[from_a..n].copy_from_slice(&b[..n - from_a]);
        s.bytes.drain(..n);
        s.taken += n as u64;
        if let Some(w) = s.writer.take() {
            let _ = w.wake();
        }
        Ok(n)
    }

    /// Writes what fits of `a` then `b`: `Ok(0)` if the queue is full; `Err(reason)` once the
    /// link has ended.
    pub fn write(&self, a: &[u8], b: &[u8]) -> std::result::Result<usize, &'static str> {
        let mut s = self.tx.lock();
        if let Some(why) = s.gone {
            return Err(why);
        }
        let room = self.tx.capacity - s.bytes.len();
        let from_a = a.len().min(room);
        let from_b = b.len().min(room - from_a);
        s.bytes.extend(&a[..from_a]);
        s.bytes.extend(&b[..from_b]);
        s.written += (from_a + from_b) as u64;
        if from_a + from_b > 0 {
            if let Some(w) = s.reader.take() {
                let _ = w.wake();
            }
        }
        Ok(from_a + from_b)
    }

    /// Before its waiter blocks: asks to be woken by `waker` when bytes arrive, space frees up
    /// or the link ends. Returns whether any of that happened since this end last looked
    /// (then the waiter must not block).
    pub fn arm(&mut self, waker: &Arc<mio::Waker>) -> bool {
        let taken = {
            let mut s = self.tx.lock();
            s.writer = Some(waker.clone());
            s.taken
        };
        let mut s = self.rx.lock();
        s.reader = Some(waker.clone());
        let now = (s.written, taken, s.gone.is_some());
        drop(s);
        std::mem::replace(&mut self.seen, now) != now
    }

    /// After its waiter woke: takes the wake-up requests back, and notes what it has seen.
    pub fn disarm(&mut self) {
        let taken = {
            let mut s = self.tx.lock();
            s.writer = None;
            s.taken
        };
        let mut s = self.rx.lock();
        s.reader = None;
        self.seen = (s.written, taken, s.gone.is_some());
    }

    /// Whether the link has ended (an end was dropped or closed).
    pub fn is_gone(&self) -> bool {
        self.tx.lock().gone.is_some()
    }

    /// Ends the link both ways: the peer's reads fail once drained, its writes at once.
    pub fn close(&self) {
        self.tx.end("closed the connection");
        self.rx.end("closed the connection");
    }
}

impl Drop for MemEnd {
    fn drop(&mut self) {
        self.close();
    }
}

/// What a connecting worker hands the listener it connects to.
#[derive(Debug)]
pub struct MemConnect {
    /// The connector's rank.
    pub rank: usize,
    /// The job secret the connector holds (both ends live in one process: the acceptor
    /// compares it with its own).
    pub secret: Vec<u8>,
    /// The acceptor's end of the new link.
    pub end: MemEnd,
}

/// A listener's queue of connections not yet accepted.
#[derive(Debug, Default)]
struct Backlog {
    pending: Mutex<VecDeque<MemConnect>>,
    arrived: Condvar,
    closed: AtomicBool,
}

/// The process's listeners on the in-memory transport, by the number each advertises.
fn switchboard() -> MutexGuard<'static, HashMap<u16, Arc<Backlog>>> {
    static BOARD: OnceLock<Mutex<HashMap<u16, Arc<Backlog>>>> = OnceLock::new();
    BOARD.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// A worker's listener on the in-memory transport; removed from the switchboard on drop.
#[derive(Debug)]
pub struct MemListener {
    /// The number peers connect to (advertised as the listener's port).
    pub port: u16,
    backlog: Arc<Backlog>,
}

impl MemListener {
    /// Takes a free number in the switchboard.
    pub fn bind() -> Result<MemListener> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let mut board = switchboard();
        for _ in 0..u16::MAX {
            let port = (NEXT.fetch_add(1, Ordering::Relaxed) % u32::from(u16::MAX)) as u16 + 1;
            if let std::collections::hash_map::Entry::Vacant(v) = board.entry(port) {
                let backlog = Arc::new(Backlog::default());
                v.insert(backlog.clone());
                return Ok(MemListener { port, backlog });
            }
        }
        Err(Error::Config(format!(
            "the in-memory transport has no free listener left: this process already runs {} workers on it",
            u16::MAX
        )))
    }

    /// The next connection, waiting until `deadline`; `None` if none came by then.
    pub fn accept(&self, deadline: Instant) -> Option<MemConnect> {
        let mut pending = self.backlog.pending.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(c) = pending.pop_front() {
                return Some(c);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            pending = self.backlog.arrived.wait_timeout(pending, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

impl Drop for MemListener {
    fn drop(&mut self) {
        self.backlog.closed.store(true, Ordering::Release);
        switchboard().remove(&self.port);
        // Connections never accepted end here: their connectors see the link end.
        self.backlog.pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Connects to the listener advertised as `port`, as rank `rank` holding `secret`, with
/// queues of `capacity` bytes each way: this worker's end of the link (the acceptor may still
/// refuse it, which ends the link). An error if no listener of this process has that number:
/// the peer is gone, or it does not run in this process on the in-memory transport.
pub fn connect(port: u16, rank: usize, secret: &[u8], capacity: usize) -> Result<MemEnd> {
    let backlog = switchboard().get(&port).cloned();
    let Some(backlog) = backlog.filter(|b| !b.closed.load(Ordering::Acquire)) else {
        return Err(Error::io(
            format!("connecting to the in-memory listener {MEM_HOST}:{port}"),
            std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "no worker of this process listens there (WARREN_TRANSPORT=mem links only the threads of one process)",
            ),
        ));
    };
    let (mine, theirs) = MemEnd::pair(capacity);
    backlog.pending.lock().unwrap_or_else(|e| e.into_inner()).push_back(MemConnect {
        rank,
        secret: secret.to_vec(),
        end: theirs,
    });
    backlog.arrived.notify_one();
    Ok(mine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_in_order_within_the_capacity_and_the_end_is_seen_after_them() {
        let (a, b) = MemEnd::pair(8);
        assert_eq!(a.write(b"hello", b" world"), Ok(8));
        assert_eq!(a.write(b"more", b""), Ok(0), "a full queue takes nothing");
        let mut buf = [0u8; 16];
        assert_eq!(b.read(&mut buf), Ok(8));
        assert_eq!(&buf[..8], b"hello wo");
        assert_eq!(b.read(&mut buf), Ok(0));
        assert_eq!(a.write(b"rld", b""), Ok(3));
        drop(a);
        assert_eq!(b.read(&mut buf), Ok(3), "bytes written before the end are still read");
        assert_eq!(b.read(&mut buf), Err("closed the connection"));
        assert_eq!(b.write(b"x", b""), Err("closed the connection"));
    }

    #[test]
    fn an_armed_end_is_woken_by_a_write_and_by_the_end_of_the_link() {
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let (a, b) = MemEnd::pair(64);
        let mut b = b;
        assert!(!b.arm(&waker), "nothing there yet");
        a.write(b"x", b"").unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut poll = poll;
        poll.poll(&mut events, Some(std::time::Duration::from_secs(5))).unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(7)));
        b.disarm();
        assert!(!b.arm(&waker), "an unread byte seen before does not wake again");
        b.disarm();
        a.write(b"y", b"").unwrap();
        assert!(b.arm(&waker), "a byte written since the last look: do not block");
        b.disarm();
        let mut buf = [0u8; 2];
        b.read(&mut buf).unwrap();
        assert!(!b.arm(&waker));
        drop(a);
        poll.poll(&mut events, Some(std::time::Duration::from_secs(5))).unwrap();
        assert!(events.iter().any(|e| e.token() == mio::Token(7)));
    }

    #[test]
    fn a_connection_reaches_its_listener_and_a_closed_listener_is_an_error() {
        let l = MemListener::bind().unwrap();
        let mine = connect(l.port, 3, b"s", 16).unwrap();
        let c = l.accept(Instant::now()).expect("the connection is waiting");
        assert_eq!((c.rank, c.secret.as_slice()), (3, &b"s"[..]));
        mine.write(b"ab", b"").unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(c.end.read(&mut buf), Ok(2));
        let port = l.port;
        drop(l);
        let e = connect(port, 3, b"s", 16).unwrap_err();
        assert!(e.to_string().contains("WARREN_TRANSPORT=mem links only the threads of one process"), "{e}");
    }
}

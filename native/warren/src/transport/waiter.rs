//! The readiness loop's wait: busy-poll briefly, spin yielding the core, then block in `epoll`.
//!
//! A rank that waits for a peer first re-tries its links for `spin` (a 4-byte round trip on
//! loopback is ~10 µs when the receiver is awake and ~100 µs when it must be woken), then
//! sleeps in `epoll_wait` until a link is ready or the deadline passes. During the first
//! `busy` of the spin it re-tries without giving up the core (a shared-memory round trip
//! then costs about a microsecond, not a context switch); after that it yields the core
//! between tries so that oversubscribed workers still make progress (the communicator turns
//! `busy` off when its host runs more workers than it has CPUs). Shared-memory links have no
//! readiness of their own: before blocking, each asks its peer for a wake-up (a byte on its
//! socket) and says whether its data arrived meanwhile; after, each reads its socket for
//! wake-ups and for the peer's end (a dead peer's socket closes, which wakes `epoll_wait`).
//! In-memory links have no socket at all: their queues wake the waiter through its waker
//! (the one cancellation wakes too), which is all a spurious wake-up costs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::Link;
use crate::cancel::CancelHandle;
use crate::error::{Error, Result};
use crate::liveness::Watch;

/// The token of the waker of cancellation and in-memory links (link tokens are peer ranks).
const WAKER: Token = Token(usize::MAX);

/// Waits for readiness of a set of links with a spin-then-block strategy.
pub struct Waiter {
    poll: Poll,
    events: Events,
    /// Wakes the poll: on cancellation, and from in-memory links.
    waker: Arc<mio::Waker>,
    spin: Duration,
    busy: Duration,
    idle_since: Option<Instant>,
    cancel: CancelHandle,
    /// Stall reports and fence notices ([`Watch`]), if set.
    watch: Option<Arc<Watch>>,
    /// Stall reports made since the last progress.
    reports: u32,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").field("spin", &self.spin).field("busy", &self.busy).finish()
    }
}

impl Waiter {
    /// A waiter that spins for `spin` before blocking, and whose waits `cancel` ends (the
    /// wait in progress is woken; this and every later wait fail with [`Error::Aborted`]).
    pub fn new(spin: Duration, cancel: &CancelHandle) -> Result<Waiter> {
        let poll = Poll::new().map_err(|e| Error::io("creating epoll instance", e))?;
        let waker = mio::Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating a waker", e))?;
        let waker = Arc::new(waker);
        cancel.attach_waker(waker.clone());
        Ok(Waiter {
            poll,
            events: Events::with_capacity(64),
            waker,
            spin,
            busy: Duration::ZERO,
            idle_since: None,
            cancel: cancel.clone(),
            watch: None,
            reports: 0,
        })
    }

    /// Spins for `spin` before blocking (zero: blocks at once).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
        self.busy = self.busy.min(spin);
    }

    /// Polls without yielding the core for the first `busy` of each spin (at most the spin).
    pub fn set_busy_poll(&mut self, busy: Duration) {
        self.busy = busy.min(self.spin);
    }

    /// Reports stalls to `watch`, and ends a wait with a lost peer when it holds a fence
    /// notice (the heartbeat thread wakes the wait through the cancellation waker).
    pub fn set_watch(&mut self, watch: Arc<Watch>) {
        self.watch = Some(watch);
    }

    /// Registers a link (its token is its peer rank). A shared-memory link's socket only
    /// ever brings wake-ups and the peer's end: its writability (after each wake-up byte it
    /// sent) would only wake this waiter for nothing. An in-memory link has nothing to
    /// register: it wakes the waiter through its waker.
    pub fn register(&self, link: &mut Link) -> Result<()> {
        let peer = link.peer;
        let interest = match link.transport() {
            super::Transport::Tcp => Interest::READABLE | Interest::WRITABLE,
            super::Transport::Shm => Interest::READABLE,
            super::Transport::Mem => return Ok(()),
        };
        let Some(source) = link.source() else { return Ok(()) };
        self.poll
            .registry()
            .register(source, Token(peer), interest)
            .map_err(|e| Error::io(format!("registering link to rank {peer}"), e))
    }

    /// Removes a link from the set.
    pub fn deregister(&self, link: &mut Link) {
        if let Some(source) = link.source() {
            let _ = self.poll.registry().deregister(source);
        }
    }

    /// Tells the waiter that the last round of I/O moved data (resets the spin budget). Fails
    /// with [`Error::Aborted`] once cancelled (one relaxed atomic load).
    pub fn progressed(&mut self) -> Result<()> {
        self.idle_since = None;
        if self.reports > 0 {
            self.reports = 0;
            if let Some(w) = &self.watch {
                w.resolved();
            }
        }
        self.cancel.check()
    }

    /// Called after a round of I/O that moved nothing: spins or blocks until something may be
    /// ready. Fails with a timeout naming `waiting_for()` once `deadline` has passed, and
    /// with [`Error::Aborted`] once cancelled. With a [`Watch`], a long wait is reported as a
    /// stall, and a fenced peer ends it ([`Error::PeerLost`]). `links` are the links waited on
    /// (those over shared memory are armed before blocking and checked after).
    pub fn wait(
        &mut self,
        deadline: Instant,
        started: Instant,
        waiting_for: impl Fn() -> String,
        links: &mut [Option<Link>],
    ) -> Result<()> {
        self.cancel.check()?;
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout { what: waiting_for(), after: now - started });
        }
        let idle_since = *self.idle_since.get_or_insert(now);
        if now - idle_since < self.busy {
            std::hint::spin_loop();
            return Ok(());
        }
        if now - idle_since < self.spin {
            std::thread::yield_now();
            return Ok(());
        }
        let mut timeout = deadline - now;
        if let Some(w) = &self.watch {
            if let Some(look_again) = w.on_idle(now - idle_since, &mut self.reports, &waiting_for)? {
                timeout = timeout.min(look_again);
            }
        }
        let mut ready = false;
        for l in links.iter_mut().flatten() {
            ready |= l.arm(&self.waker);
        }
        let polled = if ready { Ok(()) } else { self.poll.poll(&mut self.events, Some(timeout)) };
        links.iter_mut().flatten().for_each(Link::woke);
        match polled {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(Error::io("waiting for links", e)),
        }
    }
}

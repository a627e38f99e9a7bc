//! Cancelling a communicator from another thread.
//!
//! A [`CancelHandle`] is a cheap, cloneable, `Send + Sync` handle to one communicator. Its
//! [`cancel`](CancelHandle::cancel) sets an atomic flag and wakes whatever the communicator's
//! thread is blocked in:
//! - a collective's wait on its links (the `epoll` of the collective runtime's `transport::Waiter`): through
//!   a `mio::Waker` registered in that poll; the spinning phase reads the flag;
//! - a blocking read from the tracker (registration, a re-link round waiting for a
//!   replacement): the tracker socket is shut down (`shutdown(Both)` on a duplicate of its
//!   descriptor), so the read returns at once, and the tracker sees this worker leave;
//! - linking to the peers: the set-up polls the flag while it waits for a peer to connect.
//!
//! The plain call path pays one relaxed atomic load per wait that found nothing to do (never
//! per byte moved), so an allreduce costs the same as without it.
//!
//! Once cancelled, the running call and every later call fail with [`Error::Aborted`] naming
//! this worker, and the communicator closes its links, so its peers fail as for a lost peer
//! (or, in robust mode, wait for a replacement of this worker).

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

pub use crate::error::NO_RANK;

/// A thread-safe handle that cancels one communicator's running and future calls.
#[derive(Clone)]
pub struct CancelHandle {
    shared: Arc<Shared>,
}

struct Shared {
    cancelled: AtomicBool,
    /// The communicator's rank once it has one ([`NO_RANK`] before).
    rank: AtomicUsize,
    wake: Mutex<Wake>,
    /// Notified on cancellation, for [`CancelHandle::pause`].
    cancelled_signal: Condvar,
}

/// What `cancel` wakes, and why it was cancelled.
#[derive(Default)]
struct Wake {
    reason: Option<String>,
    /// Cancelled because the tracker fenced this worker (or it lost the tracker).
    fenced: bool,
    waker: Option<std::sync::Arc<mio::Waker>>,
    tracker: Option<TcpStream>,
}

impl Default for CancelHandle {
    fn default() -> CancelHandle {
        CancelHandle::new()
    }
}

impl std::fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelHandle").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancelHandle {
    /// A handle that is not cancelled, attached to no communicator yet: pass it to
    /// `Communicator::init_cancellable` (in `warren`) to be able to cancel the join too. One
    /// handle serves one communicator.
    pub fn new() -> CancelHandle {
        let shared = Shared {
            cancelled: AtomicBool::new(false),
            rank: AtomicUsize::new(NO_RANK),
            wake: Mutex::new(Wake::default()),
            cancelled_signal: Condvar::new(),
        };
        CancelHandle { shared: Arc::new(shared) }
    }

    /// Cancels the communicator: its running call (on another thread) returns
    /// [`Error::Aborted`] promptly (well under 100 ms), and so does every later call. The first
    /// `reason` is kept and carried by the errors. Idempotent; never blocks on the
    /// communicator's thread.
    pub fn cancel(&self, reason: &str) {
        self.end(reason, false);
    }

    /// Cancels because this worker was fenced (see the collective runtime's `liveness`): like
    /// [`cancel`](Self::cancel), but the calls fail with [`Error::Fenced`].
    pub fn fence(&self, reason: &str) {
        log::error!(target: "warren::engine", "fenced: {reason}");
        self.end(reason, true);
    }

    /// Wakes a wait in progress without cancelling (it looks at the communicator's watch).
    pub fn wake(&self) {
        if let Some(waker) = &self.lock().waker {
            let _ = waker.wake();
        }
    }

    fn end(&self, reason: &str, fenced: bool) {
        let mut w = self.lock();
        if self.shared.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        w.reason = Some(reason.to_string());
        w.fenced = fenced;
        if let Some(waker) = &w.waker {
            let _ = waker.wake();
        }
        if let Some(s) = w.tracker.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.shared.cancelled_signal.notify_all();
    }

    /// Sleeps for `d`, or less if cancelled meanwhile: then (or if already cancelled) the
    /// cancellation's error.
    pub fn pause(&self, d: Duration) -> Result<()> {
        let until = Instant::now() + d;
        let mut w = self.lock();
        while !self.is_cancelled() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            w = self.shared.cancelled_signal.wait_timeout(w, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(w);
        Err(self.error())
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Relaxed)
    }

    /// Why the tracker fenced this worker (or why it took itself for cut off), once it was;
    /// `None` while it was not fenced (even if cancelled for another reason). Whoever runs the
    /// worker polls it to end a task whose thread is busy outside Warren's calls.
    pub fn fenced(&self) -> Option<String> {
        if !self.is_cancelled() {
            return None;
        }
        let w = self.lock();
        w.fenced.then(|| w.reason.clone().unwrap_or_default())
    }

    /// `Err(Aborted)` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() { Err(self.error()) } else { Ok(()) }
    }

    /// The error of a cancelled call.
    pub(crate) fn error(&self) -> Error {
        let w = self.lock();
        let reason = w.reason.clone().unwrap_or_default();
        if w.fenced {
            return Error::Fenced(reason);
        }
        Error::Aborted { rank: self.shared.rank.load(Ordering::Relaxed), reason: format!("cancelled: {reason}") }
    }

    /// `e`, or the cancellation error if the call failed because it was cancelled (a shut
    /// down tracker socket, a woken wait).
    pub fn explain(&self, e: Error) -> Error {
        if self.is_cancelled() { self.error() } else { e }
    }

    /// Records the rank of the communicator this handle cancels, for its messages.
    pub fn set_rank(&self, rank: usize) {
        self.shared.rank.store(rank, Ordering::Relaxed);
    }

    /// Wakes `waker`'s poll on cancellation (at once if already cancelled).
    pub fn attach_waker(&self, waker: std::sync::Arc<mio::Waker>) {
        let mut w = self.lock();
        if self.is_cancelled() {
            let _ = waker.wake();
        }
        w.waker = Some(waker);
    }

    /// Shuts `tracker` down on cancellation (at once if already cancelled), so that a thread
    /// blocked reading from it returns.
    pub fn watch_tracker(&self, tracker: &TcpStream) {
        let Ok(dup) = tracker.try_clone() else { return };
        let mut w = self.lock();
        if self.is_cancelled() {
            let _ = dup.shutdown(Shutdown::Both);
            return;
        }
        w.tracker = Some(dup);
    }

    /// Lets go of the waker and the tracker socket (the communicator is gone): a clone of
    /// this handle that outlives it must not keep its tracker connection open.
    pub fn detach(&self) {
        let mut w = self.lock();
        w.waker = None;
        w.tracker = None;
    }

    fn lock(&self) -> MutexGuard<'_, Wake> {
        // Nothing panics while holding it; a poisoned lock still holds valid data.
        self.shared.wake.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn a_handle_is_shared_across_threads_and_the_first_reason_wins() {
        assert_send_sync::<CancelHandle>();
        let h = CancelHandle::new();
        assert!(h.check().is_ok());
        let other = h.clone();
        std::thread::spawn(move || other.cancel("first")).join().unwrap();
        h.cancel("second");
        assert!(h.is_cancelled());
        match h.check() {
            Err(Error::Aborted { rank: NO_RANK, reason }) => assert_eq!(reason, "cancelled: first"),
            other => panic!("expected Aborted, got {other:?}"),
        }
        h.set_rank(3);
        assert!(matches!(h.explain(Error::Protocol("x".into())), Error::Aborted { rank: 3, .. }));
        assert_eq!(h.fenced(), None, "cancelled, not fenced");
    }

    #[test]
    fn a_fence_is_told_apart_from_a_cancel_and_its_reason_kept() {
        let h = CancelHandle::new();
        assert_eq!(h.fenced(), None);
        h.fence("no heartbeat for 3.1s");
        h.cancel("later");
        assert_eq!(h.fenced().as_deref(), Some("no heartbeat for 3.1s"));
        assert!(matches!(h.check(), Err(Error::Fenced(r)) if r == "no heartbeat for 3.1s"));
    }

    #[test]
    fn cancelling_shuts_a_watched_socket_so_a_blocked_read_returns() {
        use std::io::Read;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _server = l.accept().unwrap();
        let h = CancelHandle::new();
        h.watch_tracker(&client);
        let canceller = h.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            canceller.cancel("test");
        });
        let started = std::time::Instant::now();
        let n = client.read(&mut [0u8; 8]).unwrap_or(0);
        assert_eq!(n, 0);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        t.join().unwrap();
    }
}

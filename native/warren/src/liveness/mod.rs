//! Liveness of a worker beyond crashes: stall reports and heartbeats.
//!
//! A crashed worker closes its sockets and its peers know at once; a paused, frozen or cut-off
//! one does not (its kernel still acknowledges TCP). So:
//! - the [`Watch`], shared by a communicator's calls and its heartbeat thread: a call that has
//!   waited [`crate::config::keys::STALL_WARN_S`] without progress records a stall naming the
//!   ranks it waits for (logged here, and sent to the tracker with the next heartbeat); the
//!   heartbeat thread leaves there the tracker's notice that a peer was fenced, which ends the
//!   call's wait with [`Error::PeerLost`] so that the worker re-links without that peer;
//! - `heartbeat` (the I/O): a thread with its own tracker connection that sends a heartbeat
//!   every sixth of the tracker's peer timeout (carrying the stall report) and fences its own worker (through its
//!   [`crate::CancelHandle`]) when the tracker says so or stops answering;
//! - `stall` (pure): the ranks a wait's description names, and the report's wording;
//! - [`crate::pause`] (pure, its own module): time a process did not run itself
//!   ([`overslept`]), which every liveness watch (this one, the tracker's, the master's, a
//!   parameter server's) discounts from the silence it blames on others.

mod heartbeat;
mod stall;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::pause::{excused, overslept};
pub(crate) use heartbeat::{Heartbeat, Pulse};
pub use stall::ranks_named;

use crate::error::{Error, Result};
use crate::tracker::proto::{PeerAddr, Stall};

/// The engine's log target (stall reports are the engine's records).
const LOG: &str = "warren::engine";

/// What a communicator's calls and its heartbeat thread share.
#[derive(Debug)]
pub struct Watch {
    stall_warn: Option<Duration>,
    /// Set when `notice` holds a fenced peer (read on every idle wait: one relaxed load).
    pending: AtomicBool,
    /// Set by failure injection (`WARREN_MOCK` `,cut`): the heartbeat thread neither sends
    /// nor reads, as behind a link to the tracker that drops every packet.
    cut: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The stall being reported, if the current call waits without progress.
    stall: Option<Stall>,
    /// Reports made so far (each new one gets the next number).
    reports: u64,
    /// A peer the tracker fenced: its rank, task id, the tracker's reason, and the link
    /// round it was fenced in.
    notice: Option<(usize, String, String, u64)>,
    /// Every rank's address, task id and process id, to name them in reports.
    peers: Arc<[PeerAddr]>,
    /// The link round of `peers`.
    round: u64,
}

impl Watch {
    /// A watch that reports stalls after `stall_warn` without progress (never with `None`).
    pub fn new(stall_warn: Option<Duration>) -> Watch {
        Watch {
            stall_warn,
            pending: AtomicBool::new(false),
            cut: AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Nothing panics while holding it; a poisoned lock still holds valid data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The members' addresses, task ids and process ids in link round `round` (from the
    /// tracker's assignment).
    pub(crate) fn set_peers(&self, peers: Arc<[PeerAddr]>, round: u64) {
        let mut inner = self.lock();
        inner.peers = peers;
        inner.round = round;
    }

    /// A wait found nothing to do after `idle` without progress; `made` counts the reports of
    /// this wait so far. Fails with [`Error::PeerLost`] if the tracker fenced a peer;
    /// reports a stall each time `idle` passes another `stall_warn`. Returns how long the wait
    /// may block before it should look again (`None`: no limit from here).
    pub fn on_idle(
        &self,
        idle: Duration,
        made: &mut u32,
        waiting_for: &dyn Fn() -> String,
    ) -> Result<Option<Duration>> {
        if self.pending.load(Ordering::Relaxed) {
            let mut inner = self.lock();
            self.pending.store(false, Ordering::Relaxed);
            // A fence in an earlier round was already dealt with: that rank was replaced since.
            let now = inner.round;
            if let Some((rank, task, reason, _)) = inner.notice.take().filter(|n| n.3 >= now) {
                return Err(Error::PeerLost { rank, task: Some(task), reason });
            }
        }
        let Some(every) = self.stall_warn else { return Ok(None) };
        let due = every * (*made + 1);
        if idle < due {
            return Ok(Some(due - idle));
        }
        *made += 1;
        self.report(idle, &waiting_for());
        Ok(Some(every))
    }

    /// Records and logs a stall of `idle` in the call `call` describes.
    fn report(&self, idle: Duration, call: &str) {
        let mut inner = self.lock();
        let ranks = ranks_named(call);
        let who = stall::identities(&ranks, &inner.peers);
        log::warn!(target: LOG, "stalled: no progress for {idle:.1?} in {call}; waiting for {who}");
        inner.reports += 1;
        let seq = inner.reports;
        inner.stall = Some(Stall { seq, call: call.to_string(), waited_ms: idle.as_millis() as u64, ranks });
    }

    /// The call made progress again: the stall (if any) is over.
    pub fn resolved(&self) {
        self.lock().stall = None;
    }

    /// The stall to report with the next heartbeat.
    pub(crate) fn stall(&self) -> Option<Stall> {
        self.lock().stall.clone()
    }

    /// The tracker fenced the worker of `rank` when `round` link rounds were complete: the
    /// next idle wait in that round fails with a lost peer.
    pub(crate) fn peer_fenced(&self, rank: usize, task: String, reason: String, round: u64) {
        self.lock().notice = Some((rank, task, format!("fenced by the tracker: {reason}"), round));
        self.pending.store(true, Ordering::Relaxed);
    }

    /// Cuts this worker off from the tracker (failure injection): from now on its heartbeat
    /// thread sends nothing and reads nothing, so both sides fence it after the peer timeout.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Whether [`cut`](Self::cut) was called.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// Forgets a fence notice (the worker is re-linking anyway).
    pub(crate) fn clear_notice(&self) {
        self.lock().notice = None;
        self.pending.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(rank: usize) -> PeerAddr {
        PeerAddr {
            rank,
            task_id: format!("t{rank}"),
            host: "10.0.0.9".into(),
            port: 1,
            pid: 40 + rank as u32,
            host_id: String::new(),
            placed_on: String::new(),
        }
    }

    #[test]
    fn a_stall_is_reported_once_per_interval_and_cleared_by_progress() {
        let w = Watch::new(Some(Duration::from_secs(10)));
        w.set_peers(Arc::from([peer(0), peer(1), peer(2)]), 0);
        let text = || "allreduce #7 on rank 0: child rank 2".to_string();
        let mut made = 0;
        assert_eq!(w.on_idle(Duration::from_secs(4), &mut made, &text).unwrap(), Some(Duration::from_secs(6)));
        assert!(w.stall().is_none());
        w.on_idle(Duration::from_secs(10), &mut made, &text).unwrap();
        let s = w.stall().expect("a stall after 10 s");
        assert_eq!((s.seq, s.ranks.clone(), s.waited_ms), (1, vec![2], 10_000));
        // Not again until 20 s.
        w.on_idle(Duration::from_secs(15), &mut made, &text).unwrap();
        assert_eq!(w.stall().unwrap().seq, 1);
        w.on_idle(Duration::from_secs(20), &mut made, &text).unwrap();
        assert_eq!(w.stall().unwrap().seq, 2);
        w.resolved();
        assert!(w.stall().is_none());
        let off = Watch::new(None);
        assert_eq!(off.on_idle(Duration::from_secs(99), &mut 0, &text).unwrap(), None);
    }

    #[test]
    fn a_fence_notice_fails_the_next_idle_wait_once() {
        let w = Watch::new(None);
        w.set_peers(Arc::from([]), 2);
        w.peer_fenced(3, "7".into(), "no heartbeat for 3.0s".into(), 2);
        match w.on_idle(Duration::ZERO, &mut 0, &|| String::new()) {
            Err(Error::PeerLost { rank: 3, task: Some(t), reason }) => {
                assert_eq!(t, "7");
                assert!(reason.contains("fenced by the tracker"), "{reason}");
            }
            other => panic!("expected a lost peer, got {other:?}"),
        }
        assert!(w.on_idle(Duration::ZERO, &mut 0, &|| String::new()).is_ok());
        w.peer_fenced(3, "7".into(), "x".into(), 2);
        w.clear_notice();
        assert!(w.on_idle(Duration::ZERO, &mut 0, &|| String::new()).is_ok());
        // A notice from before the round this worker is in now is stale.
        w.peer_fenced(3, "7".into(), "x".into(), 2);
        w.set_peers(Arc::from([]), 3);
        assert!(w.on_idle(Duration::ZERO, &mut 0, &|| String::new()).is_ok());
    }
}

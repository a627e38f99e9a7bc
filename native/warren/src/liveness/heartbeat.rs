//! The heartbeat thread: its own authenticated tracker connection, a heartbeat every sixth of
//! the peer timeout (or half the stall-report interval; each carries the current stall
//! report), and the tracker's answers.
//!
//! It runs beside whatever the worker does (a call, its own computation), on a native thread
//! that a JVM garbage collection does not stop: only a stopped or frozen process, or a cut
//! network, silences it. It fences its own worker (its [`CancelHandle`]: every call fails
//! with [`crate::Error::Fenced`]) when the tracker answers that it was fenced, or when the
//! tracker has not answered for the peer timeout and its host no longer acknowledges the
//! heartbeats either (cut off: the tracker, on its side, fences and replaces it). A tracker
//! whose host acknowledges but that does not answer is stopped or frozen itself: the worker
//! waits for its answer. A tracker that closes the connection (the job ended or failed) only
//! ends the thread: the worker's own tracker connection reports that.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{LOG, Watch, overslept};
use crate::cancel::CancelHandle;
use crate::error::{Error, Result};
use crate::tracker::TrackerClient;
use crate::tracker::proto::{FromTracker, ToTracker};

/// Who beats, to whom, how often.
pub(crate) struct Pulse {
    /// The tracker's `host:port`.
    pub(crate) uri: String,
    /// The job secret.
    pub(crate) secret: Vec<u8>,
    /// TLS, if on.
    pub(crate) tls: Option<crate::wire::Tls>,
    /// This worker's task id.
    pub(crate) task_id: String,
    /// The incarnation the tracker assigned.
    pub(crate) incarnation: u64,
    /// The tracker's peer timeout.
    pub(crate) timeout: Duration,
    /// The worker's stall-report interval (reports go out with the next heartbeat).
    pub(crate) stall_warn: Option<Duration>,
}

impl Pulse {
    /// Time between heartbeats: a sixth of the timeout, or half the stall-report interval if
    /// shorter, so that a report reaches the tracker while the stall lasts (20 ms to 5 s).
    fn interval(&self) -> Duration {
        let every = self.stall_warn.map_or(self.timeout / 6, |s| (self.timeout / 6).min(s / 2));
        every.clamp(Duration::from_millis(20), Duration::from_secs(5))
    }
}

/// A running heartbeat thread; dropping it stops it.
pub(crate) struct Heartbeat {
    stop: Arc<AtomicBool>,
    socket: TcpStream,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat").finish()
    }
}

impl Heartbeat {
    /// Connects to the tracker (before the peer timeout passes) and starts beating.
    pub(crate) fn start(pulse: Pulse, watch: Arc<Watch>, cancel: CancelHandle) -> Result<Heartbeat> {
        let deadline = Instant::now() + pulse.timeout;
        let client = TrackerClient::connect(&pulse.uri, &pulse.secret, pulse.tls.as_ref(), deadline, Some(&cancel))?;
        let socket = client.socket().try_clone().map_err(|e| Error::io("duplicating the heartbeat socket", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("warren-heartbeat-{}", pulse.task_id))
            .spawn(move || beat(client, &pulse, &watch, &cancel, &flag))
            .map_err(|e| Error::io("starting the heartbeat thread", e))?;
        Ok(Heartbeat { stop, socket, thread: Some(thread) })
    }

    /// Stops the thread (its connection closes; the tracker expects no more heartbeats once
    /// the worker has finished).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.socket.shutdown(Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: beat, read the answers until the next beat is due, and fence the worker when
/// the tracker says so or falls silent for the timeout.
fn beat(mut client: TrackerClient, pulse: &Pulse, watch: &Watch, cancel: &CancelHandle, stop: &AtomicBool) {
    let interval = pulse.interval();
    let mut heard = Instant::now();
    // Whether the tracker is silent past the timeout while its host acknowledges (logged once).
    let mut waiting = false;
    while !stop.load(Ordering::SeqCst) && !cancel.is_cancelled() {
        let next = Instant::now() + interval;
        if watch.is_cut() {
            // Injected cut: nothing leaves, nothing is read; only the silence counts.
            std::thread::sleep(interval.min(Duration::from_millis(50)));
            if heard.elapsed() > pulse.timeout {
                return cancel.fence(&cut_off(pulse, heard.elapsed()));
            }
            continue;
        }
        let msg =
            ToTracker::Beat { task_id: pulse.task_id.clone(), incarnation: pulse.incarnation, stall: watch.stall() };
        // A full send buffer (a silent tracker) is waited out here, then judged below.
        match client.send(&msg, next) {
            Ok(()) => {}
            Err(Error::Timeout { .. }) => {}
            Err(e) => return ended(stop, &e),
        }
        while Instant::now() < next {
            match client.recv(next) {
                Ok(FromTracker::Ack) => heard = Instant::now(),
                Ok(FromTracker::PeerFenced { rank, task_id, reason, round }) => {
                    heard = Instant::now();
                    log::warn!(target: LOG, "the tracker fenced rank {rank} (task {task_id}): {reason}; re-linking without it");
                    watch.peer_fenced(rank, task_id, reason, round);
                    cancel.wake();
                }
                Ok(FromTracker::Silent { members, .. }) => {
                    heard = Instant::now();
                    log::warn!(
                        target: LOG,
                        "stalled: the tracker has heard nothing since task {}'s wait began from {}: the job waits on it",
                        pulse.task_id,
                        members.join(", ")
                    );
                }
                Ok(other) => log::debug!(target: LOG, "heartbeat: unexpected {other:?}"),
                Err(Error::Fenced(message)) => return cancel.fence(&message),
                Err(Error::Timeout { .. }) => break,
                Err(e) => return ended(stop, &e),
            }
        }
        // This loop was itself stopped (the whole process paused or frozen): the tracker's
        // answer to the next heartbeat says whether it fenced us meanwhile.
        if overslept(next, Instant::now(), interval).is_some() {
            heard = Instant::now();
        }
        let silent = heard.elapsed();
        let acked = last_ack(client.socket());
        if cut_off_after(silent, acked, pulse.timeout) {
            return cancel.fence(&cut_off(pulse, silent));
        }
        if silent > pulse.timeout && !waiting {
            log::warn!(
                target: LOG,
                "task {}: the tracker has not answered for {silent:.1?} (peer timeout {:?}), but its host \
                 acknowledges every heartbeat: its process is stopped or busy, not gone; waiting for its answer",
                pulse.task_id,
                pulse.timeout
            );
        }
        waiting = silent > pulse.timeout;
    }
}

/// Whether a worker that heard nothing from the tracker for `silent` takes itself for cut off
/// (the tracker, on its side, fences it): after the peer timeout, unless the tracker's host
/// still acknowledges its heartbeats (`acked`: how long ago it last did, where the system says).
/// Then the link works and only the tracker's process does not run (stopped, frozen or
/// starved): no reason for the worker to stop, since a tracker that runs again does not blame
/// its workers for its own pause, and its answer says whether it fenced this worker.
fn cut_off_after(silent: Duration, acked: Option<Duration>, timeout: Duration) -> bool {
    silent > timeout && acked.is_none_or(|ago| ago > timeout)
}

/// How long ago the peer of `socket` last acknowledged anything sent on it (Linux `TCP_INFO`);
/// `None` where the system does not say.
#[cfg(target_os = "linux")]
fn last_ack(socket: &TcpStream) -> Option<Duration> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain C struct of integers, which zeroed bytes make valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `getsockopt` writes at most `len` bytes into `info` and reports how many, on a
    // descriptor that `socket` keeps open.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let has_field = len as usize >= std::mem::offset_of!(libc::tcp_info, tcpi_last_ack_recv) + 4;
    (got == 0 && has_field).then(|| Duration::from_millis(u64::from(info.tcpi_last_ack_recv)))
}

#[cfg(not(target_os = "linux"))]
fn last_ack(_socket: &TcpStream) -> Option<Duration> {
    None
}

/// Why a worker that heard nothing from the tracker for `silent` fences itself.
fn cut_off(pulse: &Pulse, silent: Duration) -> String {
    format!(
        "task {} heard nothing from the tracker for {silent:.1?} (peer timeout {:?}): it is cut off, and the tracker \
         replaces it",
        pulse.task_id, pulse.timeout
    )
}

/// The connection ended while the worker still runs: the tracker stopped (the job is over or
/// failed), or the connection broke. Logged as a warning, since from here on the tracker hears
/// nothing from this worker and fences it after the peer timeout (a worker whose tracker
/// connections closed under it once went on unwatched: the error tells why next time).
fn ended(stop: &AtomicBool, e: &Error) {
    if !stop.load(Ordering::SeqCst) {
        log::warn!(target: LOG, "the heartbeat connection to the tracker ended: {e}; no more heartbeats");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_come_often_enough_for_the_timeout_and_the_stall_reports() {
        let pulse = |timeout_ms: u64, stall_ms: Option<u64>| Pulse {
            uri: String::new(),
            secret: Vec::new(),
            tls: None,
            task_id: "0".into(),
            incarnation: 1,
            timeout: Duration::from_millis(timeout_ms),
            stall_warn: stall_ms.map(Duration::from_millis),
        };
        assert_eq!(pulse(30_000, Some(10_000)).interval(), Duration::from_secs(5));
        assert_eq!(pulse(30_000, None).interval(), Duration::from_secs(5));
        assert_eq!(pulse(3_000, None).interval(), Duration::from_millis(500));
        assert_eq!(pulse(30_000, Some(1_000)).interval(), Duration::from_millis(500));
        assert_eq!(pulse(60, None).interval(), Duration::from_millis(20));
    }

    #[test]
    fn a_silent_tracker_whose_host_acknowledges_is_waited_for() {
        let timeout = Duration::from_secs(2);
        let s = Duration::from_secs;
        assert!(!cut_off_after(s(1), None, timeout), "within the timeout");
        assert!(cut_off_after(s(3), None, timeout), "the system does not say: cut off");
        assert!(cut_off_after(s(3), Some(s(3)), timeout), "nothing acknowledged either: cut off");
        assert!(!cut_off_after(s(30), Some(Duration::from_millis(300)), timeout), "the tracker is stopped");
    }

    #[test]
    fn the_last_acknowledgement_of_a_live_connection_is_recent() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut b, _) = listener.accept().unwrap();
        // The peer's kernel acknowledges what is sent, whether or not its process reads it.
        a.write_all(b"beat").unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).unwrap();
        if cfg!(target_os = "linux") {
            let ago = last_ack(&a).expect("Linux says");
            assert!(ago < Duration::from_secs(1), "{ago:?}");
        }
    }
}

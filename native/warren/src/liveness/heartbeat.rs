//! The heartbeat thread: its own authenticated tracker connection, a heartbeat every sixth of
//! the peer timeout (or half the stall-report interval; each carries the current stall
//! report), and the tracker's answers.
//!
//! It runs beside whatever the worker does (a call, its own computation), on a native thread
//! that a JVM garbage collection does not stop: only a stopped or frozen process, or a cut
//! network, silences it. It fences its own worker (its [`CancelHandle`]: every call fails
//! with [`crate::Error::Fenced`]) when the tracker answers that it was fenced, or when the
//! tracker has not answered for the peer timeout (cut off: the tracker, on its side, fences
//! and replaces it). A tracker that closes the connection (the job ended or failed) only ends
//! the thread: the worker's own tracker connection reports that.

use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{LOG, Watch};
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
                Ok(other) => log::debug!(target: LOG, "heartbeat: unexpected {other:?}"),
                Err(Error::Fenced(message)) => return cancel.fence(&message),
                Err(Error::Timeout { .. }) => break,
                Err(e) => return ended(stop, &e),
            }
        }
        // This loop was itself stopped (the whole process paused or frozen): the tracker's
        // answer to the next heartbeat says whether it fenced us meanwhile.
        if next.elapsed() > interval {
            heard = Instant::now();
        }
        let silent = heard.elapsed();
        if silent > pulse.timeout {
            return cancel.fence(&cut_off(pulse, silent));
        }
    }
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
}

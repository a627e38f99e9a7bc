//! One call in robust mode: failure injection, the recovery rounds while in consensus mode, a
//! retry after a re-link, and keeping the call's result for workers that may replay it.

use std::sync::Arc;
use std::time::Instant;

use super::recovery::Round;
use super::{CallBuf, CallOptions, Communicator, recoverable};
use crate::collective::Progress;
use crate::collective::header::{CallHeader, CallKind};
use crate::error::{Error, Result};
use crate::mock::{Action as MockAction, Point as MockPoint};
use crate::robust::{BootstrapKey, Want};

/// A collective run from `input` into `out` (of the same length).
pub(super) type OutOfPlaceFn<'e> = dyn FnMut(&mut Communicator, &[u8], &mut [u8]) -> Result<()> + 'e;

/// A collective run from the caller's buffer into `out` (of the same length) that writes each
/// final value back into the caller's buffer as it is computed, recording how far in the
/// progress (kept across the attempts of one call, so that a retry resumes).
pub(super) type WriteBackFn<'e> = dyn FnMut(&mut Communicator, &mut [u8], &mut [u8], &mut Progress) -> Result<()> + 'e;

/// How a robust call runs its collective on the caller's buffer.
pub(super) enum Exec<'e, B: ?Sized> {
    /// On the caller's buffer, in place: its input is copied first (to run the call again
    /// after a re-link) and its result copied into the result buffer afterwards.
    InPlace(&'e mut dyn FnMut(&mut Communicator, &mut B) -> Result<()>),
    /// From the caller's buffer (read only, so its input survives a failed attempt) into a
    /// buffer of the same length that the result buffer then keeps; the result is copied once,
    /// into the caller's buffer.
    OutOfPlace(&'e mut OutOfPlaceFn<'e>),
    /// Like `OutOfPlace`, the result also written back into the caller's buffer during the
    /// call (no copy after it); a failed attempt leaves final values in part of the caller's
    /// buffer and the retry resumes from them.
    WriteBack(&'e mut WriteBackFn<'e>),
    /// Like `OutOfPlace`, and the result is not copied into the caller's buffer: the buffer
    /// the result is kept in is lent to the caller (through the slot), shared with the kept
    /// results. An ordinary call only (no bootstrap key).
    Lent(&'e mut OutOfPlaceFn<'e>, &'e mut Option<Arc<Vec<u8>>>),
}

impl Communicator {
    /// One call in robust mode. `exec` runs the call collectively on the caller's `buf` (its
    /// input is kept to run it again after a re-link); a result served by another worker is
    /// written into `buf` instead. Returns `true` if the call was a checkpoint phase that ended
    /// by committing (see [`crate::robust::Plan::Commit`]).
    pub(super) fn robust_call<B: CallBuf + ?Sized>(
        &mut self,
        hdr: CallHeader,
        want: Want,
        key: Option<&BootstrapKey>,
        buf: &mut B,
        exec: &mut dyn FnMut(&mut Communicator, &mut B) -> Result<()>,
    ) -> Result<bool> {
        self.robust_call_with(hdr, want, key, buf, Exec::InPlace(exec))
    }

    /// [`Communicator::robust_call`] with the way the collective runs on `buf` given by `exec`.
    pub(super) fn robust_call_with<B: CallBuf + ?Sized>(
        &mut self,
        hdr: CallHeader,
        want: Want,
        key: Option<&BootstrapKey>,
        buf: &mut B,
        mut exec: Exec<'_, B>,
    ) -> Result<bool> {
        self.check_failed()?;
        let started = Instant::now();
        self.inject_failure(key.is_some());
        let mut backup = std::mem::take(&mut self.rs().backup);
        backup.clear();
        self.rs().progress.clear();
        if matches!(exec, Exec::InPlace(_)) {
            backup.extend_from_slice(buf.bytes());
        }
        let outcome = loop {
            if self.rs().consensus {
                match self.recovery_round(&hdr, want, key) {
                    Ok(Round::Execute) => self.rs().consensus = false,
                    Ok(Round::Served(data)) => {
                        buf.set(&data);
                        self.rs().state.record(hdr, key, &data)?;
                        break Ok(false);
                    }
                    Ok(Round::Committed) => break Ok(true),
                    Ok(Round::Loaded | Round::Continue | Round::Released) => continue,
                    Err(e) if recoverable(&e) => {
                        self.relink_during(&hdr, &e)?;
                        continue;
                    }
                    Err(e) => break Err(self.poison(e)),
                }
            }
            match self.attempt(hdr, key, buf, &mut exec) {
                Ok(()) => break Ok(false),
                Err(e) if recoverable(&e) && self.tracker.is_some() => {
                    if matches!(exec, Exec::InPlace(_)) {
                        buf.set(&backup);
                    }
                    self.relink_during(&hdr, &e)?;
                }
                Err(e) => break Err(self.poison(e)),
            }
        };
        self.rs().backup = backup;
        // A checkpoint's two phases are timed together, by `checkpoint`.
        if outcome.is_ok() && !matches!(hdr.kind, CallKind::Checkpoint | CallKind::CheckpointAck) {
            self.stats.record(hdr.kind, started.elapsed());
        }
        outcome
    }

    /// Re-links after `cause` (a lost peer) during call `hdr`; a failure poisons the
    /// communicator, and a timeout names the call ([`relinking_in`]).
    fn relink_during(&mut self, hdr: &CallHeader, cause: &Error) -> Result<()> {
        self.relink(cause).map_err(|e| self.poison(relinking_in(hdr, e)))
    }

    /// Runs the call collectively once; on success `buf` holds the result and it is recorded.
    /// A failure leaves `buf` as it was only when running `OutOfPlace`.
    fn attempt<B: CallBuf + ?Sized>(
        &mut self,
        hdr: CallHeader,
        key: Option<&BootstrapKey>,
        buf: &mut B,
        exec: &mut Exec<'_, B>,
    ) -> Result<()> {
        match exec {
            Exec::InPlace(f) => {
                f(self, buf)?;
                self.calls += 1;
                self.rs().state.record(hdr, key, buf.bytes())
            }
            Exec::OutOfPlace(f) => {
                let out = self.out_of_place(buf.bytes(), f)?;
                buf.set(&out);
                self.rs().state.record_owned(hdr, key, out)
            }
            Exec::WriteBack(f) => {
                let mut out = self.rs().state.spare(buf.bytes().len());
                let mut progress = std::mem::take(&mut self.rs().progress);
                let result = f(self, buf.bytes_mut(), &mut out, &mut progress);
                self.rs().progress = progress;
                if let Err(e) = result {
                    self.rs().state.recycle(out);
                    return Err(e);
                }
                self.calls += 1;
                self.rs().state.record_owned(hdr, key, out)
            }
            Exec::Lent(f, lent) => {
                debug_assert!(key.is_none(), "a lent call is an ordinary call");
                let out = Arc::new(self.out_of_place(buf.bytes(), f)?);
                **lent = Some(Arc::clone(&out));
                self.rs().state.record_shared(hdr, out);
                Ok(())
            }
        }
    }

    /// Runs an out-of-place call once from `input` into a spare buffer of the result buffer,
    /// which it returns; on failure the spare goes back to the result buffer.
    fn out_of_place(&mut self, input: &[u8], f: &mut OutOfPlaceFn<'_>) -> Result<Vec<u8>> {
        let mut out = self.rs().state.spare(input.len());
        if let Err(e) = f(self, input, &mut out) {
            self.rs().state.recycle(out);
            return Err(e);
        }
        self.calls += 1;
        Ok(out)
    }

    /// Exits at the start of this call if `WARREN_MOCK` names it (an ordinary call by its
    /// position, a bootstrap call by its count).
    fn inject_failure(&mut self, bootstrap: bool) {
        let point = if bootstrap {
            let r = self.rs();
            r.boot_calls += 1;
            MockPoint::Bootstrap(r.boot_calls - 1)
        } else {
            let (version, seq) = self.rs().state.point();
            let (rank, attempt) = (self.topo.rank, self.cfg.attempt);
            let in_ring = MockPoint::InRing { version, seq };
            let exit = self.cfg.mock.iter().any(|m| m.action == MockAction::Exit && m.matches(rank, in_ring, attempt));
            self.rs().exit_in_ring = exit;
            MockPoint::Call { version, seq }
        };
        self.maybe_mock(point);
    }

    /// Exits abruptly, or cuts this worker off from the tracker, if `WARREN_MOCK` names it at
    /// this point (failure injection).
    pub(super) fn maybe_mock(&self, point: MockPoint) {
        let (rank, attempt) = (self.topo.rank, self.cfg.attempt);
        for m in self.cfg.mock.iter().filter(|m| m.matches(rank, point, attempt)) {
            match m.action {
                MockAction::Exit => {
                    say(&format!("WARREN_MOCK: rank {rank} exits at {m}\n"));
                    // SAFETY: _exit ends the process at once, like a crash; nothing runs after it.
                    unsafe { libc::_exit(86) }
                }
                MockAction::Cut => {
                    say(&format!("WARREN_MOCK: rank {rank} is cut off from the tracker at {m}\n"));
                    self.watch.cut();
                }
            }
        }
    }

    /// The key of a call made with `opts`: `None` for an ordinary call, and when the
    /// bootstrap cache is off (a bootstrap call is then an ordinary call).
    pub(super) fn key_for(&mut self, opts: &CallOptions) -> Option<BootstrapKey> {
        // The plain path: no allocation, no lookup.
        let site = opts.bootstrap_site()?;
        let on = self.cfg.bootstrap_cache;
        let r = self.robust.as_mut()?;
        on.then(|| r.state.next_bootstrap_key(&site.name()))
    }
}

/// Writes `line` to stderr in one `write` (under `PIPE_BUF`, so atomic on a pipe): other
/// processes writing to the same stderr (`warren run`'s log) cannot split it, as the
/// `Display` pieces of an `eprintln!` could.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A re-link that gave up on a wait (for the tracker's round, for a replacement) during call
/// `hdr`: its timeout names the call, so a user learns where the worker was (`finalize`, an
/// allreduce) and not only what it waited for.
fn relinking_in(hdr: &CallHeader, e: Error) -> Error {
    match e {
        Error::Timeout { what, after } => {
            Error::Timeout { what: format!("{} (re-linking after a lost peer): {what}", hdr.describe()), after }
        }
        e => e,
    }
}

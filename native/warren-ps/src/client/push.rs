//! Pushes: gradients split per server, staged and committed (sync) or counted on arrival
//! (async, SSP), and the settling of a half-pushed step by a trainer's replacement.

use std::sync::Arc;
use std::time::Instant;

use log::info;

use super::{PsClient, Seen, bags, share};
use crate::failpoint::FailPoint;
use crate::proto::{Grad, Reply, Request};
use crate::table::{KeySpread, TableKind, dense_range};
use warren_base::error::{Error, Result};
use warren_wire::pool;

impl PsClient {
    /// Brings every server to the same step for this trainer, given each one's `(clock,
    /// staged step)`: completes a step some server committed, undoes one none did (see the
    /// documentation of the `client` module). Returns the step.
    pub(super) fn settle(&mut self, deadline: Instant, seen: &[Seen]) -> Result<u64> {
        let lo = seen.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = seen.iter().map(|s| s.0).max().unwrap_or(0);
        let on = |f: fn(&Seen, u64) -> bool| -> Vec<usize> {
            seen.iter().enumerate().filter(|(_, s)| f(s, lo)).map(|(i, _)| i).collect()
        };
        let Some(t) = self.trainer else { return Ok(lo) };
        if hi == lo {
            let staged = on(|s, lo| s.1 == Some(lo));
            if !staged.is_empty() {
                info!("trainer {t}: undoing its step {lo}, staged on servers {staged:?} but committed on none");
                let reqs = (0..seen.len()).map(|i| staged.contains(&i).then_some(Request::Abort { step: lo }));
                self.expect_done(reqs.collect())?;
            }
            return Ok(lo);
        }
        if !self.sync() {
            return self.skip_to(deadline, seen, hi);
        }
        let behind = on(|s, lo| s.0 == lo);
        if hi == lo + 1 && behind.iter().all(|&i| seen[i].1 == Some(lo)) {
            info!("trainer {t}: completing its step {lo}, committed on some servers, staged on {behind:?}");
            let reqs = (0..seen.len()).map(|i| behind.contains(&i).then_some(Request::Commit { step: lo }));
            for (s, r) in self.call_by(deadline, reqs.collect(), None)?.into_iter().enumerate() {
                if !matches!(r, None | Some(Reply::Pushed { .. })) {
                    return Err(self.unexpected(s));
                }
            }
            return Ok(hi);
        }
        Err(Error::RecoveryImpossible {
            lost: vec![t.to_string()],
            reason: format!(
                "the servers are at different steps of trainer {t} ((clock, staged step) per server {seen:?}): \
                 a server restarted without the pushes it had acknowledged (its checkpoint directory was lost, \
                 replaced by an older copy, or not given, or its machine crashed while it answered pushes once \
                 written to the kernel, `--log-sync write`; `--log-sync fsync` survives that): start the job again"
            ),
        })
    }

    /// Async and SSP: moves this trainer's clock at the servers behind, per `seen`, up to
    /// step `hi`, where it is at the others (its predecessor died with a push counted at some
    /// servers only: those pushes are lost elsewhere, as in a server's restart). Returns `hi`.
    fn skip_to(&mut self, deadline: Instant, seen: &[Seen], hi: u64) -> Result<u64> {
        let t = self.trainer.expect("a trainer");
        for (s, _) in seen.iter().enumerate().filter(|(_, s)| s.0 < hi) {
            self.lost += self.links[s].resume(t, hi, deadline, "missed the last push of this trainer's predecessor")?;
        }
        Ok(hi)
    }

    /// Pushes this step's gradients (any tables, dense pieces or sparse rows), split per
    /// server; every server gets this step's push, empty if none of the gradients is its.
    /// Bad input (an unknown table, a wrong width, a range outside a table) fails before
    /// anything is sent. In a sync job the push is staged at every server, then committed
    /// (two round trips); in async and SSP jobs it counts on arrival (one).
    pub fn push(&mut self, grads: &[Grad]) -> Result<()> {
        if self.trainer.is_none() {
            return Err(Error::InvalidArgument("an observer cannot push: connect as a trainer".into()));
        }
        let per: Vec<Arc<Vec<Grad>>> = self.split(grads)?.into_iter().map(Arc::new).collect();
        let step = self.step;
        self.maybe_fail(FailPoint::BeforePush);
        for (link, grads) in self.links.iter_mut().zip(&per) {
            link.keep(step, Arc::clone(grads));
        }
        let pushes: Vec<Option<Request>> = per.into_iter().map(|grads| Some(Request::Push { step, grads })).collect();
        let sync = self.sync();
        if !sync && self.fail_at.contains(&(step, FailPoint::HalfCommitted)) {
            return self.die_half_way(pushes, step);
        }
        let replies = self.call(pushes)?;
        let answered = |r: &Option<Reply>| match r {
            Some(Reply::Staged) => sync,
            Some(Reply::Pushed { .. }) => !sync,
            _ => false,
        };
        if let Some(s) = replies.iter().position(|r| !answered(r)) {
            return Err(self.unexpected(s));
        }
        self.maybe_fail(FailPoint::Staged);
        if sync {
            self.commit(step)?;
        }
        self.maybe_fail(FailPoint::AfterPush);
        self.step += 1;
        Ok(())
    }

    /// Commits the push of `step`, staged at every server, everywhere.
    fn commit(&mut self, step: u64) -> Result<()> {
        let commits: Vec<Option<Request>> = (0..self.servers()).map(|_| Some(Request::Commit { step })).collect();
        if self.fail_at.contains(&(step, FailPoint::HalfCommitted)) {
            return self.die_half_way(commits, step);
        }
        for (s, r) in self.call(commits)?.into_iter().enumerate() {
            if !matches!(r, Some(Reply::Pushed { .. })) {
                return Err(self.unexpected(s));
            }
        }
        Ok(())
    }

    /// Splits gradients into each server's share.
    fn split(&mut self, grads: &[Grad]) -> Result<Vec<Vec<Grad>>> {
        let n = self.servers();
        let mut per: Vec<Vec<Grad>> = vec![Vec::new(); n];
        for g in grads {
            match (g, &self.table(g.table())?.kind) {
                (Grad::Dense { table, offset, values }, TableKind::Dense { len }) => {
                    let end = offset.checked_add(values.len() as u64).filter(|&e| e <= *len).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "gradient of elements {offset}..+{} is outside table {table:?} of {len} elements",
                            values.len()
                        ))
                    })?;
                    for (s, mine) in per.iter_mut().enumerate() {
                        let held = dense_range(*len, s, n);
                        let (a, b) = ((*offset).max(held.start), end.min(held.end));
                        if a < b {
                            let piece = &values[(a - offset) as usize..(b - offset) as usize];
                            let mut v = pool::FLOATS.take(piece.len());
                            v.extend_from_slice(piece);
                            mine.push(Grad::Dense { table: table.clone(), offset: a, values: v });
                        }
                    }
                }
                (Grad::Sparse { table, keys, values }, TableKind::Sparse { width, .. }) => {
                    let w = *width as usize;
                    if values.len() != keys.len() * w {
                        return Err(Error::InvalidArgument(format!(
                            "gradient of table {table:?}: {} floats for {} keys of width {w}",
                            values.len(),
                            keys.len()
                        )));
                    }
                    let cap = share(keys.len(), n);
                    let mut parts: Vec<(Vec<u64>, Vec<f32>)> =
                        (0..n).map(|_| (Vec::with_capacity(cap), pool::FLOATS.take(cap * w))).collect();
                    let spread = KeySpread::new(n);
                    for (k, row) in keys.iter().zip(values.chunks_exact(w)) {
                        let p = &mut parts[spread.server(*k)];
                        p.0.push(*k);
                        p.1.extend_from_slice(row);
                    }
                    for (mine, (keys, values)) in per.iter_mut().zip(parts) {
                        if keys.is_empty() {
                            pool::FLOATS.give(values);
                        } else {
                            mine.push(Grad::Sparse { table: table.clone(), keys, values });
                        }
                    }
                }
                (Grad::SparseBags { table, keys, ends, values }, TableKind::Sparse { width, .. }) => {
                    let w = *width as usize;
                    bags::check_rows(table, keys, ends, "a gradient", values.len(), w)?;
                    let parts = match self.bag_split.take() {
                        Some(last) if last.table == *table && last.keys == *keys && last.ends == *ends => last.per,
                        _ => bags::split(keys, ends, n),
                    };
                    for (mine, part) in per.iter_mut().zip(parts) {
                        if part.keys.is_empty() {
                            continue;
                        }
                        let mut v = pool::FLOATS.take(part.bags.len() * w);
                        for &b in &part.bags {
                            v.extend_from_slice(&values[b * w..(b + 1) * w]);
                        }
                        mine.push(Grad::SparseBags {
                            table: table.clone(),
                            keys: part.keys,
                            ends: part.ends,
                            values: v,
                        });
                    }
                }
                (g, _) => {
                    return Err(Error::InvalidArgument(format!("table {:?} is not of that kind", g.table())));
                }
            }
        }
        Ok(per)
    }
}

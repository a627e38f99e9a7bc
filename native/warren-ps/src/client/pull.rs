//! Pulls: each table's pull checked and planned per server, sent in one pipelined round,
//! and every server's reply placed in the callers' buffers.

use std::ops::Range;

use super::{BagSplit, PsClient, bags, share};
use crate::failpoint::FailPoint;
use crate::proto::{PullPiece, ReceivedFloats, Reply, Request};
use crate::table::{KeySpread, TableKind, dense_range};
use warren_base::error::{Error, Result};

impl PsClient {
    /// Elements `range` of dense table `table`, from the servers holding them.
    pub fn pull_dense(&mut self, table: &str, range: Range<u64>) -> Result<Vec<f32>> {
        let mut out = vec![0f32; range.end.saturating_sub(range.start) as usize];
        self.pull_dense_into(table, range, &mut out)?;
        Ok(out)
    }

    /// [`pull_dense`](Self::pull_dense) into `out` (of `range`'s length): a caller pulling
    /// the same range every step reuses one buffer.
    pub fn pull_dense_into(&mut self, table: &str, range: Range<u64>, out: &mut [f32]) -> Result<()> {
        self.pull(&mut [Pull::Dense { table, range, out }])
    }

    /// The rows of `keys` of sparse table `table`, concatenated in the order of `keys`.
    pub fn pull_sparse(&mut self, table: &str, keys: &[u64]) -> Result<Vec<f32>> {
        let width = self.sparse_width(table)?;
        let mut out = vec![0f32; keys.len() * width];
        self.pull(&mut [Pull::Sparse { table, keys, out: &mut out }])?;
        Ok(out)
    }

    fn sparse_width(&self, table: &str) -> Result<usize> {
        match self.table(table)?.kind {
            TableKind::Sparse { width, .. } => Ok(width as usize),
            TableKind::Dense { .. } => {
                Err(Error::InvalidArgument(format!("table {table:?} is dense: pull it by range")))
            }
        }
    }

    /// [`pull_sparse`](Self::pull_sparse) into `out` (`keys.len()` rows of the table's
    /// width): every row is written, so a caller pulling every step reuses one buffer, as
    /// it is (no zeroing, no allocation).
    pub fn pull_sparse_into(&mut self, table: &str, keys: &[u64], out: &mut [f32]) -> Result<()> {
        self.pull(&mut [Pull::Sparse { table, keys, out }])
    }

    /// Pulls several tables in one round trip (a step that reads an embedding and a dense
    /// weight asks each server once, not once per table), each into its own buffer, which
    /// is written whole. Bad input (an unknown table, a pull of the wrong kind, a range
    /// outside its table, a buffer of the wrong size) fails before anything is sent.
    pub fn pull(&mut self, pulls: &mut [Pull<'_>]) -> Result<()> {
        let mut plans = self.plan_pull(pulls)?;
        // A bag's sum is its servers' sums added in server order, from zero.
        for p in pulls.iter_mut() {
            if let Pull::SparseBags { out, .. } = p {
                out.fill(0.0);
            }
        }
        let reqs = plans
            .iter_mut()
            .map(|p| (!p.pieces.is_empty()).then(|| Request::Pull { pieces: std::mem::take(&mut p.pieces) }))
            .collect();
        for (s, r) in self.call_with(reqs, Some(FailPoint::MidPull))?.into_iter().enumerate() {
            match r {
                None => {}
                Some(Reply::Received(values)) if values.len() == plans[s].len() => {
                    plans[s].place(&values, pulls);
                    self.links[s].recycle(values);
                }
                Some(Reply::Received(values)) => {
                    return Err(Error::Protocol(format!(
                        "{} returned {} floats for a pull of {}",
                        self.links[s].who,
                        values.len(),
                        plans[s].len()
                    )));
                }
                Some(_) => return Err(self.unexpected(s)),
            }
        }
        Ok(())
    }

    /// Each server's share of `pulls`, once each pull is checked.
    fn plan_pull(&mut self, pulls: &[Pull<'_>]) -> Result<Vec<ServerPull>> {
        let n = self.servers();
        let mut plans: Vec<ServerPull> = (0..n).map(|_| ServerPull::default()).collect();
        for (j, p) in pulls.iter().enumerate() {
            match p {
                Pull::Dense { table, range, out } => {
                    let len = self.dense_len(table, range, out.len())?;
                    for (s, plan) in plans.iter_mut().enumerate() {
                        let held = dense_range(len, s, n);
                        let (start, end) = (range.start.max(held.start), range.end.min(held.end));
                        if start < end {
                            let at = (start - range.start) as usize..(end - range.start) as usize;
                            plan.pieces.push(PullPiece::Dense { table: (*table).into(), start, end });
                            plan.places.push((j, Place::Span(at)));
                        }
                    }
                }
                Pull::Sparse { table, keys, out } => {
                    let width = self.sparse_width(table)?;
                    if out.len() != keys.len() * width {
                        return Err(Error::InvalidArgument(format!(
                            "a buffer of {} floats for {} rows of width {width} of table {table:?}",
                            out.len(),
                            keys.len()
                        )));
                    }
                    let cap = share(keys.len(), n);
                    let mut per: Vec<(Vec<u64>, Vec<usize>)> =
                        (0..n).map(|_| (Vec::with_capacity(cap), Vec::with_capacity(cap))).collect();
                    let spread = KeySpread::new(n);
                    for (i, &k) in keys.iter().enumerate() {
                        let s = spread.server(k);
                        per[s].0.push(k);
                        per[s].1.push(i);
                    }
                    for (plan, (keys, to)) in plans.iter_mut().zip(per) {
                        if !keys.is_empty() {
                            plan.pieces.push(PullPiece::Sparse { table: (*table).into(), keys });
                            plan.places.push((j, Place::Rows { width, to }));
                        }
                    }
                }
                Pull::SparseBags { table, keys, ends, out } => {
                    let width = self.sparse_width(table)?;
                    bags::check_rows(table, keys, ends, "a buffer", out.len(), width)?;
                    let per = bags::split(keys, ends, n);
                    for (plan, mine) in plans.iter_mut().zip(&per) {
                        if !mine.keys.is_empty() {
                            let (keys, ends) = (mine.keys.clone(), mine.ends.clone());
                            plan.pieces.push(PullPiece::SparseBags { table: (*table).into(), keys, ends });
                            plan.places.push((j, Place::BagSums { width, to: mine.bags.clone() }));
                        }
                    }
                    let table = (*table).to_string();
                    self.bag_split = Some(BagSplit { table, keys: keys.to_vec(), ends: ends.to_vec(), per });
                }
            }
        }
        Ok(plans)
    }

    /// The length of dense table `table`, once `range` is checked to lie in it and a
    /// buffer of `buffer` floats to hold it.
    fn dense_len(&self, table: &str, range: &Range<u64>, buffer: usize) -> Result<u64> {
        let TableKind::Dense { len } = self.table(table)?.kind else {
            return Err(Error::InvalidArgument(format!("table {table:?} is sparse: pull it by keys")));
        };
        if range.start > range.end || range.end > len {
            return Err(Error::InvalidArgument(format!(
                "elements {}..{} are outside table {table:?} of {len} elements",
                range.start, range.end
            )));
        }
        if buffer as u64 != range.end - range.start {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {buffer} floats for elements {}..{} of table {table:?}",
                range.start, range.end
            )));
        }
        Ok(len)
    }
}

/// One table's part of a [`PsClient::pull`]: what to pull, and the buffer its values go to.
#[derive(Debug)]
pub enum Pull<'a> {
    /// Elements `range` of a dense table, into `out` (of `range`'s length).
    Dense {
        /// The table.
        table: &'a str,
        /// The elements.
        range: Range<u64>,
        /// Where they go.
        out: &'a mut [f32],
    },
    /// The rows of `keys` of a sparse table, into `out` (`keys.len()` rows of the table's
    /// width, in the order of `keys`).
    Sparse {
        /// The table.
        table: &'a str,
        /// The rows' keys.
        keys: &'a [u64],
        /// Where they go.
        out: &'a mut [f32],
    },
    /// The sum of each bag's rows of a sparse table, into `out` (`ends.len()` rows of the
    /// table's width, bag by bag): an embedding bag. Bag `b` holds the keys
    /// `ends[b - 1]..ends[b]` of `keys` (bag 0 from 0); an empty bag sums to zeros. Each
    /// server sums its keys of a bag and sends one row per bag, not one per key; the sums
    /// of a bag are added in server order. Push its gradient with
    /// [`Grad::SparseBags`](crate::Grad::SparseBags).
    SparseBags {
        /// The table.
        table: &'a str,
        /// The rows' keys, bag by bag.
        keys: &'a [u64],
        /// Where each bag ends in `keys`.
        ends: &'a [u64],
        /// Where the sums go.
        out: &'a mut [f32],
    },
}

impl Pull<'_> {
    fn out(&mut self) -> &mut [f32] {
        match self {
            Pull::Dense { out, .. } | Pull::Sparse { out, .. } | Pull::SparseBags { out, .. } => out,
        }
    }
}

/// One server's share of a [`PsClient::pull`]: the pieces asked of it, and where each
/// piece's values go (the pull's index, and the place in its buffer).
#[derive(Default)]
struct ServerPull {
    pieces: Vec<PullPiece>,
    places: Vec<(usize, Place)>,
}

impl ServerPull {
    /// Values the server's reply carries.
    fn len(&self) -> usize {
        self.places.iter().map(|(_, p)| p.len()).sum()
    }

    /// Puts the server's reply `values` (of [`len`](Self::len)) where they go in `pulls`.
    fn place(&self, values: &ReceivedFloats, pulls: &mut [Pull<'_>]) {
        let mut at = 0;
        for (j, place) in &self.places {
            let out = pulls[*j].out();
            match place {
                Place::Span(span) => values.copy_to(at, &mut out[span.clone()]),
                Place::Rows { width, to } => values.scatter_rows(at, *width, to, out),
                Place::BagSums { width, to } => values.add_rows(at, *width, to, out),
            }
            at += place.len();
        }
    }
}

/// Where a piece's values go in its pull's buffer.
enum Place {
    /// Elements, in order.
    Span(Range<usize>),
    /// Rows of `width`: the piece's row `i` is the buffer's row `to[i]`.
    Rows { width: usize, to: Vec<usize> },
    /// Sums of bags' rows, of `width`: the piece's row `i` is added to the buffer's row
    /// `to[i]`.
    BagSums { width: usize, to: Vec<usize> },
}

impl Place {
    /// Values the piece carries.
    fn len(&self) -> usize {
        match self {
            Place::Span(span) => span.len(),
            Place::Rows { width, to } | Place::BagSums { width, to } => width * to.len(),
        }
    }
}

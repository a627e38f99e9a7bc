//! One server's shard of every table (pure): its parameters and optimizer state, pulls,
//! checks of pushed gradients, and the application of a batch of gradients summed in the
//! order given (the consistency machine gives them in trainer-id order).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::bags;
use super::proto::{Grad, PullPiece};
use super::rows::{RowSums, Rows};
use super::table::{KeySpread, TableKind, TableSpec, dense_range, expected_share, initial, sparse_server};
use warren_base::error::{Error, Result};
use warren_wire::pool;

/// The part of one table a shard holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
enum Part {
    Dense {
        range: Range<u64>,
        #[serde(with = "super::floats")]
        params: Vec<f32>,
        #[serde(with = "super::floats")]
        state: Vec<f32>,
        updates: u64,
    },
    Sparse {
        rows: Rows,
    },
}

/// Server `index` of `servers`: its share of every table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shard {
    index: usize,
    servers: usize,
    specs: Vec<TableSpec>,
    parts: Vec<Part>,
}

/// Elements of a dense table summed and applied at a time when a batch's gradients each
/// cover the whole of it (16 KiB of sums: they stay in the first-level cache).
const WHOLE_CHUNK: usize = 4096;

/// The most values one pull's reply carries: a frame of at most `proto::MAX_PS_FRAME` bytes,
/// with room for its header.
const MAX_PULL_VALUES: usize = (super::proto::MAX_PS_FRAME - 4096) / 4;

/// A batch's gradients of one table, summed.
enum Sum<'g> {
    Dense(Vec<f32>),
    Sparse(RowSums<'g>),
}

impl Shard {
    /// About the bytes of this shard in a checkpoint: its parameters, optimizer state, keys
    /// and update counts (not the small JSON parts).
    pub fn checkpoint_bytes(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Dense { params, state, .. } => 4 * (params.len() + state.len()) as u64,
                Part::Sparse { rows } => rows.checkpoint_bytes(),
            })
            .sum()
    }

    /// The shard of server `index` of `servers` for `tables`: dense ranges initialized,
    /// no sparse row yet.
    pub fn new(index: usize, servers: usize, tables: &[TableSpec]) -> Result<Shard> {
        if index >= servers {
            return Err(Error::InvalidArgument(format!("server index {index} is not below the {servers} servers")));
        }
        let mut parts = Vec::with_capacity(tables.len());
        for (i, spec) in tables.iter().enumerate() {
            spec.validate()?;
            if tables[..i].iter().any(|t| t.name == spec.name) {
                return Err(Error::InvalidArgument(format!("table {:?} is defined twice", spec.name)));
            }
            parts.push(match spec.kind {
                TableKind::Dense { len } => {
                    let range = dense_range(len, index, servers);
                    let n = (range.end - range.start) as usize;
                    Part::Dense {
                        params: range.clone().map(|i| initial(spec.init, i, 0)).collect(),
                        state: spec.optimizer.new_state(n),
                        range,
                        updates: 0,
                    }
                }
                TableKind::Sparse { width, .. } => Part::Sparse { rows: Rows::new(width as usize, &spec.optimizer) },
            });
        }
        let mut shard = Shard { index, servers, specs: tables.to_vec(), parts };
        shard.make_room();
        Ok(shard)
    }

    /// Makes room in each sparse table for the rows its spec expects at this server
    /// ([`expected_share`]): at the start, and in a shard loaded from a checkpoint.
    pub fn make_room(&mut self) {
        for (spec, part) in self.specs.iter().zip(&mut self.parts) {
            if let (TableKind::Sparse { expected_rows, .. }, Part::Sparse { rows }) = (&spec.kind, part) {
                rows.reserve(expected_share(*expected_rows, self.servers) as usize);
            }
        }
    }

    /// The tables.
    pub fn specs(&self) -> &[TableSpec] {
        &self.specs
    }

    /// Number of sparse rows held.
    pub fn rows(&self) -> usize {
        self.parts.iter().map(|p| if let Part::Sparse { rows, .. } = p { rows.len() } else { 0 }).sum()
    }

    fn table(&self, name: &str) -> Result<usize> {
        self.specs.iter().position(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
            Error::InvalidArgument(format!("no table named {name:?} (tables: {})", known.join(", ")))
        })
    }

    /// Elements `range` of dense table `name`, which must lie in this shard's range.
    pub fn pull_dense(&self, name: &str, range: Range<u64>) -> Result<Vec<f32>> {
        let mine = self.dense(name, range)?;
        let mut out = pool::FLOATS.take(mine.len());
        out.extend_from_slice(mine);
        Ok(out)
    }

    /// [`pull_dense`](Self::pull_dense) in place: the elements where the shard holds them.
    pub fn dense(&self, name: &str, range: Range<u64>) -> Result<&[f32]> {
        let t = self.table(name)?;
        let Part::Dense { range: held, params, .. } = &self.parts[t] else {
            return Err(Error::InvalidArgument(format!("table {name:?} is sparse: pull it by keys")));
        };
        self.check_range(name, held, &range)?;
        Ok(&params[(range.start - held.start) as usize..(range.end - held.start) as usize])
    }

    /// The rows of `keys` of sparse table `name`, concatenated; a row pulled for the first
    /// time is created by the table's initializer. Every key must belong to this server.
    pub fn pull_sparse(&mut self, name: &str, keys: &[u64]) -> Result<Vec<f32>> {
        let (spec, rows) = self.sparse_for_pull(name, keys)?;
        let mut out = pool::FLOATS.take(keys.len() * rows.width());
        rows.pull(keys, spec.init, &spec.optimizer, &mut out);
        Ok(out)
    }

    /// The values `pieces` pull (a [`Request::Pull`](super::proto::Request::Pull)), each
    /// piece's in turn: dense elements, or sparse rows in the order of their keys (created if
    /// new). Every piece is checked before any row is created.
    pub fn pull(&mut self, pieces: &[PullPiece]) -> Result<Vec<f32>> {
        let mut out = pool::FLOATS.take(self.pull_len(pieces)?);
        self.pull_each(pieces, |v| out.extend_from_slice(v));
        Ok(out)
    }

    /// [`Shard::pull`] as the frame of its reply (`proto::floats_frame`), the values
    /// written into the frame from the tables: one copy.
    pub fn pull_frame(&mut self, pieces: &[PullPiece]) -> Result<Vec<u8>> {
        let n = self.pull_len(pieces)?;
        Ok(super::proto::floats_frame_by(n, |out| self.pull_each(pieces, |v| super::floats::put_f32s(out, v))))
    }

    /// How many values `pieces` pull, once each is checked: a table of the piece's kind,
    /// elements or keys on this server, and all of them in one reply frame (so a pull
    /// repeating a large piece cannot make a server allocate more than a frame holds).
    fn pull_len(&self, pieces: &[PullPiece]) -> Result<usize> {
        let mut n: usize = 0;
        for p in pieces {
            let t = self.table(p.table())?;
            n += match (p, &self.parts[t]) {
                (PullPiece::Dense { table, start, end }, Part::Dense { range, .. }) => {
                    self.check_range(table, range, &(*start..*end))?;
                    (end - start) as usize
                }
                (PullPiece::Sparse { table, keys }, Part::Sparse { rows }) => {
                    self.check_keys(table, t, keys)?;
                    keys.len() * rows.width()
                }
                (PullPiece::SparseBags { table, keys, ends }, Part::Sparse { rows }) => {
                    bags::check(table, keys, ends)?;
                    self.check_keys(table, t, keys)?;
                    ends.len() * rows.width()
                }
                (PullPiece::Dense { table, .. }, _) => {
                    return Err(Error::InvalidArgument(format!("table {table:?} is sparse: pull it by keys")));
                }
                (PullPiece::Sparse { table, .. } | PullPiece::SparseBags { table, .. }, _) => {
                    return Err(Error::InvalidArgument(format!("table {table:?} is dense: pull it by range")));
                }
            };
            if n > MAX_PULL_VALUES {
                return Err(Error::InvalidArgument(format!(
                    "a pull of more than {MAX_PULL_VALUES} values (more than one reply frame holds): split it"
                )));
            }
        }
        Ok(n)
    }

    /// Gives `emit` the values of `pieces` (checked by [`pull_len`](Self::pull_len)) in
    /// order, a dense piece at once, a sparse one row by row.
    fn pull_each(&mut self, pieces: &[PullPiece], mut emit: impl FnMut(&[f32])) {
        for p in pieces {
            let t = self.table(p.table()).expect("a checked piece");
            let spec = &self.specs[t];
            match (p, &mut self.parts[t]) {
                (PullPiece::Dense { start, end, .. }, Part::Dense { range, params, .. }) => {
                    emit(&params[(start - range.start) as usize..(end - range.start) as usize]);
                }
                (PullPiece::Sparse { keys, .. }, Part::Sparse { rows }) => {
                    rows.pull_each(keys, spec.init, &spec.optimizer, &mut emit);
                }
                (PullPiece::SparseBags { keys, ends, .. }, Part::Sparse { rows }) => {
                    rows.pull_sums(keys, ends, spec.init, &spec.optimizer, &mut emit);
                }
                _ => unreachable!("pieces checked by pull_len"),
            }
        }
    }

    /// The spec and rows of sparse table `name`, once every one of `keys` is checked to be
    /// this server's.
    fn sparse_for_pull(&mut self, name: &str, keys: &[u64]) -> Result<(&TableSpec, &mut Rows)> {
        let t = self.table(name)?;
        self.check_keys(name, t, keys)?;
        let Part::Sparse { rows } = &mut self.parts[t] else { unreachable!("checked by check_keys") };
        Ok((&self.specs[t], rows))
    }

    fn check_range(&self, name: &str, held: &Range<u64>, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.start < held.start || range.end > held.end {
            return Err(Error::InvalidArgument(format!(
                "elements {}..{} of table {name:?} are not on server {} (it holds {}..{})",
                range.start, range.end, self.index, held.start, held.end
            )));
        }
        Ok(())
    }

    fn check_keys(&self, name: &str, t: usize, keys: &[u64]) -> Result<()> {
        if !matches!(self.parts[t], Part::Sparse { .. }) {
            return Err(Error::InvalidArgument(format!("table {name:?} is dense: pull it by range")));
        }
        let spread = KeySpread::new(self.servers);
        if let Some(k) = keys.iter().find(|&&k| spread.server(k) != self.index) {
            return Err(Error::InvalidArgument(format!(
                "key {k} of table {name:?} belongs to server {}, not server {}",
                sparse_server(*k, self.servers),
                self.index
            )));
        }
        Ok(())
    }

    /// Checks pushed gradients against the tables: known table, elements or keys on this
    /// server, the right number of floats. Nothing is changed.
    pub fn check(&self, grads: &[Grad]) -> Result<()> {
        for g in grads {
            let t = self.table(g.table())?;
            match (g, &self.parts[t]) {
                (Grad::Dense { table, offset, values }, Part::Dense { range, .. }) => {
                    self.check_range(table, range, &(*offset..offset.saturating_add(values.len() as u64)))?;
                }
                (Grad::Sparse { table, keys, values }, Part::Sparse { rows }) => {
                    let width = rows.width();
                    if values.len() != keys.len() * width {
                        return Err(Error::InvalidArgument(format!(
                            "gradient of table {table:?}: {} floats for {} keys of width {width} (expected {})",
                            values.len(),
                            keys.len(),
                            keys.len() * width
                        )));
                    }
                    // Keys just pulled were checked then (each key's server is a hash of it).
                    if !rows.pulled(keys) {
                        self.check_keys(table, t, keys)?;
                    }
                }
                (Grad::SparseBags { table, keys, ends, values }, Part::Sparse { rows }) => {
                    bags::check(table, keys, ends)?;
                    let width = rows.width();
                    if values.len() != ends.len() * width {
                        return Err(Error::InvalidArgument(format!(
                            "gradient of table {table:?}: {} floats for {} bags of width {width} (expected {})",
                            values.len(),
                            ends.len(),
                            ends.len() * width
                        )));
                    }
                    if !rows.pulled(keys) {
                        self.check_keys(table, t, keys)?;
                    }
                }
                (g, _) => {
                    let (is, push) =
                        if matches!(g, Grad::Dense { .. }) { ("sparse", "dense") } else { ("dense", "sparse") };
                    return Err(Error::InvalidArgument(format!(
                        "table {:?} is {is}, but a {push} gradient was pushed to it",
                        g.table()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Sums the gradients of `batch` table by table, in the order given (pushes, then the
    /// gradients within a push), then applies each table's optimizer once to the sum.
    /// The gradients must have passed [`check`](Self::check).
    pub fn apply<'a>(&mut self, batch: impl IntoIterator<Item = &'a [Grad]>) {
        let batch: Vec<&[Grad]> = batch.into_iter().collect();
        let whole = self.whole_dense_gradients(&batch);
        for (t, grads) in whole.iter().enumerate() {
            if let Some(grads) = grads {
                self.apply_whole_dense(t, grads);
            }
        }
        let mut sums: Vec<Option<Sum>> = (0..self.parts.len()).map(|_| None).collect();
        for grads in &batch {
            for g in grads.iter() {
                let t = self.table(g.table()).expect("checked gradients");
                if whole[t].is_some() {
                    continue;
                }
                if let (Grad::Sparse { .. } | Grad::SparseBags { .. }, Part::Sparse { .. }, None) =
                    (g, &self.parts[t], &sums[t])
                {
                    // Room for every key of this table in the batch.
                    let keys = batch.iter().flat_map(|gs| gs.iter()).filter(|h| h.table() == g.table());
                    let n = keys
                        .map(|h| match h {
                            Grad::Sparse { keys, .. } | Grad::SparseBags { keys, .. } => keys.len(),
                            Grad::Dense { .. } => 0,
                        })
                        .sum();
                    sums[t] = Some(Sum::Sparse(RowSums::with_capacity(n)));
                }
                self.add(&mut sums[t], t, g);
            }
        }
        for (t, sum) in sums.into_iter().enumerate() {
            if let Some(sum) = sum {
                self.apply_sum(t, sum);
            }
        }
    }

    /// For each dense table whose gradients in `batch` each cover all of this shard's range
    /// of it (as a trainer pushing its whole gradient does), those gradients' values in
    /// batch order; `None` for the other tables (summed by [`add`](Self::add)).
    fn whole_dense_gradients<'g>(&self, batch: &[&'g [Grad]]) -> Vec<Option<Vec<&'g [f32]>>> {
        let mut whole: Vec<Option<Vec<&[f32]>>> =
            self.parts.iter().map(|p| matches!(p, Part::Dense { .. }).then(Vec::new)).collect();
        for g in batch.iter().flat_map(|grads| grads.iter()) {
            let t = self.table(g.table()).expect("checked gradients");
            match (g, &self.parts[t], &mut whole[t]) {
                (Grad::Dense { offset, values, .. }, Part::Dense { range, .. }, Some(list))
                    if *offset == range.start && values.len() as u64 == range.end - range.start =>
                {
                    list.push(values);
                }
                (_, _, w) => *w = None,
            }
        }
        whole.into_iter().map(|w| w.filter(|list| !list.is_empty())).collect()
    }

    /// Applies to dense table `t` the sum of `grads` (each of the shard's whole range of it),
    /// [`WHOLE_CHUNK`] elements at a time: a chunk's sum, `0.0 + grads[0] + grads[1] + ...` in
    /// that order as [`add`](Self::add) makes it, is in a buffer that stays in the cache and
    /// goes straight to the optimizer, so no sum of the whole range is written and read back.
    /// The parameters come out bit for bit as with [`add`](Self::add) and
    /// [`apply_sum`](Self::apply_sum).
    fn apply_whole_dense(&mut self, t: usize, grads: &[&[f32]]) {
        let opt = self.specs[t].optimizer;
        let Part::Dense { params, state, updates, .. } = &mut self.parts[t] else { unreachable!("a dense table") };
        *updates += 1;
        let mut sum = [0f32; WHOLE_CHUNK];
        let n = params.len();
        for start in (0..n).step_by(WHOLE_CHUNK) {
            let end = (start + WHOLE_CHUNK).min(n);
            let acc = &mut sum[..end - start];
            for (a, v) in acc.iter_mut().zip(&grads[0][start..end]) {
                *a = 0.0 + v;
            }
            for g in &grads[1..] {
                for (a, v) in acc.iter_mut().zip(&g[start..end]) {
                    *a += v;
                }
            }
            opt.apply_range(params, state, start..end, *updates, acc);
        }
    }

    fn add<'g>(&mut self, sum: &mut Option<Sum<'g>>, t: usize, g: &'g Grad) {
        let (spec, part) = (&self.specs[t], &mut self.parts[t]);
        match (g, part) {
            (Grad::Dense { offset, values, .. }, Part::Dense { range, .. }) => {
                let n = (range.end - range.start) as usize;
                if sum.is_none() && values.len() == n {
                    // The first gradient covers the whole range: the sum starts as 0 + it,
                    // in one pass (no zeroing first).
                    let mut acc = pool::FLOATS.take(n);
                    acc.extend(values.iter().map(|v| 0.0 + v));
                    *sum = Some(Sum::Dense(acc));
                    return;
                }
                let Sum::Dense(acc) = sum.get_or_insert_with(|| {
                    let mut acc = pool::FLOATS.take(n);
                    acc.resize(n, 0.0);
                    Sum::Dense(acc)
                }) else {
                    unreachable!("one kind per table")
                };
                let at = (offset - range.start) as usize;
                for (a, v) in acc[at..at + values.len()].iter_mut().zip(values) {
                    *a += v;
                }
            }
            (Grad::Sparse { keys, values, .. }, Part::Sparse { rows }) => {
                let Some(Sum::Sparse(acc)) = sum else { unreachable!("made by apply") };
                rows.sum(keys, values, spec.init, &spec.optimizer, acc);
            }
            (Grad::SparseBags { keys, ends, values, .. }, Part::Sparse { rows }) => {
                let Some(Sum::Sparse(acc)) = sum else { unreachable!("made by apply") };
                rows.sum_bags(keys, ends, values, spec.init, &spec.optimizer, acc);
            }
            _ => unreachable!("checked gradients"),
        }
    }

    fn apply_sum(&mut self, t: usize, sum: Sum<'_>) {
        let (spec, part) = (&self.specs[t], &mut self.parts[t]);
        let opt = spec.optimizer;
        match (part, sum) {
            (Part::Dense { params, state, updates, .. }, Sum::Dense(g)) => {
                *updates += 1;
                opt.apply(params, state, *updates, &g);
                pool::FLOATS.give(g);
            }
            (Part::Sparse { rows }, Sum::Sparse(mut g)) => {
                rows.apply(&mut g, &opt);
                g.recycle();
            }
            _ => unreachable!("one kind per table"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Optimizer;
    use crate::proto::{self, Reply};
    use crate::table::{Init, dense_server};

    fn specs() -> Vec<TableSpec> {
        vec![
            TableSpec {
                name: "w".into(),
                kind: TableKind::Dense { len: 10 },
                init: Init::Uniform { scale: 1.0, seed: 3 },
                optimizer: Optimizer::sgd(0.5),
            },
            TableSpec {
                name: "emb".into(),
                kind: TableKind::Sparse { width: 2, expected_rows: 0 },
                init: Init::Uniform { scale: 0.1, seed: 9 },
                optimizer: Optimizer::adam(0.01),
            },
        ]
    }

    /// Keys held by server `s` of `n`.
    fn keys_of(s: usize, n: usize, count: usize) -> Vec<u64> {
        (0..).filter(|&k| sparse_server(k, n) == s).take(count).collect()
    }

    /// A sparse table expecting rows has room for this server's share from the start, and
    /// again once loaded from a checkpoint (which holds only the rows made).
    #[test]
    fn a_table_expecting_rows_has_room_for_its_share() {
        let mut tables = specs();
        tables[1].kind = TableKind::Sparse { width: 2, expected_rows: 10_000 };
        let room = |s: &Shard| match &s.parts[1] {
            Part::Sparse { rows } => rows.room(),
            Part::Dense { .. } => unreachable!("table 1 is sparse"),
        };
        let want = expected_share(10_000, 2) as usize;
        assert_eq!(want, 5_000 + 625 + 64);
        let mut s = Shard::new(1, 2, &tables).unwrap();
        assert!(room(&s) >= want, "{} rows of room", room(&s));
        s.pull_sparse("emb", &keys_of(1, 2, 10)).unwrap();
        let mut loaded: Shard = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert!(room(&loaded) < want, "a checkpoint holds the rows made, not the room");
        loaded.make_room();
        assert!(room(&loaded) >= want);
        assert_eq!(loaded, s);
        assert_eq!(room(&Shard::new(1, 2, &specs()).unwrap()), 8, "no hint: the smallest index");
    }

    #[test]
    fn a_dense_pull_returns_the_initial_values_of_the_shards_range() {
        let s = Shard::new(1, 3, &specs()).unwrap();
        let got = s.pull_dense("w", 3..6).unwrap();
        let want: Vec<f32> = (3..6).map(|i| initial(Init::Uniform { scale: 1.0, seed: 3 }, i, 0)).collect();
        assert_eq!(got, want);
        let e = s.pull_dense("w", 2..4).unwrap_err().to_string();
        assert!(e.contains("2..4") && e.contains("server 1") && e.contains("3..6"), "{e}");
    }

    #[test]
    fn rows_are_created_on_first_pull_the_same_on_any_server_count() {
        let mut one = Shard::new(0, 1, &specs()).unwrap();
        let keys = keys_of(2, 4, 5);
        let mut four = Shard::new(2, 4, &specs()).unwrap();
        assert_eq!(one.pull_sparse("emb", &keys).unwrap(), four.pull_sparse("emb", &keys).unwrap());
        assert_eq!(four.rows(), 5);
        let other = keys_of(0, 4, 1)[0];
        let e = four.pull_sparse("emb", &[other]).unwrap_err().to_string();
        assert!(e.contains(&format!("key {other}")) && e.contains("belongs to server 0"), "{e}");
    }

    /// The reply frame a server sends for a pull of several tables carries each piece's
    /// values in turn, the bits `pull_sparse` and `pull_dense` give; a bad piece is an error
    /// that creates no row.
    #[test]
    fn a_pull_of_several_tables_written_into_its_frame_carries_them_bit_for_bit() {
        let mut framed = Shard::new(1, 2, &specs()).unwrap();
        let mut plain = Shard::new(1, 2, &specs()).unwrap();
        let keys = [keys_of(1, 2, 7), keys_of(1, 2, 3)].concat();
        let (w, held) = ("w".to_string(), dense_range(10, 1, 2));
        let pieces = [
            PullPiece::Sparse { table: "emb".into(), keys: keys.clone() },
            PullPiece::Dense { table: w.clone(), start: held.start + 1, end: held.end },
            PullPiece::Sparse { table: "emb".into(), keys: keys[..2].to_vec() },
        ];
        let mut frame = framed.pull_frame(&pieces).unwrap();
        let Ok(Reply::Floats { values }) = proto::decode::<Reply>(&mut frame) else { panic!("not a floats reply") };
        let want = [
            plain.pull_sparse("emb", &keys).unwrap(),
            plain.pull_dense("w", held.start + 1..held.end).unwrap(),
            plain.pull_sparse("emb", &keys[..2]).unwrap(),
        ]
        .concat();
        assert_eq!(values.len(), keys.len() * 2 + (held.end - held.start - 1) as usize + 4);
        assert!(values.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert_eq!(framed.pull(&pieces).unwrap(), values, "the values as the frame carries them");
        assert_eq!(framed.rows(), 7, "repeated keys are one row");
        let other = keys_of(0, 2, 1)[0];
        let fresh = keys_of(1, 2, 9)[8];
        let bad = |p: PullPiece| vec![PullPiece::Sparse { table: "emb".into(), keys: vec![fresh] }, p];
        let e = framed.pull_frame(&bad(PullPiece::Sparse { table: "emb".into(), keys: vec![other] })).unwrap_err();
        assert!(e.to_string().contains("belongs to server 0"), "{e}");
        let e = framed.pull_frame(&bad(PullPiece::Sparse { table: w.clone(), keys: keys.clone() })).unwrap_err();
        assert!(e.to_string().contains("is dense: pull it by range"), "{e}");
        let e = framed.pull_frame(&bad(PullPiece::Dense { table: "emb".into(), start: 0, end: 1 })).unwrap_err();
        assert!(e.to_string().contains("is sparse: pull it by keys"), "{e}");
        let e = framed.pull(&bad(PullPiece::Dense { table: w, start: 0, end: held.end })).unwrap_err();
        assert!(e.to_string().contains("not on server 1"), "{e}");
        assert_eq!(framed.rows(), 7, "a refused pull creates no row, not even of its good pieces");
    }

    /// A pull whose pieces together hold more values than one reply frame is refused before
    /// anything is made (a client repeating a piece cannot make the server run out of memory).
    #[test]
    fn a_pull_of_more_than_a_frame_is_refused() {
        let mut tables = specs();
        tables[0].kind = TableKind::Dense { len: 1 << 23 };
        let mut s = Shard::new(0, 2, &tables).unwrap();
        let whole = PullPiece::Dense { table: "w".into(), start: 0, end: 1 << 22 };
        let fits = MAX_PULL_VALUES >> 22;
        let mut many = vec![PullPiece::Sparse { table: "emb".into(), keys: keys_of(0, 2, 3) }];
        many.extend(std::iter::repeat_n(whole, fits + 1));
        let e = s.pull_frame(&many).unwrap_err();
        assert!(e.to_string().contains("more than one reply frame holds"), "{e}");
        assert_eq!(s.rows(), 0, "no row made");
        many.truncate(3);
        assert_eq!(s.pull(&many).unwrap().len(), 3 * 2 + 2 * (1 << 22));
        assert_eq!(s.rows(), 3);
    }

    #[test]
    fn bad_gradients_are_refused_with_what_is_wrong() {
        let s = Shard::new(0, 2, &specs()).unwrap();
        let k = keys_of(0, 2, 1)[0];
        let cases = [
            (Grad::Sparse { table: "nope".into(), keys: vec![k], values: vec![0.0; 2] }, "no table named \"nope\""),
            (
                Grad::Sparse { table: "emb".into(), keys: vec![k], values: vec![0.0; 3] },
                "3 floats for 1 keys of width 2",
            ),
            (Grad::Dense { table: "w".into(), offset: 4, values: vec![0.0; 2] }, "not on server 0"),
            (Grad::Dense { table: "emb".into(), offset: 0, values: vec![0.0] }, "is sparse"),
            (Grad::Sparse { table: "w".into(), keys: vec![], values: vec![] }, "is dense"),
            (Grad::Dense { table: "w".into(), offset: u64::MAX, values: vec![0.0; 2] }, "not on server 0"),
        ];
        for (g, says) in cases {
            let e = s.check(&[g]).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        assert!(s.check(&[Grad::Dense { table: "w".into(), offset: 1, values: vec![1.0; 4] }]).is_ok());
        // Keys just pulled pass unchecked; one more key, another server's, is still refused.
        let mut s = s;
        let mine = keys_of(0, 2, 3);
        s.pull_sparse("emb", &mine).unwrap();
        assert!(s.check(&[Grad::Sparse { table: "emb".into(), keys: mine.clone(), values: vec![0.5; 6] }]).is_ok());
        let mut more = mine;
        more.push(keys_of(1, 2, 1)[0]);
        let e = s.check(&[Grad::Sparse { table: "emb".into(), keys: more, values: vec![0.5; 8] }]).unwrap_err();
        assert!(e.to_string().contains("belongs to server 1"), "{e}");
    }

    #[test]
    fn a_batch_is_summed_in_order_then_applied_once() {
        let mut s = Shard::new(0, 1, &specs()).unwrap();
        let before = s.pull_dense("w", 0..10).unwrap();
        let a = [Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0; 10] }];
        let b = [Grad::Dense { table: "w".into(), offset: 2, values: vec![2.0, 4.0] }];
        s.apply([&a[..], &b[..]]);
        let after = s.pull_dense("w", 0..10).unwrap();
        for i in 0..10 {
            let g = 1.0 + [0.0, 0.0, 2.0, 4.0].get(i).copied().unwrap_or(0.0);
            assert_eq!(after[i], before[i] - 0.5 * g, "element {i}");
        }
        // A sparse key pushed twice is one Adam step on the sum: it moves by lr.
        let k = 5;
        let before = s.pull_sparse("emb", &[k]).unwrap();
        let g = [Grad::Sparse { table: "emb".into(), keys: vec![k, k], values: vec![1.0, -1.0, 2.0, -3.0] }];
        s.apply([&g[..]]);
        let after = s.pull_sparse("emb", &[k]).unwrap();
        assert!((after[0] - (before[0] - 0.01)).abs() < 1e-6 && (after[1] - (before[1] + 0.01)).abs() < 1e-6);
    }

    /// A bagged push is each key's bag row summed per key, then one optimizer step per key
    /// (Adam here: one step on the sum is not two steps), the same bits as pushing each key
    /// its bag's row, whether or not its keys were just pulled; bad bags are refused.
    #[test]
    fn a_bagged_push_is_each_keys_bag_row_pushed_row_by_row() {
        let keys = keys_of(0, 1, 5);
        // Bags {k0, k1, k0}, {}, {k2, k3}, {k1, k4}: k0 twice in a bag, k1 in two bags.
        let bag_keys = vec![keys[0], keys[1], keys[0], keys[2], keys[3], keys[1], keys[4]];
        let ends = vec![3, 3, 5, 7];
        let bag_rows = vec![0.5, -1.0, 9.0, 9.0, 2.0, 0.25, -3.0, 1.5];
        let per_key: Vec<f32> =
            [0, 0, 0, 2, 2, 3, 3].iter().flat_map(|&b| bag_rows[2 * b..2 * b + 2].to_vec()).collect();
        for pull_first in [false, true] {
            let (mut bagged, mut plain) = (Shard::new(0, 1, &specs()).unwrap(), Shard::new(0, 1, &specs()).unwrap());
            if pull_first {
                let pieces =
                    [PullPiece::SparseBags { table: "emb".into(), keys: bag_keys.clone(), ends: ends.clone() }];
                let sums = bagged.pull(&pieces).unwrap();
                let rows = plain.pull_sparse("emb", &bag_keys).unwrap();
                assert_eq!(sums.len(), 8, "a row per bag");
                assert_eq!(sums[..2], [0.0 + rows[0] + rows[2] + rows[4], 0.0 + rows[1] + rows[3] + rows[5]]);
                assert_eq!(sums[2..4], [0.0, 0.0], "an empty bag");
            }
            let g = [Grad::SparseBags {
                table: "emb".into(),
                keys: bag_keys.clone(),
                ends: ends.clone(),
                values: bag_rows.clone(),
            }];
            bagged.check(&g).unwrap();
            bagged.apply([&g[..]]);
            plain.apply([&[Grad::Sparse { table: "emb".into(), keys: bag_keys.clone(), values: per_key.clone() }][..]]);
            let (a, b) = (bagged.pull_sparse("emb", &keys).unwrap(), plain.pull_sparse("emb", &keys).unwrap());
            assert_eq!(
                a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        let s = Shard::new(0, 1, &specs()).unwrap();
        let bad = |ends: Vec<u64>, values: usize| {
            let g = [Grad::SparseBags { table: "emb".into(), keys: vec![1, 2], ends, values: vec![0.0; values] }];
            s.check(&g).unwrap_err().to_string()
        };
        assert!(bad(vec![1], 2).contains("the last bag ends at key 1, but there are 2 keys"));
        assert!(bad(vec![2, 1, 2], 6).contains("bag 1 ends at key 1, before bag 0 ends (at 2)"));
        assert!(bad(vec![1, 2], 2).contains("2 floats for 2 bags of width 2 (expected 4)"));
        let dense = [Grad::SparseBags { table: "w".into(), keys: vec![], ends: vec![], values: vec![] }];
        assert!(s.check(&dense).unwrap_err().to_string().contains("is dense"));
    }

    #[test]
    fn whole_dense_gradients_summed_chunk_by_chunk_give_the_bits_of_a_sum_of_pieces() {
        // Gradients covering the whole range take the chunked path; the same gradients cut in
        // two pieces each take the summed one. Every optimizer, over more than two chunks.
        let n = 2 * WHOLE_CHUNK + 123;
        for optimizer in [
            Optimizer::sgd(0.5),
            Optimizer::Momentum { lr: 0.1, momentum: 0.9 },
            Optimizer::Adagrad { lr: 0.1, eps: 1e-8, initial_accumulator: 0.1 },
            Optimizer::adam(0.01),
        ] {
            let spec = TableSpec {
                name: "w".into(),
                kind: TableKind::Dense { len: n as u64 },
                init: Init::Uniform { scale: 1.0, seed: 5 },
                optimizer,
            };
            let (mut chunked, mut summed) =
                (Shard::new(0, 1, std::slice::from_ref(&spec)).unwrap(), Shard::new(0, 1, &[spec]).unwrap());
            for step in 0..4u32 {
                // Three trainers; some values -0.0, so that the sum's start (0.0 + first) shows.
                let grads: Vec<Vec<f32>> = (0..3u32)
                    .map(|t| {
                        (0..n as u32)
                            .map(|i| {
                                if (i + t) % 7 == 0 {
                                    -0.0
                                } else {
                                    ((i * 31 + t * 7 + step) % 97) as f32 * 0.013 - 0.6
                                }
                            })
                            .collect()
                    })
                    .collect();
                let whole: Vec<[Grad; 1]> =
                    grads.iter().map(|g| [Grad::Dense { table: "w".into(), offset: 0, values: g.clone() }]).collect();
                let cut = WHOLE_CHUNK / 2 + 1;
                let pieces: Vec<[Grad; 2]> = grads
                    .iter()
                    .map(|g| {
                        [
                            Grad::Dense { table: "w".into(), offset: 0, values: g[..cut].to_vec() },
                            Grad::Dense { table: "w".into(), offset: cut as u64, values: g[cut..].to_vec() },
                        ]
                    })
                    .collect();
                chunked.apply(whole.iter().map(|g| &g[..]));
                summed.apply(pieces.iter().map(|g| &g[..]));
            }
            let bits =
                |s: &Shard| s.pull_dense("w", 0..n as u64).unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let (a, b) = (bits(&chunked), bits(&summed));
            let differ = a.iter().zip(&b).position(|(x, y)| x != y);
            assert_eq!(differ, None, "{optimizer:?}: the parameters differ from this element on");
            assert!(chunked == summed, "{optimizer:?}: the optimizer state or the update counts differ");
        }
    }

    #[test]
    fn sharded_training_equals_one_shard() {
        // The same gradients through 3 shards or 1 give the same bits.
        let mut one = Shard::new(0, 1, &specs()).unwrap();
        let mut three: Vec<Shard> = (0..3).map(|i| Shard::new(i, 3, &specs()).unwrap()).collect();
        for step in 0..5u64 {
            let keys: Vec<u64> = (0..20).map(|i| (i * 7 + step) % 13).collect();
            let vals: Vec<f32> = (0..40).map(|i| (i as f32 - step as f32) * 0.01).collect();
            let dense: Vec<f32> = (0..10).map(|i| i as f32 * 0.1 + step as f32).collect();
            one.apply([&[
                Grad::Dense { table: "w".into(), offset: 0, values: dense.clone() },
                Grad::Sparse { table: "emb".into(), keys: keys.clone(), values: vals.clone() },
            ][..]]);
            for (s, shard) in three.iter_mut().enumerate() {
                let r = dense_range(10, s, 3);
                let (mut k, mut v) = (Vec::new(), Vec::new());
                for (i, key) in keys.iter().enumerate() {
                    if sparse_server(*key, 3) == s {
                        k.push(*key);
                        v.extend_from_slice(&vals[2 * i..2 * i + 2]);
                    }
                }
                let grads = [
                    Grad::Dense {
                        table: "w".into(),
                        offset: r.start,
                        values: dense[r.start as usize..r.end as usize].to_vec(),
                    },
                    Grad::Sparse { table: "emb".into(), keys: k, values: v },
                ];
                shard.check(&grads).unwrap();
                shard.apply([&grads[..]]);
            }
        }
        for i in 0..10 {
            let s = dense_server(10, i, 3);
            assert_eq!(three[s].pull_dense("w", i..i + 1).unwrap(), one.pull_dense("w", i..i + 1).unwrap());
        }
        for k in 0..13 {
            let s = sparse_server(k, 3);
            assert_eq!(three[s].pull_sparse("emb", &[k]).unwrap(), one.pull_sparse("emb", &[k]).unwrap());
        }
    }
}

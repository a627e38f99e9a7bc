//! A sparse table's rows at one server (pure), in one contiguous arena: row `r` is the
//! `stride` floats at `data[r * stride..]` (its `width` parameters, then its optimizer
//! state), its key is `keys[r]`, its update count and sum slot `meta[r]`; a hash index maps a
//! key to its row. A row is created on first use by the table's initializer and never removed.
//!
//! A batch of gradients is summed into [`RowSums`]: a slot per distinct row in the order the
//! rows first appear, each slot summed in the order the gradients are given (so the sums, and
//! the model, never depend on anything else), then the optimizer is applied once per row. A
//! row given once (almost every row of a batch of random keys) is not copied into a sum: its
//! slot points at the gradient row, which the optimizer reads where it is. A profile of the
//! earlier layout (a `HashMap` of one heap `Vec` per row, sums in a `BTreeMap` of `Vec`s) had
//! half of a sparse step's server time in finding rows and in `malloc`/`free`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::arena::AlignedFloats;
use super::huge;
use super::key_index::{KeyIndex, prefetch};
use super::optim::Optimizer;
use super::table::{Init, initial};
use warren_wire::pool;

/// No slot (see [`Rows::slot`]).
const NO_SLOT: u32 = u32::MAX;

/// How many keys (rows) ahead a batch asks the CPU to fetch their index slots (rows): both
/// are spread over memory far larger than the caches, so each is a cache miss. 32 (was 12)
/// keeps more of those misses in flight: 10 % less row work in `benches/ps_rows.rs`, and 64
/// no better than 32.
const PREFETCH_AHEAD: usize = 32;

/// The rows of one sparse table at one server.
#[derive(Clone, Debug)]
pub(crate) struct Rows {
    width: usize,
    /// Floats per row: `width` parameters and `slots * width` of optimizer state.
    stride: usize,
    index: KeyIndex,
    keys: Vec<u64>,
    /// Aligned to cache lines, so that a row of 16 floats is one line, not two.
    data: AlignedFloats,
    /// Each row's update count and sum slot, side by side: [`Rows::apply`] reads and writes
    /// both, so one cache miss a row instead of two.
    meta: Vec<Meta>,
    /// The rows of the last few pulls' keys ([`Located`]).
    located: Located,
}

/// What a row has beside its floats.
#[derive(Clone, Copy, Debug)]
struct Meta {
    /// How many times the optimizer updated it.
    updates: u64,
    /// Scratch of [`Rows::sum`]: its slot in the sums being made (`NO_SLOT` outside).
    slot: u32,
}

impl Meta {
    /// A row updated `updates` times, in no sums.
    fn new(updates: u64) -> Meta {
        Meta { updates, slot: NO_SLOT }
    }
}

/// The keys of the last [`LOCATED`] sparse pulls and their rows: a trainer pushes gradients
/// for the keys it pulled, in the same order, so the push finds its rows by comparing the key
/// lists (one sequential pass) instead of looking each key up again (a cache miss each: half
/// of the servers' time in finding rows). Rows never move, so a remembered row stays right.
#[derive(Debug, Default)]
struct Located {
    /// Oldest first.
    recent: std::collections::VecDeque<(Vec<u64>, Vec<u32>)>,
    /// Keys in `recent`.
    keys: usize,
}

impl Clone for Located {
    /// A copy of the rows (a snapshot) remembers nothing: it serves no pushes.
    fn clone(&self) -> Located {
        Located::default()
    }
}

/// How many pulls' rows are remembered at most (one per trainer of a typical job, a few more).
const LOCATED: usize = 8;

/// How many keys are remembered at most (12 bytes each: 24 MiB per sparse table and server).
const LOCATED_KEYS: usize = 2 << 20;

impl Located {
    /// Where the rows remembered for exactly `keys` are, if they are.
    fn find(&self, keys: &[u64]) -> Option<usize> {
        self.recent.iter().position(|(k, _)| k.as_slice() == keys)
    }

    /// Takes the rows remembered for exactly `keys`, if any.
    fn take(&mut self, keys: &[u64]) -> Option<Vec<u32>> {
        let i = self.find(keys)?;
        let (k, rows) = self.recent.remove(i)?;
        self.keys -= k.len();
        Some(rows)
    }

    /// Remembers `rows` for `keys`, forgetting the oldest beyond [`LOCATED`] pulls or
    /// [`LOCATED_KEYS`] keys (a larger pull is not remembered).
    fn remember(&mut self, keys: &[u64], rows: Vec<u32>) {
        if keys.len() > LOCATED_KEYS {
            return;
        }
        while self.recent.len() == LOCATED || self.keys + keys.len() > LOCATED_KEYS {
            let Some((k, _)) = self.recent.pop_front() else { break };
            self.keys -= k.len();
        }
        self.keys += keys.len();
        self.recent.push_back((keys.to_vec(), rows));
    }
}

/// A batch's gradients summed per row (see the module documentation), borrowing the
/// gradients (`'g`) until they are applied.
#[derive(Debug, Default)]
pub(crate) struct RowSums<'g> {
    /// The row of each slot.
    rows: Vec<u32>,
    /// Where each slot's sum is.
    from: Vec<SumOf>,
    /// The gradient rows given, one slice per [`Rows::sum`] call (`width` floats per key).
    given: Vec<&'g [f32]>,
    /// `width` floats per row given more than once.
    sums: Vec<f32>,
}

/// Where a slot of [`RowSums`] has its sum.
#[derive(Clone, Copy, Debug)]
enum SumOf {
    /// A row given once: row `at` of `given[grads]`.
    Given { grads: u32, at: u32 },
    /// A row given more than once: summed at row `at` of `sums`.
    Summed { at: u32 },
}

impl Rows {
    /// No rows yet, of `width` parameters and the state `opt` keeps for them.
    pub fn new(width: usize, opt: &Optimizer) -> Rows {
        Rows {
            width,
            stride: width * (1 + opt.slots()),
            index: KeyIndex::default(),
            keys: Vec::new(),
            data: AlignedFloats::default(),
            meta: Vec::new(),
            located: Located::default(),
        }
    }

    /// Makes room for `rows` rows in all (index, keys, parameters and state, counts), so that
    /// none of them grows before the table holds that many.
    pub fn reserve(&mut self, rows: usize) {
        self.index.reserve(rows);
        let more = rows.saturating_sub(self.len());
        self.keys.reserve(more);
        self.data.reserve(more * self.stride);
        huge::reserve(&mut self.meta, more);
    }

    /// How many rows it holds before its index grows.
    #[cfg(test)]
    pub fn room(&self) -> usize {
        self.index.capacity()
    }

    /// Floats per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// About the bytes these rows take in a checkpoint: each row's key, floats and update
    /// count.
    pub fn checkpoint_bytes(&self) -> u64 {
        self.len() as u64 * (16 + 4 * self.stride as u64)
    }

    /// The rows of `keys` (in order) into `out`, created by `init` (parameters) and `opt`
    /// (state) if new.
    fn locate(&mut self, keys: &[u64], init: Init, opt: &Optimizer, out: &mut Vec<u32>) {
        out.reserve(keys.len());
        for (i, &k) in keys.iter().enumerate() {
            if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
                self.index.prefetch(ahead);
            }
            let next = u32::try_from(self.keys.len()).ok().filter(|&n| n < u32::MAX);
            let (r, new) = self.index.get_or_insert(k, next.expect("fewer than 2^32 - 1 rows in a shard"));
            if new {
                self.create(k, init, opt);
            }
            out.push(r);
        }
    }

    /// A new last row for `key`.
    fn create(&mut self, key: u64, init: Init, opt: &Optimizer) {
        // The counts are read at random, as the rows are: on huge pages too.
        huge::reserve(&mut self.meta, 1);
        self.keys.push(key);
        self.meta.push(Meta::new(0));
        let at = self.data.len();
        self.data.resize(at + self.stride, opt.state_start());
        for (c, p) in self.data[at..at + self.width].iter_mut().enumerate() {
            *p = initial(init, key, c as u32);
        }
    }

    /// Appends the parameters of the rows of `keys` to `out`, in the order of `keys`,
    /// creating the rows that are new.
    pub fn pull(&mut self, keys: &[u64], init: Init, opt: &Optimizer, out: &mut Vec<f32>) {
        out.reserve(keys.len() * self.width);
        self.pull_each(keys, init, opt, |row| out.extend_from_slice(row));
    }

    /// [`Rows::pull`], giving each row's parameters to `emit`, in the order of `keys`.
    pub fn pull_each(&mut self, keys: &[u64], init: Init, opt: &Optimizer, mut emit: impl FnMut(&[f32])) {
        let mut rows = Vec::new();
        self.locate(keys, init, opt, &mut rows);
        for (i, &r) in rows.iter().enumerate() {
            if let Some(&ahead) = rows.get(i + PREFETCH_AHEAD) {
                prefetch(&self.data[ahead as usize * self.stride]);
            }
            let at = r as usize * self.stride;
            emit(&self.data[at..at + self.width]);
        }
        self.located.remember(keys, rows);
    }

    /// The sum of each bag's rows (`keys` cut by `ends`, see [`bags`](super::bags)), bag by
    /// bag, to `emit`: `0.0`, plus the bag's rows in the order of its keys (an empty bag,
    /// zeros). Rows that are new are created, as by [`Rows::pull`].
    pub fn pull_sums(&mut self, keys: &[u64], ends: &[u64], init: Init, opt: &Optimizer, mut emit: impl FnMut(&[f32])) {
        let (w, stride) = (self.width, self.stride);
        let mut rows = Vec::new();
        self.locate(keys, init, opt, &mut rows);
        let mut acc = vec![0f32; w];
        let mut start = 0;
        for &end in ends {
            acc.fill(0.0);
            for i in start..end as usize {
                if let Some(&ahead) = rows.get(i + PREFETCH_AHEAD) {
                    prefetch(&self.data[ahead as usize * stride]);
                }
                let at = rows[i] as usize * stride;
                for (a, v) in acc.iter_mut().zip(&self.data[at..at + w]) {
                    *a += v;
                }
            }
            emit(&acc);
            start = end as usize;
        }
        self.located.remember(keys, rows);
    }

    /// Whether `keys` are exactly the keys of a remembered pull (see [`Located`]): a push of
    /// the keys a trainer pulled, whose keys were checked when they were pulled.
    pub fn pulled(&self, keys: &[u64]) -> bool {
        self.located.find(keys).is_some()
    }

    /// Adds gradient rows `values` (`width` floats per key, in the order of `keys`) to
    /// `sums`, creating the rows that are new: a row's sum is its gradient rows added in the
    /// order given (a row given once, that row). `values` is read again when the sums are
    /// applied.
    pub fn sum<'g>(&mut self, keys: &[u64], values: &'g [f32], init: Init, opt: &Optimizer, sums: &mut RowSums<'g>) {
        self.sum_by(keys, values, 0..keys.len(), init, opt, sums);
    }

    /// [`Rows::sum`] of a bagged gradient: `values` holds one gradient row per bag of `keys`
    /// (cut by `ends`, see [`bags`](super::bags)), which counts for every key of the bag.
    pub fn sum_bags<'g>(
        &mut self,
        keys: &[u64],
        ends: &[u64],
        values: &'g [f32],
        init: Init,
        opt: &Optimizer,
        sums: &mut RowSums<'g>,
    ) {
        self.sum_by(keys, values, super::bags::bag_of_each_key(ends), init, opt, sums);
    }

    /// Adds to `sums`, for each of `keys` in order, gradient row `grad_rows[i]` of `values`.
    fn sum_by<'g>(
        &mut self,
        keys: &[u64],
        values: &'g [f32],
        grad_rows: impl Iterator<Item = usize>,
        init: Init,
        opt: &Optimizer,
        sums: &mut RowSums<'g>,
    ) {
        let w = self.width;
        let rows = match self.located.take(keys) {
            Some(rows) => rows,
            None => {
                let mut rows = Vec::new();
                self.locate(keys, init, opt, &mut rows);
                rows
            }
        };
        let grads = u32::try_from(sums.given.len()).expect("fewer than 2^32 gradients in a batch");
        sums.given.push(values);
        for (i, (&r, at)) in rows.iter().zip(grad_rows).enumerate() {
            if let Some(&ahead) = rows.get(i + PREFETCH_AHEAD) {
                prefetch(&self.meta[ahead as usize]);
            }
            let g = &values[at * w..(at + 1) * w];
            let r = r as usize;
            let s = match self.meta[r].slot {
                NO_SLOT => {
                    self.meta[r].slot = sums.rows.len() as u32;
                    sums.rows.push(r as u32);
                    sums.from.push(SumOf::Given { grads, at: at as u32 });
                    continue;
                }
                s => s as usize,
            };
            let at = match sums.from[s] {
                SumOf::Summed { at } => at as usize,
                SumOf::Given { grads, at } => {
                    // Given a second time: its sum starts as the first.
                    let first = &sums.given[grads as usize][at as usize * w..][..w];
                    let to = sums.sums.len() / w;
                    sums.sums.extend_from_slice(first);
                    sums.from[s] = SumOf::Summed { at: to as u32 };
                    to
                }
            };
            for (a, v) in sums.sums[at * w..(at + 1) * w].iter_mut().zip(g) {
                *a += v;
            }
        }
    }

    /// Applies `opt` once to each row of `sums` with its sum, and empties `sums`.
    pub fn apply(&mut self, sums: &mut RowSums<'_>, opt: &Optimizer) {
        let (w, stride) = (self.width, self.stride);
        for (i, (&r, from)) in sums.rows.iter().zip(&sums.from).enumerate() {
            if let Some(&ahead) = sums.rows.get(i + PREFETCH_AHEAD) {
                let ahead = ahead as usize;
                prefetch(&self.data[ahead * stride]);
                prefetch(&self.meta[ahead]);
            }
            let g: &[f32] = match *from {
                SumOf::Summed { at } => &sums.sums[at as usize * w..][..w],
                SumOf::Given { grads, at } => &sums.given[grads as usize][at as usize * w..][..w],
            };
            let r = r as usize;
            let meta = &mut self.meta[r];
            meta.slot = NO_SLOT;
            meta.updates += 1;
            let (p, s) = self.data[r * stride..(r + 1) * stride].split_at_mut(w);
            opt.apply(p, s, meta.updates, g);
        }
        sums.rows.clear();
        sums.from.clear();
        sums.given.clear();
        sums.sums.clear();
    }
}

impl RowSums<'_> {
    /// Empty sums with room for `keys` rows (the sums of rows given more than once, a few in
    /// a batch of random keys, grow as needed).
    pub fn with_capacity(keys: usize) -> Self {
        RowSums { rows: Vec::with_capacity(keys), from: Vec::with_capacity(keys), given: Vec::new(), sums: Vec::new() }
    }

    /// Gives the sum buffer back to the [pool](warren_wire::pool).
    pub fn recycle(self) {
        pool::FLOATS.give(self.sums);
    }
}

impl PartialEq for Rows {
    /// The same rows with the same keys, parameters, state and update counts (in the same
    /// order; the scratch is not compared).
    fn eq(&self, other: &Rows) -> bool {
        self.width == other.width
            && self.stride == other.stride
            && self.keys == other.keys
            && self.meta.iter().map(|m| m.updates).eq(other.meta.iter().map(|m| m.updates))
            && self.data.iter().map(|v| v.to_bits()).eq(other.data.iter().map(|v| v.to_bits()))
    }
}

/// How [`Rows`] are written: the arrays whole (binary in a frame or a checkpoint).
#[derive(Serialize)]
struct RowsOut<'a> {
    width: usize,
    stride: usize,
    #[serde(with = "super::floats::u64s")]
    keys: &'a [u64],
    #[serde(with = "super::floats")]
    data: &'a [f32],
    #[serde(with = "super::floats::u64s")]
    updates: Vec<u64>,
}

/// What [`RowsOut`] wrote.
#[derive(Deserialize)]
struct RowsIn {
    width: usize,
    stride: usize,
    #[serde(with = "super::floats::u64s")]
    keys: Vec<u64>,
    #[serde(with = "super::floats")]
    data: Vec<f32>,
    #[serde(with = "super::floats::u64s")]
    updates: Vec<u64>,
}

impl Serialize for Rows {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let updates = self.meta.iter().map(|m| m.updates).collect();
        RowsOut { width: self.width, stride: self.stride, keys: &self.keys, data: &self.data[..], updates }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Rows {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rows, D::Error> {
        let RowsIn { width, stride, keys, data, updates } = RowsIn::deserialize(d)?;
        if width == 0 || stride % width != 0 || Some(data.len()) != keys.len().checked_mul(stride) {
            return Err(D::Error::custom(format!(
                "sparse rows: {} floats for {} keys of width {width} and stride {stride}",
                data.len(),
                keys.len()
            )));
        }
        if updates.len() != keys.len() || keys.len() >= u32::MAX as usize {
            return Err(D::Error::custom(format!(
                "sparse rows: {} update counts for {} keys",
                updates.len(),
                keys.len()
            )));
        }
        let mut index = KeyIndex::with_capacity(keys.len());
        for (r, &k) in keys.iter().enumerate() {
            if !index.get_or_insert(k, r as u32).1 {
                return Err(D::Error::custom(format!("sparse rows: key {k} twice")));
            }
        }
        // On huge pages, as the counts of rows created by pulls are (see `Rows::create`).
        let mut meta = Vec::new();
        huge::reserve(&mut meta, updates.len());
        meta.extend(updates.into_iter().map(Meta::new));
        Ok(Rows { width, stride, index, keys, data: data.into(), meta, located: Located::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init() -> Init {
        Init::Uniform { scale: 0.1, seed: 4 }
    }

    #[test]
    fn rows_start_from_the_initializer_and_the_optimizers_state() {
        let opt = Optimizer::Adagrad { lr: 0.1, eps: 0.0, initial_accumulator: 0.25 };
        let mut rows = Rows::new(3, &opt);
        let mut out = Vec::new();
        rows.pull(&[9, 4, 9], init(), &opt, &mut out);
        let want: Vec<f32> = [9, 4, 9].iter().flat_map(|&k| (0..3).map(move |c| initial(init(), k, c))).collect();
        assert_eq!(out, want);
        assert_eq!(rows.len(), 2, "key 9 is one row");
        assert_eq!(&rows.data[3..6], &[0.25; 3], "the accumulator starts at its initial value");
    }

    /// Room made for rows up front ([`Rows::reserve`]) is where they go: making them moves
    /// no array and grows no index (rows made without it do), and they are the same rows.
    #[test]
    fn rows_made_in_room_made_up_front_move_nothing() {
        let opt = Optimizer::adam(0.1);
        let keys: Vec<u64> = (0..5000u64).map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let mut roomy = Rows::new(16, &opt);
        roomy.reserve(keys.len());
        let at = |r: &Rows| (r.data.as_ptr(), r.meta.as_ptr(), r.keys.as_ptr(), r.index.capacity());
        let before = at(&roomy);
        assert!(before.3 >= keys.len());
        let mut grown = Rows::new(16, &opt);
        let grown_before = at(&grown);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for chunk in keys.chunks(700) {
            roomy.pull(chunk, init(), &opt, &mut a);
            grown.pull(chunk, init(), &opt, &mut b);
        }
        assert_eq!(roomy.len(), keys.len());
        assert_eq!(at(&roomy), before, "no array moved, the index did not grow");
        assert_ne!(at(&grown).3, grown_before.3, "without the room, the index grew");
        assert_eq!(a, b);
        assert!(roomy == grown, "the same rows either way");
    }

    #[test]
    fn sums_follow_the_order_given_and_each_row_is_updated_once() {
        let opt = Optimizer::sgd(1.0);
        let mut rows = Rows::new(2, &opt);
        let mut before = Vec::new();
        rows.pull(&[1, 2], Init::Zeros, &opt, &mut before);
        let mut sums = RowSums::default();
        rows.sum(&[2, 1, 2], &[1.0, 2.0, 10.0, 20.0, 100.0, 200.0], Init::Zeros, &opt, &mut sums);
        rows.sum(&[7], &[-0.0, 0.5], Init::Zeros, &opt, &mut sums);
        assert_eq!(sums.rows, vec![1, 0, 2], "slots in the order rows first appear; key 7 is new");
        assert_eq!(sums.sums, vec![101.0, 202.0], "only the row given twice is copied to be summed");
        assert!(matches!(
            sums.from[..],
            [SumOf::Summed { at: 0 }, SumOf::Given { grads: 0, at: 1 }, SumOf::Given { grads: 1, at: 0 }]
        ));
        rows.apply(&mut sums, &opt);
        let mut after = Vec::new();
        rows.pull(&[1, 2, 7], Init::Zeros, &opt, &mut after);
        assert_eq!(after, vec![-10.0, -20.0, -101.0, -202.0, 0.0, -0.5]);
        assert_eq!(rows.meta.iter().map(|m| m.updates).collect::<Vec<_>>(), vec![1, 1, 1]);
        assert!(rows.meta.iter().all(|m| m.slot == NO_SLOT) && sums.rows.is_empty());
    }

    /// A push of the keys a pull just located (the usual trainer step) takes their rows from
    /// the pull, also when other pulls created rows in between; any other push looks its keys
    /// up. Either way the same model as rows that were never pulled.
    #[test]
    fn a_push_of_pulled_keys_reuses_their_rows_and_changes_nothing() {
        let opt = Optimizer::sgd(0.5);
        let grads = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let (mut pulled, mut fresh) = (Rows::new(2, &opt), Rows::new(2, &opt));
        let (mut out, mut sums) = (Vec::new(), RowSums::default());
        for step in 0..3 {
            pulled.pull(&[30, 10, 20], init(), &opt, &mut out);
            pulled.pull(&[40 + step, 10], init(), &opt, &mut out);
            assert!(pulled.located.recent.iter().any(|(k, _)| k == &[30, 10, 20]));
            pulled.sum(&[30, 10, 20], &grads, init(), &opt, &mut sums);
            assert!(!pulled.located.recent.iter().any(|(k, _)| k == &[30, 10, 20]), "taken by the push");
            pulled.sum(&[20, 30, 10], &grads, init(), &opt, &mut sums);
            pulled.apply(&mut sums, &opt);
            fresh.pull(&[40 + step, 10], init(), &opt, &mut out);
            fresh.sum(&[30, 10, 20], &grads, init(), &opt, &mut sums);
            fresh.sum(&[20, 30, 10], &grads, init(), &opt, &mut sums);
            fresh.apply(&mut sums, &opt);
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pulled.pull(&[10, 20, 30, 40, 41, 42], init(), &opt, &mut a);
        fresh.pull(&[10, 20, 30, 40, 41, 42], init(), &opt, &mut b);
        assert_eq!(a, b);
        assert_eq!(pulled.meta.iter().map(|m| m.updates).sum::<u64>(), 9, "rows 10, 20, 30 once per step");
        for _ in 0..2 * LOCATED {
            pulled.pull(&[10], init(), &opt, &mut a);
        }
        assert_eq!(pulled.located.recent.len(), LOCATED, "only the last pulls are remembered");
        assert_eq!(pulled.located.keys, LOCATED);
        assert!(pulled.clone().located.recent.is_empty(), "a snapshot remembers no pulls");
    }

    #[test]
    fn rows_cross_a_frame_bit_for_bit_and_bad_ones_are_refused() {
        let opt = Optimizer::adam(0.1);
        let mut rows = Rows::new(2, &opt);
        let mut sums = RowSums::default();
        rows.sum(&[5, 6], &[1.0, -1.0, 0.5, 2.0], init(), &opt, &mut sums);
        rows.apply(&mut sums, &opt);
        let back: Rows = crate::proto::decode(&mut crate::proto::encode(&rows)).unwrap();
        assert_eq!(back, rows);
        assert_eq!(back.index.get(6), Some(1));
        let json = serde_json::to_value(&rows).unwrap();
        let mut bad = json.clone();
        bad["updates"] = serde_json::json!("0100000000000000");
        let e = serde_json::from_value::<Rows>(bad).unwrap_err().to_string();
        assert!(e.contains("1 update counts for 2 keys"), "{e}");
        let mut twice = json;
        twice["keys"] = serde_json::json!("05000000000000000500000000000000");
        let e = serde_json::from_value::<Rows>(twice).unwrap_err().to_string();
        assert!(e.contains("key 5 twice"), "{e}");
    }
}

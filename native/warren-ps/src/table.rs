//! Tables and how they are split across servers (pure): a dense table's elements are cut into
//! `S` contiguous ranges, a sparse table's rows are spread by a hash of their key, and a
//! sparse row is created on first use by an initializer seeded by its key.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use strength_reduce::StrengthReducedU64;

use super::optim::Optimizer;
use warren_base::error::{Error, Result};

/// What a table holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TableKind {
    /// `len` `f32` elements, split into `S` contiguous ranges.
    Dense {
        /// Number of elements.
        len: u64,
    },
    /// Rows of `width` `f32`s, keyed by `u64`, hash-partitioned; a row exists once pulled.
    Sparse {
        /// Floats per row.
        width: u32,
        /// How many rows the whole table is expected to hold (0, the default: not known). A
        /// hint, not a bound: each server makes room for its share up front (see
        /// [`expected_share`]), so a table filling up does not stop to grow its index and
        /// arrays; rows beyond it are still made, growing them then.
        #[serde(default, skip_serializing_if = "is_zero")]
        expected_rows: u64,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most rows a server makes room for up front ([`expected_share`]): 32 Mi, an index of
/// 1 GiB. A larger hint (a typo, say) must not take the machine's memory before any row exists.
pub const MAX_EXPECTED_SHARE: u64 = 32 << 20;

/// The rows a server of `servers` makes room for when a sparse table expects `expected_rows`
/// in all: its share, plus an eighth and 64 for the keys' uneven spread over the servers, at
/// most [`MAX_EXPECTED_SHARE`] (0 when nothing is expected).
///
/// Growing is what the room saves: at about half a million rows a server, a table that
/// outgrows its index and arrays stops for about 0.2 s to move them (docs/benchmarks-ps.md),
/// and in a sync job every trainer waits on it.
pub fn expected_share(expected_rows: u64, servers: usize) -> u64 {
    if expected_rows == 0 {
        return 0;
    }
    let share = expected_rows.div_ceil(servers.max(1) as u64);
    share.saturating_add(share / 8).saturating_add(64).min(MAX_EXPECTED_SHARE)
}

/// How new parameters start.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "init", rename_all = "snake_case")]
pub enum Init {
    /// All zeros.
    Zeros,
    /// Uniform in `[-scale, scale)`, a pure function of `(seed, key or index, column)`: the
    /// same on every server, in every run, whatever the number of servers.
    Uniform {
        /// Half-width of the interval.
        scale: f32,
        /// Seed mixed with the key.
        seed: u64,
    },
}

/// A table of the job: its name, shape, initializer and optimizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableSpec {
    /// The name trainers use.
    pub name: String,
    /// Dense or sparse, and its size.
    #[serde(flatten)]
    pub kind: TableKind,
    /// How parameters start.
    pub init: Init,
    /// The server-side optimizer applied to summed gradients.
    pub optimizer: Optimizer,
}

impl TableSpec {
    /// Checks the spec: a name, a non-empty shape, valid optimizer settings.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidArgument("a table needs a name".into()));
        }
        match self.kind {
            TableKind::Dense { len: 0 } => {
                return Err(Error::InvalidArgument(format!("dense table {:?} has no elements", self.name)));
            }
            TableKind::Sparse { width: 0, .. } => {
                return Err(Error::InvalidArgument(format!("sparse table {:?} has rows of width 0", self.name)));
            }
            _ => {}
        }
        if let Init::Uniform { scale, .. } = self.init {
            if !(scale.is_finite() && scale >= 0.0) {
                return Err(Error::InvalidArgument(format!("table {:?}: init scale {scale} is not >= 0", self.name)));
            }
        }
        self.optimizer.validate().map_err(|m| Error::InvalidArgument(format!("table {:?}: {m}", self.name)))
    }
}

/// The elements of a dense table of `len` elements held by server `index` of `servers`:
/// `[index * len / servers, (index + 1) * len / servers)`.
pub fn dense_range(len: u64, index: usize, servers: usize) -> Range<u64> {
    let cut = |i: usize| ((len as u128 * i as u128) / servers as u128) as u64;
    cut(index)..cut(index + 1)
}

/// The server holding element `i` of a dense table of `len` elements.
pub fn dense_server(len: u64, i: u64, servers: usize) -> usize {
    // The first server whose range ends after `i`; ranges differ in length by at most one.
    let guess = ((i as u128 * servers as u128) / len as u128) as usize;
    (guess.saturating_sub(1)..servers).find(|&s| dense_range(len, s, servers).end > i).unwrap_or(servers - 1)
}

/// A 64-bit mix (splitmix64's finalizer): spreads keys that differ in few bits.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The server holding row `key` of a sparse table.
pub fn sparse_server(key: u64, servers: usize) -> usize {
    (spread_hash(key) % servers as u64) as usize
}

/// The hash of a key that [`sparse_server`] takes the remainder of.
fn spread_hash(key: u64) -> u64 {
    mix(key.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// [`sparse_server`] for many keys and one server count: the remainder without a division
/// (a multiplication by a reciprocal computed once), the same server for every key.
#[derive(Clone, Copy, Debug)]
pub struct KeySpread {
    servers: StrengthReducedU64,
}

impl KeySpread {
    /// Keys spread over `servers` servers (at least one).
    pub fn new(servers: usize) -> KeySpread {
        assert!(servers > 0, "keys are spread over at least one server");
        KeySpread { servers: StrengthReducedU64::new(servers as u64) }
    }

    /// The server holding row `key`: [`sparse_server`]`(key, servers)`.
    #[inline]
    pub fn server(&self, key: u64) -> usize {
        (spread_hash(key) % self.servers) as usize
    }
}

/// Column `col` of the initial value of row (or element) `key` under `init`.
pub fn initial(init: Init, key: u64, col: u32) -> f32 {
    match init {
        Init::Zeros => 0.0,
        Init::Uniform { scale, seed } => {
            let z = mix(seed ^ mix(key ^ mix(col as u64 + 1)));
            // 24 random bits to [-1, 1).
            let unit = (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
            unit * scale
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn ranges_cover_a_table_in_order_even_when_uneven() {
        assert_eq!(dense_range(10, 0, 3), 0..3);
        assert_eq!(dense_range(10, 1, 3), 3..6);
        assert_eq!(dense_range(10, 2, 3), 6..10);
        assert_eq!(dense_range(2, 1, 4), 0..1, "more servers than elements: some hold none");
        assert_eq!(dense_range(2, 0, 4), 0..0);
    }

    proptest! {
        #[test]
        fn every_element_has_exactly_the_server_whose_range_holds_it(len in 1u64..5000, servers in 1usize..9) {
            let mut next = 0;
            for s in 0..servers {
                let r = dense_range(len, s, servers);
                prop_assert_eq!(r.start, next);
                next = r.end;
                for i in r {
                    prop_assert_eq!(dense_server(len, i, servers), s);
                }
            }
            prop_assert_eq!(next, len);
        }

        #[test]
        fn initial_values_stay_in_range_and_repeat(key: u64, col in 0u32..64, seed: u64) {
            let init = Init::Uniform { scale: 0.5, seed };
            let v = initial(init, key, col);
            prop_assert!((-0.5..0.5).contains(&v));
            prop_assert_eq!(v.to_bits(), initial(init, key, col).to_bits());
            prop_assert_eq!(initial(Init::Zeros, key, col), 0.0);
        }

        /// The division-free spread puts every key where `sparse_server` (and so every
        /// checkpoint written so far) has it, for any server count.
        #[test]
        fn a_key_spread_agrees_with_sparse_server(keys in proptest::collection::vec(any::<u64>(), 64), servers in 1usize..1000) {
            let spread = KeySpread::new(servers);
            for k in keys.into_iter().chain([0, u64::MAX, 0x9E37_79B9_7F4A_7C15u64.wrapping_neg()]) {
                prop_assert_eq!(spread.server(k), sparse_server(k, servers));
            }
        }
    }

    #[test]
    fn keys_spread_over_servers() {
        let mut counts = [0usize; 4];
        for k in 0..40_000u64 {
            counts[sparse_server(k, 4)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        let init = Init::Uniform { scale: 1.0, seed: 7 };
        assert_ne!(initial(init, 1, 0), initial(init, 2, 0), "the key seeds the row");
        assert_ne!(initial(init, 1, 0), initial(init, 1, 1));
    }

    #[test]
    fn a_server_makes_room_for_its_share_of_the_expected_rows_and_no_more() {
        assert_eq!(expected_share(0, 2), 0, "no hint, no room");
        assert_eq!(expected_share(1 << 20, 2), (1 << 19) + (1 << 16) + 64);
        assert_eq!(expected_share(10, 3), 4 + 64);
        assert_eq!(expected_share(u64::MAX, 1), MAX_EXPECTED_SHARE, "a typo does not take the memory");
    }

    /// The hint is left out of a spec without it, so the jobs and checkpoints written before it
    /// read the same, and a spec with it keeps it.
    #[test]
    fn the_expected_rows_travel_only_when_given() {
        let spec = |expected_rows| TableSpec {
            name: "emb".into(),
            kind: TableKind::Sparse { width: 4, expected_rows },
            init: Init::Zeros,
            optimizer: Optimizer::sgd(0.1),
        };
        let plain = serde_json::to_string(&spec(0)).unwrap();
        assert!(!plain.contains("expected_rows"), "{plain}");
        assert_eq!(serde_json::from_str::<TableSpec>(&plain).unwrap(), spec(0));
        let hinted = serde_json::to_string(&spec(1 << 20)).unwrap();
        assert!(hinted.contains("\"expected_rows\":1048576"), "{hinted}");
        assert_eq!(serde_json::from_str::<TableSpec>(&hinted).unwrap(), spec(1 << 20));
    }

    #[test]
    fn bad_specs_are_refused_naming_the_table() {
        let spec = |kind| TableSpec { name: "emb".into(), kind, init: Init::Zeros, optimizer: Optimizer::sgd(0.1) };
        assert!(spec(TableKind::Sparse { width: 8, expected_rows: 0 }).validate().is_ok());
        for bad in [TableKind::Sparse { width: 0, expected_rows: 0 }, TableKind::Dense { len: 0 }] {
            let e = spec(bad).validate().unwrap_err().to_string();
            assert!(e.contains("emb"), "{e}");
        }
        let mut s = spec(TableKind::Dense { len: 3 });
        s.optimizer = Optimizer::sgd(f32::NAN);
        assert!(s.validate().unwrap_err().to_string().contains("emb"));
    }
}

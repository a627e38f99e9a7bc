//! The per-pass shuffle of the todo queue: a small, frozen permutation algorithm.
//!
//! We do not use `rand`'s generators here because their output may change between crate
//! versions, and "the same seed gives the same task order" should hold for the life of a
//! job's store. The algorithm is Fisher–Yates driven by SplitMix64 (Steele, Lea & Flood,
//! "Fast splittable pseudorandom number generators", 2014), with Lemire's multiply-shift to
//! map a 64-bit draw onto `0..n` (its bias is below `n / 2^64`, irrelevant for shuffling
//! data). The seed of pass `p` is the job seed mixed with `p`, so passes differ.
//!
//! Replaying a log never calls this: the order chosen is recorded in the change itself.

use super::task::TaskId;

/// SplitMix64: one 64-bit word of state, a Weyl sequence passed through a mixer.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Shuffles `ids` in place for pass `pass` of a job seeded with `seed`.
pub(crate) fn shuffle(ids: &mut [TaskId], seed: u64, pass: u64) {
    // Mix the pass into the seed through one SplitMix64 step so that neighbouring
    // (seed, pass) pairs start from unrelated states.
    let mut rng = SplitMix64(seed ^ SplitMix64(pass).next());
    for i in (1..ids.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        ids.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> Vec<TaskId> {
        (0..n).map(TaskId).collect()
    }

    #[test]
    fn is_a_permutation_and_deterministic() {
        let mut a = ids(1000);
        let mut b = ids(1000);
        shuffle(&mut a, 7, 3);
        shuffle(&mut b, 7, 3);
        assert_eq!(a, b);
        assert_ne!(a, ids(1000), "1000 ids should not stay in order");
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, ids(1000));
    }

    #[test]
    fn passes_and_seeds_give_different_orders() {
        let mut p0 = ids(100);
        let mut p1 = ids(100);
        let mut s1 = ids(100);
        shuffle(&mut p0, 1, 0);
        shuffle(&mut p1, 1, 1);
        shuffle(&mut s1, 2, 0);
        assert_ne!(p0, p1);
        assert_ne!(p0, s1);
    }

    #[test]
    fn frozen_output() {
        // Guards the "same seed, same order, forever" promise: changing the algorithm
        // changes this vector.
        let mut v = ids(8);
        shuffle(&mut v, 42, 0);
        let got: Vec<u64> = v.iter().map(|t| t.0).collect();
        assert_eq!(got, FROZEN_42_0);
    }

    const FROZEN_42_0: [u64; 8] = [7, 0, 4, 5, 6, 1, 3, 2];

    #[test]
    fn tiny_inputs() {
        let mut empty: Vec<TaskId> = Vec::new();
        shuffle(&mut empty, 1, 1);
        let mut one = ids(1);
        shuffle(&mut one, 1, 1);
        assert_eq!(one, ids(1));
    }
}

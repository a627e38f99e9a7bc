//! Large buffers kept for reuse. A fresh buffer of many megabytes comes from the kernel as
//! untouched pages, and the first write to each page faults and clears it: moving a 64 MiB
//! model through a dozen fresh buffers a step cost more than the copies themselves. The
//! parameter server's data path (frames, decoded arrays, gradient sums, kept pushes) takes
//! its large buffers from here and gives them back when done, so after the first steps they
//! are pages already mapped.
//!
//! Each pool keeps at most [`MAX_KEPT`] buffers, and at most `WARREN_POOL_MAX_BYTES` bytes of
//! them (default [`DEFAULT_MAX_BYTES`], 512 MiB: sixteen 32 MiB halves of a 64 MiB model): a
//! buffer given back past either limit frees the smallest ones kept (the largest are the
//! dearest to fault in again), and a buffer larger than the byte limit is freed at once.
//! `WARREN_POOL_MAX_BYTES=0` keeps none.

use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this (bytes) are left to the allocator.
const MIN_BYTES: usize = 1 << 20;
/// At most this many buffers of each element type are kept.
pub const MAX_KEPT: usize = 16;
/// The bytes each pool keeps at most, unless `WARREN_POOL_MAX_BYTES` says otherwise.
pub const DEFAULT_MAX_BYTES: usize = 512 << 20;
/// The environment variable setting the bytes each pool keeps at most.
pub const MAX_BYTES_VAR: &str = "WARREN_POOL_MAX_BYTES";

/// A stack of spare buffers of `T`.
pub struct Pool<T> {
    spare: Mutex<Vec<Vec<T>>>,
    /// The byte limit (read from the environment on first use, unless set).
    max_bytes: OnceLock<usize>,
}

/// The byte limit `WARREN_POOL_MAX_BYTES` sets (a number of bytes), or the default; a value
/// that is not a number is reported once and ignored.
fn max_bytes_from_env() -> usize {
    match std::env::var(MAX_BYTES_VAR) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            log::warn!("{MAX_BYTES_VAR}={v:?} is not a number of bytes; using {DEFAULT_MAX_BYTES}");
            DEFAULT_MAX_BYTES
        }),
        Err(_) => DEFAULT_MAX_BYTES,
    }
}

/// Spare `f32` buffers (decoded arrays, sums, kept gradients).
pub static FLOATS: Pool<f32> = Pool::new();
/// Spare byte buffers (frames being encoded).
pub static BYTES: Pool<u8> = Pool::new();

impl<T> Pool<T> {
    const fn new() -> Pool<T> {
        Pool { spare: Mutex::new(Vec::new()), max_bytes: OnceLock::new() }
    }

    /// A pool keeping at most `max_bytes` bytes of buffers.
    #[cfg(test)]
    fn with_max_bytes(max_bytes: usize) -> Pool<T> {
        Pool { spare: Mutex::new(Vec::new()), max_bytes: OnceLock::from(max_bytes) }
    }

    fn bytes(v: &Vec<T>) -> usize {
        v.capacity() * size_of::<T>()
    }

    /// An empty buffer with room for at least `n` elements: the smallest spare one that
    /// fits, or a new one.
    pub fn take(&self, n: usize) -> Vec<T> {
        if n * size_of::<T>() >= MIN_BYTES {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            let best = spare.iter().enumerate().filter(|(_, v)| v.capacity() >= n).min_by_key(|(_, v)| v.capacity());
            if let Some((i, _)) = best {
                return spare.swap_remove(i);
            }
        }
        Vec::with_capacity(n)
    }

    /// Keeps `v` for a later [`take`](Self::take) if it is large (else frees it); past the
    /// pool's limits (see the module documentation), the smallest buffers are freed.
    pub fn give(&self, mut v: Vec<T>) {
        let max_bytes = *self.max_bytes.get_or_init(max_bytes_from_env);
        if Self::bytes(&v) < MIN_BYTES || Self::bytes(&v) > max_bytes {
            return;
        }
        v.clear();
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        spare.push(v);
        let mut kept: usize = spare.iter().map(Self::bytes).sum();
        while spare.len() > MAX_KEPT || kept > max_bytes {
            let smallest = (0..spare.len()).min_by_key(|&i| spare[i].capacity()).expect("not empty");
            kept -= Self::bytes(&spare.swap_remove(smallest));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_given_back_is_taken_again_and_small_ones_are_not_kept() {
        let pool: Pool<u8> = Pool::new();
        let mut big = pool.take(2 * MIN_BYTES);
        big.extend_from_slice(&[1, 2, 3]);
        let at = big.as_ptr();
        pool.give(big);
        pool.give(Vec::with_capacity(10));
        assert_eq!(pool.spare.lock().unwrap().len(), 1, "the small one is freed");
        let again = pool.take(MIN_BYTES);
        assert_eq!((again.as_ptr(), again.len()), (at, 0), "the same buffer, emptied");
        assert!(pool.take(MIN_BYTES).capacity() >= MIN_BYTES, "a new one when none is spare");
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_bytes_of_the_largest_buffers() {
        let pool: Pool<f32> = Pool::with_max_bytes(10 * MIN_BYTES);
        let floats = MIN_BYTES / 4;
        for n in [2, 3, 4] {
            pool.give(Vec::with_capacity(n * floats));
        }
        assert_eq!(pool.spare.lock().unwrap().len(), 3, "9 MiB kept: within 10");
        pool.give(Vec::with_capacity(5 * floats));
        let kept: Vec<usize> = pool.spare.lock().unwrap().iter().map(|v| v.capacity() / floats).collect();
        assert_eq!(kept.iter().sum::<usize>(), 9, "14 MiB is over: the 2 and 3 MiB ones go, {kept:?}");
        assert!(kept.contains(&5) && kept.contains(&4));
        pool.give(Vec::with_capacity(11 * floats));
        assert_eq!(pool.spare.lock().unwrap().len(), 2, "a buffer over the limit is not kept");
        let none: Pool<u8> = Pool::with_max_bytes(0);
        none.give(Vec::with_capacity(MIN_BYTES));
        assert!(none.spare.lock().unwrap().is_empty(), "a limit of 0 keeps nothing");
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_the_largest_buffers() {
        let pool: Pool<u8> = Pool::new();
        for i in 0..MAX_KEPT + 3 {
            pool.give(Vec::with_capacity(MIN_BYTES + i));
        }
        let spare = pool.spare.lock().unwrap();
        assert_eq!(spare.len(), MAX_KEPT);
        assert!(spare.iter().all(|v| v.capacity() >= MIN_BYTES + 3));
    }
}

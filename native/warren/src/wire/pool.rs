//! Large buffers kept for reuse. A fresh buffer of many megabytes comes from the kernel as
//! untouched pages, and the first write to each page faults and clears it: moving a 64 MiB
//! model through a dozen fresh buffers a step cost more than the copies themselves. The
//! parameter server's data path (frames, decoded arrays, gradient sums, kept pushes) takes
//! its large buffers from here and gives them back when done, so after the first steps they
//! are pages already mapped. At most [`MAX_KEPT`] buffers of each type are kept.

use std::sync::Mutex;

/// Buffers smaller than this (bytes) are left to the allocator.
const MIN_BYTES: usize = 1 << 20;
/// At most this many buffers of each element type are kept.
pub const MAX_KEPT: usize = 16;

/// A stack of spare buffers of `T`.
pub struct Pool<T> {
    spare: Mutex<Vec<Vec<T>>>,
}

/// Spare `f32` buffers (decoded arrays, sums, kept gradients).
pub static FLOATS: Pool<f32> = Pool::new();
/// Spare byte buffers (frames being encoded).
pub static BYTES: Pool<u8> = Pool::new();

impl<T> Pool<T> {
    const fn new() -> Pool<T> {
        Pool { spare: Mutex::new(Vec::new()) }
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

    /// Keeps `v` for a later [`take`](Self::take) if it is large (else frees it); with the
    /// pool full, the smallest buffer is freed.
    pub fn give(&self, mut v: Vec<T>) {
        if v.capacity() * size_of::<T>() < MIN_BYTES {
            return;
        }
        v.clear();
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        spare.push(v);
        if spare.len() > MAX_KEPT {
            let smallest = (0..spare.len()).min_by_key(|&i| spare[i].capacity()).expect("not empty");
            spare.swap_remove(smallest);
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

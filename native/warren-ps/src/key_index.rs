//! The index of a sparse table's rows at one server (pure): key to row number, in an
//! open-addressing table of `(key, row)` slots (linear probing, a power-of-two number of
//! slots, at most half of them used). Rows are never removed, so there are no tombstones.
//!
//! Why not `HashMap`: with a million rows the table is far larger than the CPU caches, so
//! every lookup waits on a cache miss; a profile of a sparse step had two thirds of the
//! lookups' time on the one load of the slot. Here a caller looking up a batch of keys asks
//! for the slot of a key a few places ahead first ([`KeyIndex::prefetch`]), so those misses
//! overlap instead of following each other.

use super::table::mix;

/// A free slot's row.
const FREE: u32 = u32::MAX;

/// One slot: a key and its row, or [`FREE`].
#[derive(Clone, Copy, Debug)]
struct Slot {
    key: u64,
    row: u32,
}

const EMPTY: Slot = Slot { key: 0, row: FREE };

/// Key to row number (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct KeyIndex {
    slots: Vec<Slot>,
    len: usize,
}

impl Default for KeyIndex {
    fn default() -> Self {
        KeyIndex::with_capacity(0)
    }
}

/// `n` free slots, on huge pages where the kernel gives them ([`huge`](super::huge)).
fn slots(n: usize) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(n);
    super::huge::advise(&slots);
    slots.resize(n, EMPTY);
    slots
}

impl KeyIndex {
    /// An empty index with room for `n` keys before it grows.
    pub fn with_capacity(n: usize) -> KeyIndex {
        KeyIndex { slots: slots((2 * n).max(16).next_power_of_two()), len: 0 }
    }

    /// Makes room for `n` keys in all: grows now, once, if holding `n` keys would grow it later.
    pub fn reserve(&mut self, n: usize) {
        let wanted = (2 * n).max(16).next_power_of_two();
        if wanted > self.slots.len() {
            self.grow_to(wanted);
        }
    }

    /// How many keys it holds before it grows.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len() / 2
    }

    /// Where `key`'s probe starts. Keys are spread over servers by another mix of them (see
    /// `table::sparse_server`), so this one is seeded differently.
    fn home(&self, key: u64) -> usize {
        (mix(key ^ 0x5851_F42D_4C95_7F2D) as usize) & (self.slots.len() - 1)
    }

    /// Asks the CPU to fetch `key`'s slot (a hint: it changes no result).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        prefetch(&self.slots[self.home(key)]);
    }

    /// The slot holding `key`, or the free slot where it would go.
    fn find(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.row == FREE || s.key == key {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The row of `key`, if it has one.
    #[cfg(test)]
    pub fn get(&self, key: u64) -> Option<u32> {
        let s = self.slots[self.find(key)];
        (s.row != FREE).then_some(s.row)
    }

    /// The row of `key`; if it has none, it gets `row` (then `true` is returned too).
    /// `row` must be below `u32::MAX`.
    pub fn get_or_insert(&mut self, key: u64, row: u32) -> (u32, bool) {
        debug_assert_ne!(row, FREE);
        let i = self.find(key);
        if self.slots[i].row != FREE {
            return (self.slots[i].row, false);
        }
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
            let i = self.find(key);
            self.slots[i] = Slot { key, row };
        } else {
            self.slots[i] = Slot { key, row };
        }
        self.len += 1;
        (row, true)
    }

    /// Twice the slots, every key placed again.
    fn grow(&mut self) {
        self.grow_to(2 * self.slots.len());
    }

    /// `n` slots (a power of two, more than now), every key placed again.
    fn grow_to(&mut self, n: usize) {
        let bigger = slots(n);
        let old = std::mem::replace(&mut self.slots, bigger);
        for s in old.into_iter().filter(|s| s.row != FREE) {
            let i = self.find(s.key);
            self.slots[i] = s;
        }
    }
}

/// Asks the CPU to bring the cache line holding `x` closer (a hint: it changes no result).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetching only hints at the cache; the pointer is of a live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn it_maps_keys_as_a_hash_map_does(keys in proptest::collection::vec(0u64..300, 0..400)) {
            let mut index = KeyIndex::default();
            let mut want: HashMap<u64, u32> = HashMap::new();
            for k in keys {
                let next = want.len() as u32;
                let expect_new = !want.contains_key(&k);
                let r = *want.entry(k).or_insert(next);
                prop_assert_eq!(index.get_or_insert(k, next), (r, expect_new));
            }
            prop_assert_eq!(index.len, want.len());
            for (k, r) in &want {
                prop_assert_eq!(index.get(*k), Some(*r));
            }
            prop_assert_eq!(index.get(u64::MAX), None);
            prop_assert!(2 * index.len <= index.slots.len(), "at most half full");
        }
    }

    #[test]
    fn colliding_keys_and_key_zero_are_told_apart() {
        let mut index = KeyIndex::with_capacity(4);
        let n = index.slots.len();
        let home = index.home(0);
        let same: Vec<u64> = (1..).filter(|&k| index.home(k) == home).take(3).collect();
        assert_eq!(index.get_or_insert(0, 0), (0, true));
        for (i, &k) in same.iter().enumerate() {
            assert_eq!(index.get_or_insert(k, i as u32 + 1), (i as u32 + 1, true));
        }
        assert_eq!(index.slots.len(), n, "no growth yet");
        assert_eq!(index.get(0), Some(0));
        assert_eq!(index.get(same[2]), Some(3));
    }
}

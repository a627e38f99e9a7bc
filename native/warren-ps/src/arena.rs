//! Floats in storage aligned to cache lines (pure): a sparse table's rows are 64 bytes (16
//! floats) or a multiple of it for the usual widths and optimizers, and read at random, a
//! cache miss each. In a plain `Vec<f32>` (16-byte aligned by the allocator) each such row
//! straddles two cache lines, so every row read or updated waited on two misses, of which
//! only the first was prefetched.

use std::ops::{Deref, DerefMut};

/// Floats per cache line.
const LINE_FLOATS: usize = 16;

/// One cache line of floats.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([f32; LINE_FLOATS]);

// SAFETY: `Line` is `repr(C)`, 64 bytes of `f32` with no padding (64 = 16 * 4 and the
// alignment is 64), and any bit pattern is an `f32`.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Line {}

/// A growable array of `f32` whose first element starts a cache line (so does every 16th).
#[derive(Clone, Debug, Default)]
pub(crate) struct AlignedFloats {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedFloats {
    /// Makes room for `additional` more floats (on huge pages where the kernel gives them),
    /// so that growing to that length moves nothing.
    pub fn reserve(&mut self, additional: usize) {
        let more = (self.len + additional).div_ceil(LINE_FLOATS).saturating_sub(self.lines.len());
        super::huge::reserve(&mut self.lines, more);
    }

    /// Makes it `len` floats long, the new ones `value`.
    pub fn resize(&mut self, len: usize, value: f32) {
        let old = self.len;
        if len > self.lines.len() * LINE_FLOATS {
            // The capacity grows by doubling, so one row at a time is cheap; the rows are read
            // at random, so on huge pages where the kernel gives them.
            let lines = len.div_ceil(LINE_FLOATS);
            let more = lines - self.lines.len();
            super::huge::reserve(&mut self.lines, more);
            self.lines.resize(lines, Line([value; LINE_FLOATS]));
        }
        self.len = len;
        if len > old {
            self[old..len].fill(value);
        } else {
            self.lines.truncate(len.div_ceil(LINE_FLOATS));
        }
    }
}

impl From<Vec<f32>> for AlignedFloats {
    fn from(v: Vec<f32>) -> AlignedFloats {
        let mut a = AlignedFloats::default();
        a.resize(v.len(), 0.0);
        a.copy_from_slice(&v);
        a
    }
}

impl Deref for AlignedFloats {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &bytemuck::cast_slice::<Line, f32>(&self.lines)[..self.len]
    }
}

impl DerefMut for AlignedFloats {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut bytemuck::cast_slice_mut::<Line, f32>(&mut self.lines)[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_floats_as_a_vec_does_from_a_cache_line_boundary() {
        let mut a = AlignedFloats::default();
        let mut want: Vec<f32> = Vec::new();
        for (i, len) in [3, 16, 17, 40, 40, 64, 5, 0, 33].into_iter().enumerate() {
            a.resize(len, i as f32);
            want.resize(len, i as f32);
            assert_eq!(&*a, &want[..], "after resizing to {len}");
            a.iter_mut().zip(&mut want).enumerate().for_each(|(j, (x, y))| (*x, *y) = (j as f32, j as f32));
            assert_eq!(a.as_ptr() as usize % 64, 0, "starts a cache line");
        }
        let from = AlignedFloats::from(vec![1.0, -2.0, 3.5]);
        assert_eq!(&*from, &[1.0, -2.0, 3.5]);
    }
}

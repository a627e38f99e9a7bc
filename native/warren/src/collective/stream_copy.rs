//! Copying into memory that will not be read soon (the results a robust call keeps for a
//! restarted worker) with non-temporal stores: they bypass the cache, so the copy neither
//! reads the destination first nor evicts the data the call is working on. On this project's
//! benchmark machine a 16 MiB copy into a cold buffer took about half the time this way.

/// Copies `src` into `dst` (same length). On x86_64 with non-temporal stores, fenced before
/// returning (so that later stores, e.g. publishing the buffer, are ordered after it).
pub(crate) fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "stream_copy of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        const LANE: usize = 16;
        // Below a few lanes the fence costs more than the cache pollution it avoids.
        if dst.len() >= 16 * LANE {
            let head = dst.as_ptr().align_offset(LANE).min(dst.len());
            dst[..head].copy_from_slice(&src[..head]);
            let body = (dst.len() - head) / LANE * LANE;
            let (d, s) = (&mut dst[head..head + body], &src[head..head + body]);
            // SAFETY: SSE2 is part of x86_64; every store is to a 16-byte aligned lane inside
            // `d` (its start is aligned above, its length a multiple of 16), every load from
            // inside `s` of the same length (unaligned loads allowed); the fence orders the
            // non-temporal stores before any later store of this thread.
            unsafe {
                for i in (0..body).step_by(LANE) {
                    let v = _mm_loadu_si128(s.as_ptr().add(i).cast::<__m128i>());
                    _mm_stream_si128(d.as_mut_ptr().add(i).cast::<__m128i>(), v);
                }
                _mm_sfence();
            }
            let tail = head + body;
            dst[tail..].copy_from_slice(&src[tail..]);
            return;
        }
    }
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::stream_copy;

    #[test]
    fn copies_every_byte_whatever_the_alignment_and_length() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for (start, len) in [(0, 0), (1, 3), (3, 255), (5, 256), (7, 4093), (0, 4096), (13, 4987)] {
            let mut dst = vec![0u8; 5000];
            stream_copy(&mut dst[start..start + len], &src[start..start + len]);
            assert_eq!(&dst[start..start + len], &src[start..start + len], "{start}+{len}");
            assert!(dst[..start].iter().chain(&dst[start + len..]).all(|&b| b == 0), "{start}+{len}: outside touched");
        }
    }
}

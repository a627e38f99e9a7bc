//! Results a call lends to its caller instead of copying them into the caller's buffer
//! ([`Communicator::allreduce_lent`](super::Communicator::allreduce_lent)).
//!
//! In robust mode every worker keeps each call's result until the next checkpoint, to serve
//! a restarted worker that replays the call. An in-place call then writes the result twice:
//! into the caller's buffer and into the kept buffer. A lent call runs out of place, from the
//! caller's input into the kept buffer, and hands the caller a read-only [`Lent`] of that
//! buffer: the result is written once. The buffer goes back to the communicator's pool when
//! both the checkpoint and the caller have let go of it (a caller holding leases across
//! checkpoints holds their memory).

use std::marker::PhantomData;
use std::sync::Arc;

use crate::reduce::Element;

/// A call's result lent to the caller (read-only; it derefs to `[T]`). Dropping it gives the
/// buffer back to the communicator, which reuses it once it no longer needs it either.
pub struct Lent<T> {
    bytes: Arc<Vec<u8>>,
    _elem: PhantomData<T>,
}

impl<T: Element> Lent<T> {
    pub(super) fn new(bytes: Arc<Vec<u8>>) -> Lent<T> {
        Lent { bytes, _elem: PhantomData }
    }

    /// The result, as raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl<T: Element> std::ops::Deref for Lent<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        if self.bytes.is_empty() {
            return &[];
        }
        // The buffers come from the allocator, aligned to 16 bytes at least (malloc's
        // guarantee on the platforms Warren builds for), more than any element type needs.
        bytemuck::try_cast_slice(&self.bytes).expect("a lent result is aligned for its element type")
    }
}

impl<T: Element + std::fmt::Debug> std::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent").field("len", &self.len()).finish()
    }
}

/// The buffers of lent results in plain mode (robust mode takes them from the kept results):
/// a buffer is reused once its caller has dropped its [`Lent`], so a loop of lent calls
/// allocates (and page-faults) nothing after its first calls.
#[derive(Debug, Default)]
pub(super) struct LentPool {
    buffers: Vec<Arc<Vec<u8>>>,
}

/// How many lent buffers the pool remembers (a caller holds a few results at most).
const POOL: usize = 4;

impl LentPool {
    /// A buffer of `len` bytes (contents unspecified) that nobody else holds.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        let free = self.buffers.iter().position(|b| Arc::strong_count(b) == 1 && Arc::weak_count(b) == 0);
        let mut buf = free.and_then(|i| Arc::try_unwrap(self.buffers.swap_remove(i)).ok()).unwrap_or_default();
        buf.resize(len, 0);
        buf
    }

    /// Remembers `buf`, lent to a caller, to reuse it once the caller drops it.
    pub fn lent(&mut self, buf: &Arc<Vec<u8>>) {
        if self.buffers.len() == POOL {
            self.buffers.remove(0);
        }
        self.buffers.push(Arc::clone(buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_result_reads_as_its_elements_and_its_buffer_is_reused_once_dropped() {
        let mut pool = LentPool::default();
        let mut buf = pool.take(8);
        buf.copy_from_slice(bytemuck::cast_slice(&[1.5f32, -2.0]));
        let ptr = buf.as_ptr();
        let shared = Arc::new(buf);
        pool.lent(&shared);
        let lent: Lent<f32> = Lent::new(shared);
        assert_eq!(&*lent, &[1.5, -2.0]);
        assert_eq!(lent.to_vec(), vec![1.5, -2.0]);
        let other = pool.take(8);
        assert_ne!(other.as_ptr(), ptr, "not reused while the caller holds it");
        drop(lent);
        let again = pool.take(8);
        assert_eq!(again.as_ptr(), ptr, "reused once dropped");
        assert!(Lent::<f64>::new(Arc::new(Vec::new())).is_empty());
    }
}

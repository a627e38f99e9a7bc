//! The results of the calls since the last checkpoint, so that a restarted worker can be
//! served the calls it replays instead of running them again collectively.
//!
//! Memory: every worker keeps every result of the current checkpoint interval, i.e. the sum of
//! the output sizes of the collectives between two checkpoints (for a training loop with one
//! checkpoint per iteration: the bytes one iteration allreduces/broadcasts). Cleared at every
//! checkpoint; the cleared buffers are reused for the next interval's results, so a steady
//! training loop allocates (and page-faults) no new memory per call.

use std::sync::Arc;

use crate::collective::header::CallHeader;

/// One buffered result: the call's header (to check a replaying caller asks for the same call)
/// and its output bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResult {
    /// The header of the call.
    pub header: CallHeader,
    /// The output (shared with the caller when the call lent it its result, see
    /// [`crate::Lent`]).
    pub data: Arc<Vec<u8>>,
}

/// Results by sequence number within the current checkpoint version.
#[derive(Debug, Default)]
pub struct ResultBuffer {
    results: Vec<Option<StoredResult>>,
    bytes: usize,
    free: Vec<Vec<u8>>,
}

impl ResultBuffer {
    /// Records call `seq` (calls are recorded in order, each once); its result is kept only if
    /// `keep` (this worker is one of the call's holders).
    pub fn push(&mut self, seq: u32, header: CallHeader, data: &[u8], keep: bool) {
        if !keep {
            return self.push_owned(seq, header, Vec::new(), false);
        }
        let mut buf = self.take_free(data.len());
        buf.clear();
        buf.extend_from_slice(data);
        self.push_owned(seq, header, buf, true);
    }

    /// Like [`ResultBuffer::push`] for a result already in a buffer of its own (from
    /// [`ResultBuffer::spare`]): kept without a copy, or reused later if not `keep`.
    pub fn push_owned(&mut self, seq: u32, header: CallHeader, data: Vec<u8>, keep: bool) {
        assert_eq!(seq as usize, self.results.len(), "results are stored in call order");
        if !keep {
            self.recycle(data);
            self.results.push(None);
            return;
        }
        self.push_shared(seq, header, Arc::new(data), true);
    }

    /// Like [`ResultBuffer::push_owned`] for a result the caller holds too (a lent result):
    /// kept without a copy; its buffer is reused after the interval only if the caller has
    /// let go of it by then.
    pub fn push_shared(&mut self, seq: u32, header: CallHeader, data: Arc<Vec<u8>>, keep: bool) {
        assert_eq!(seq as usize, self.results.len(), "results are stored in call order");
        if !keep {
            if let Ok(buf) = Arc::try_unwrap(data) {
                self.recycle(buf);
            }
            self.results.push(None);
            return;
        }
        self.bytes += data.len();
        self.results.push(Some(StoredResult { header, data }));
    }

    /// A buffer of `len` bytes to compute a result into, reused from the cleared results when
    /// one is at least that long (its old bytes are left in place: no pass over the memory).
    pub fn spare(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.take_free(len);
        if buf.len() >= len {
            buf.truncate(len);
        } else {
            buf.resize(len, 0);
        }
        buf
    }

    /// Gives back a buffer from [`ResultBuffer::spare`] that holds no result.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() > 0 {
            self.free.push(buf);
        }
    }

    /// The cleared buffer that fits `len` best: the shortest at least `len` long, else the
    /// longest (the calls of an interval repeat, so sizes usually match exactly).
    fn take_free(&mut self, len: usize) -> Vec<u8> {
        let fits = (0..self.free.len()).filter(|&i| self.free[i].len() >= len).min_by_key(|&i| self.free[i].len());
        let pick = fits.or_else(|| (0..self.free.len()).max_by_key(|&i| self.free[i].len()));
        pick.map(|i| self.free.swap_remove(i)).unwrap_or_default()
    }

    /// The result of call `seq`, if this worker has it.
    pub fn get(&self, seq: u32) -> Option<&StoredResult> {
        self.results.get(seq as usize).and_then(Option::as_ref)
    }

    /// Number of results held (= the next sequence number).
    pub fn len(&self) -> u32 {
        self.results.len() as u32
    }

    /// Whether no result is held.
    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// Bytes of output held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets everything (at a checkpoint).
    pub fn clear(&mut self) {
        self.free.extend(self.results.drain(..).flatten().filter_map(|r| Arc::try_unwrap(r.data).ok()));
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::header::{CallKind, Numbering};
    use crate::reduce::{DataType, Op};

    fn hdr(seq: u64) -> CallHeader {
        CallHeader {
            seq,
            numbering: Numbering::Checkpointed,
            kind: CallKind::AllreduceTree,
            dtype: DataType::F32,
            op: Op::Sum,
            elem_size: 4,
            root: 0,
            count: 8,
            tag: 0,
        }
    }

    #[test]
    fn keeps_results_in_order_until_cleared() {
        let mut b = ResultBuffer::default();
        b.push(0, hdr(0), &[1; 8], true);
        b.push(1, hdr(1), &[2; 4], true);
        b.push(2, hdr(2), &[9; 4], false);
        assert_eq!(b.len(), 3);
        assert_eq!(b.bytes(), 12);
        assert!(b.get(2).is_none(), "a result this worker does not hold");
        assert_eq!(*b.get(1).unwrap().data, vec![2; 4]);
        b.clear();
        assert!(b.is_empty() && b.bytes() == 0);
        b.push(0, hdr(0), &[3; 2], true);
        assert_eq!(*b.get(0).unwrap().data, vec![3; 2], "a reused buffer holds only the new result");
    }

    #[test]
    fn spare_buffers_are_reused_and_kept_without_a_copy() {
        let mut b = ResultBuffer::default();
        b.push(0, hdr(0), &[1; 8], true);
        b.push(1, hdr(1), &[2; 16], true);
        b.clear();
        let spare = b.spare(8);
        assert_eq!(spare, vec![1; 8], "the exact fit is reused, its bytes untouched");
        let ptr = spare.as_ptr();
        b.push_owned(0, hdr(0), spare, true);
        assert_eq!(b.get(0).unwrap().data.as_ptr(), ptr, "kept without a copy");
        assert_eq!(b.bytes(), 8);
        let longer = b.spare(20);
        assert_eq!(longer.len(), 20, "grown when no cleared buffer is long enough");
        b.push_owned(1, hdr(1), longer, false);
        assert!(b.get(1).is_none() && b.bytes() == 8, "a result not kept is not held");
        assert_eq!(b.spare(20).len(), 20, "and its buffer is reused");
    }

    #[test]
    #[should_panic(expected = "call order")]
    fn out_of_order_is_a_bug() {
        let mut b = ResultBuffer::default();
        b.push(1, hdr(1), &[], true);
    }
}

//! The results of the calls since the last checkpoint, so that a restarted worker can be
//! served the calls it replays instead of running them again collectively.
//!
//! Memory: every worker keeps every result of the current checkpoint interval, i.e. the sum of
//! the output sizes of the collectives between two checkpoints (for a training loop with one
//! checkpoint per iteration: the bytes one iteration allreduces/broadcasts). Cleared at every
//! checkpoint; the cleared buffers are reused for the next interval's results, so a steady
//! training loop allocates (and page-faults) no new memory per call.

use crate::collective::header::CallHeader;

/// One buffered result: the call's header (to check a replaying caller asks for the same call)
/// and its output bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResult {
    /// The header of the call.
    pub header: CallHeader,
    /// The output.
    pub data: Vec<u8>,
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
        assert_eq!(seq as usize, self.results.len(), "results are stored in call order");
        if !keep {
            self.results.push(None);
            return;
        }
        self.bytes += data.len();
        // Reuse the cleared buffer closest in size (the calls of an interval repeat).
        let mut buf = match self.free.iter().position(|b| b.capacity() >= data.len()) {
            Some(i) => self.free.swap_remove(i),
            None => self.free.pop().unwrap_or_default(),
        };
        buf.clear();
        buf.extend_from_slice(data);
        self.results.push(Some(StoredResult { header, data: buf }));
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
        self.free.extend(self.results.drain(..).flatten().map(|r| r.data));
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::header::CallKind;
    use crate::reduce::{DataType, Op};

    fn hdr(seq: u64) -> CallHeader {
        CallHeader {
            seq,
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
        assert_eq!(b.get(1).unwrap().data, vec![2; 4]);
        b.clear();
        assert!(b.is_empty() && b.bytes() == 0);
        b.push(0, hdr(0), &[3; 2], true);
        assert_eq!(b.get(0).unwrap().data, vec![3; 2], "a reused buffer holds only the new result");
    }

    #[test]
    #[should_panic(expected = "call order")]
    fn out_of_order_is_a_bug() {
        let mut b = ResultBuffer::default();
        b.push(1, hdr(1), &[], true);
    }
}

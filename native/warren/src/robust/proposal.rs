//! What each worker proposes in a recovery round: where it is, what it wants, the call it is
//! making, and whether it lacks replicas it should keep. Gathered on every worker, then
//! planned from ([`super::plan()`]).

use super::Point;
use crate::collective::header::{CallHeader, HEADER_LEN, HeaderMsg, decode_header};

/// What a worker wants to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Run (or be served) the call at its position.
    Execute,
    /// Run a checkpoint call at its position (the prepare or the ack phase).
    Checkpoint,
    /// Load the latest checkpoint (a restarted worker).
    LoadCheckpoint,
    /// Run (or be served) the bootstrap call with this key.
    Bootstrap,
    /// Nothing to run: a member standing right after the commit at which workers joined
    /// serves them what they need (bootstrap results, the checkpoint, local models) before
    /// it goes on, so that they load while it is idle rather than while it computes.
    Serve,
}

impl Want {
    const ALL: [Want; 5] = [Want::Execute, Want::Checkpoint, Want::LoadCheckpoint, Want::Bootstrap, Want::Serve];

    fn code(self) -> u64 {
        Want::ALL.iter().position(|&w| w == self).expect("listed") as u64 + 1
    }
}

/// One worker's proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// Its position.
    pub point: Point,
    /// What it wants.
    pub want: Want,
    /// Bootstrap key hash (0 when not a bootstrap call).
    pub key: u64,
    /// The call it is making, as it declares it (to check that workers replaying a call ask
    /// for the call that was made, and that workers at the same call agree).
    pub call: CallHeader,
    /// The checkpoint version of local-model replicas this worker should keep but lacks (it
    /// was served a checkpoint's prepare phase instead of running it, say).
    pub owed: Option<u32>,
}

/// Number of `u64` words of an encoded proposal.
pub const PROPOSAL_WORDS: usize = 4 + HEADER_LEN / 8;

impl Proposal {
    /// Encodes into words: position, flags (filled slot, want, owed), key, owed version, then
    /// the call header.
    pub fn encode(&self) -> [u64; PROPOSAL_WORDS] {
        let mut w = [0u64; PROPOSAL_WORDS];
        w[0] = ((self.point.0 as u64) << 32) | self.point.1 as u64;
        w[1] = (1 << 63) | (u64::from(self.owed.is_some()) << 8) | self.want.code();
        w[2] = self.key;
        w[3] = self.owed.unwrap_or(0) as u64;
        for (word, bytes) in w[4..].iter_mut().zip(self.call.encode().chunks_exact(8)) {
            *word = u64::from_le_bytes(bytes.try_into().unwrap());
        }
        w
    }

    /// Decodes the slot of `rank`; `None` if it was not filled or is malformed.
    pub fn decode(w: &[u64], rank: usize) -> Option<Proposal> {
        if w.len() != PROPOSAL_WORDS || w[1] >> 63 != 1 {
            return None;
        }
        let want = *Want::ALL.iter().find(|x| x.code() == w[1] & 0xff)?;
        let mut header = [0u8; HEADER_LEN];
        for (bytes, word) in header.chunks_exact_mut(8).zip(&w[4..]) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        let HeaderMsg::Proceed(call) = decode_header(&header, rank).ok()? else { return None };
        let owed = (w[1] >> 8 & 1 == 1).then_some(w[3] as u32);
        Some(Proposal { point: ((w[0] >> 32) as u32, w[0] as u32), want, key: w[2], call, owed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::header::{COUNT_UNKNOWN, CallKind, Numbering};
    use crate::reduce::{DataType, Op};

    #[test]
    fn encoding_round_trips_and_empty_slots_are_rejected() {
        let call = CallHeader {
            seq: (3 << 32) | 77,
            numbering: Numbering::Checkpointed,
            kind: CallKind::Broadcast,
            dtype: DataType::U8,
            op: Op::Sum,
            elem_size: 1,
            root: 2,
            count: COUNT_UNKNOWN,
            tag: 5,
        };
        for want in Want::ALL {
            for owed in [None, Some(0), Some(9)] {
                let x = Proposal { point: (3, 77), want, key: 12, call, owed };
                assert_eq!(Proposal::decode(&x.encode(), 1), Some(x));
            }
        }
        assert_eq!(Proposal::decode(&[0; PROPOSAL_WORDS], 1), None);
        let mut garbage = Proposal { point: (0, 0), want: Want::Execute, key: 0, call, owed: None }.encode();
        garbage[4] = u64::MAX;
        assert_eq!(Proposal::decode(&garbage, 1), None, "a malformed call header");
    }
}

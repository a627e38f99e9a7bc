//! The header that opens every collective call on a peer link: what each rank declares about
//! the call (kind, type, operator, size, root, tag), so that a mismatch between ranks is
//! found before any data moves, and the abort that replaces it when a rank gives up.
//!
//! Encoding and decoding are pure and tested on byte slices.

use crate::config::ReductionOrder;
use crate::error::{CallArgs, Declaration, Error, Result};
use crate::reduce::{DataType, Op};

/// Which collective a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CallKind {
    /// Allreduce with the tree algorithm.
    AllreduceTree = 1,
    /// Allreduce with the ring algorithm.
    AllreduceRing = 2,
    /// Broadcast.
    Broadcast = 3,
    /// Allgather (the header round that exchanges the block sizes).
    Allgather = 4,
    /// Barrier.
    Barrier = 5,
    /// The tree pass that checks a ring call's header before its data moves.
    Agree = 6,
    /// A checkpoint (prepare phase: local models move to their replicas).
    Checkpoint = 7,
    /// A checkpoint's acknowledgement (after it, the checkpoint is committed).
    CheckpointAck = 8,
    /// Recovery consensus: every worker's proposal.
    Consensus = 9,
    /// Recovery data: a checkpoint, buffered result or bootstrap result served to others.
    RecoveryData = 10,
    /// Allreduce in a hierarchy of hosts: within each host, across the hosts' leaders, back.
    AllreduceHier = 11,
    /// The last barrier of a robust `finalize`: every worker has made its last call.
    Finalize = 12,
}

impl CallKind {
    fn from_code(c: u8) -> Option<CallKind> {
        use CallKind::*;
        [
            AllreduceTree,
            AllreduceRing,
            Broadcast,
            Allgather,
            Barrier,
            Agree,
            Checkpoint,
            CheckpointAck,
            Consensus,
            RecoveryData,
            AllreduceHier,
            Finalize,
        ]
        .into_iter()
        .find(|k| *k as u8 == c)
    }

    /// Name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::AllreduceTree => "allreduce(tree)",
            CallKind::AllreduceRing => "allreduce(ring)",
            CallKind::Broadcast => "broadcast",
            CallKind::Allgather => "allgather",
            CallKind::Barrier => "barrier",
            CallKind::Agree => "agree",
            CallKind::Checkpoint => "checkpoint",
            CallKind::CheckpointAck => "checkpoint-ack",
            CallKind::Consensus => "recovery-consensus",
            CallKind::RecoveryData => "recovery-data",
            CallKind::AllreduceHier => "allreduce(hier)",
            CallKind::Finalize => "finalize",
        }
    }
}

/// Byte length of an encoded [`CallHeader`].
pub const HEADER_LEN: usize = 32;

/// `count` value meaning "unknown here" (a broadcast's receivers learn the size from the root).
pub const COUNT_UNKNOWN: u64 = u64::MAX;

/// The bit of a large allreduce's root field that says its reduction order is by hosts (the
/// other bits: its ring slice).
const HOSTS_ORDER_BIT: u32 = 1 << 31;

/// Status byte of a header: the call proceeds, or it is aborted with a reason that follows.
const STATUS_OK: u8 = 0;
const STATUS_ABORT: u8 = 1;

/// What a call's [`CallHeader::seq`] counts, so that messages name the call as a person
/// counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Numbering {
    /// The calls of the communicator so far (a communicator without recovery).
    #[default]
    Count = 0,
    /// The checkpoint version in the high 32 bits and the call's index since that checkpoint
    /// in the low 32 (a communicator with recovery).
    Checkpointed = 1,
    /// The hash of a bootstrap call's key (its name travels apart).
    Bootstrap = 2,
}

impl Numbering {
    fn from_code(c: u8) -> Option<Numbering> {
        [Numbering::Count, Numbering::Checkpointed, Numbering::Bootstrap].into_iter().find(|n| *n as u8 == c)
    }

    /// `seq` as a person reads it: `#7`, `#5 of version 23`, `bootstrap key 0x1f...`.
    pub fn show(self, seq: u64) -> String {
        match self {
            Numbering::Count => format!("#{seq}"),
            Numbering::Checkpointed => format!("#{} of version {}", seq & 0xffff_ffff, seq >> 32),
            Numbering::Bootstrap => format!("bootstrap key {seq:#018x}"),
        }
    }
}

/// What every rank declares about a collective call. All ranks must declare the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallHeader {
    /// The call's number on this communicator, as [`numbering`](Self::numbering) says.
    pub seq: u64,
    /// What `seq` counts.
    pub numbering: Numbering,
    /// The collective.
    pub kind: CallKind,
    /// Element type.
    pub dtype: DataType,
    /// Operator (`Op::Sum` where not applicable).
    pub op: Op,
    /// Element size in bytes (matters for user reducers).
    pub elem_size: u16,
    /// Root rank (broadcast); for a large allreduce, its ring slice and reduction order
    /// ([`CallHeader::large_allreduce_root`]); else 0.
    pub root: u32,
    /// Payload length in bytes, or [`COUNT_UNKNOWN`].
    pub count: u64,
    /// The caller's tag (`CallOptions::tag`), which must also match: a user reducer's
    /// identity, a split buffer's whole length.
    pub tag: u32,
}

impl CallHeader {
    /// Describes the call for error messages, e.g. `allreduce(tree) #7 of 400 bytes f32 sum`
    /// (with recovery: `allreduce(tree) #5 of version 23, 400 bytes f32 sum`).
    pub fn describe(&self) -> String {
        let count = if self.count == COUNT_UNKNOWN { "?".to_string() } else { self.count.to_string() };
        let (kind, number) = (self.kind.name(), self.numbering.show(self.seq));
        let size = format!("{count} bytes {} {}", self.dtype.name(), self.op.name());
        let mut s = match self.numbering {
            Numbering::Count => format!("{kind} {number} of {size}"),
            _ => format!("{kind} {number}, {size}"),
        };
        if self.kind == CallKind::Broadcast {
            s += &format!(" from root {}", self.root);
        } else if let Some(slice) = self.ring_slice().filter(|&b| b > 0) {
            s += &format!(" in slices of {slice} bytes");
        }
        match self.reduction_order() {
            Some(ReductionOrder::Ranks) => s += " in rank order",
            Some(ReductionOrder::Hosts) => s += " in host order",
            None => {}
        }
        if self.op == Op::User {
            s += &format!(" (user reducer tag {}, element size {})", self.tag, self.elem_size);
        } else if matches!(self.kind, CallKind::Checkpoint | CallKind::CheckpointAck) && self.tag != 0 {
            s += &format!(" of global state checksum {:08x}", self.tag);
        } else if self.tag != 0 {
            s += &format!(" tag {}", self.tag);
        }
        s
    }

    /// The root field of a large allreduce (ring or hierarchy) in slices of `slice` bytes
    /// (at most [`crate::config::MAX_RING_SLICE`]) reduced in `order`: every rank checks both.
    pub fn large_allreduce_root(slice: usize, order: ReductionOrder) -> usize {
        let hosts = if order == ReductionOrder::Hosts { HOSTS_ORDER_BIT } else { 0 };
        (slice as u32 & !HOSTS_ORDER_BIT | hosts) as usize
    }

    fn large_allreduce(&self) -> bool {
        matches!(self.kind, CallKind::AllreduceRing | CallKind::AllreduceHier)
    }

    /// The bytes of each chunk a ring allreduce reduces and gathers at a time (0: whole
    /// chunks), carried in the root field; `None` for any other call.
    pub fn ring_slice(&self) -> Option<usize> {
        self.large_allreduce().then_some((self.root & !HOSTS_ORDER_BIT) as usize)
    }

    /// The reduction order of a large allreduce (ring or hierarchy), carried in the root
    /// field; `None` for any other call.
    pub fn reduction_order(&self) -> Option<ReductionOrder> {
        self.large_allreduce().then_some(if self.root & HOSTS_ORDER_BIT != 0 {
            ReductionOrder::Hosts
        } else {
            ReductionOrder::Ranks
        })
    }

    /// This header as `rank`'s declaration in an error: its description and its fields
    /// (`key`: the bootstrap key's name, if it is a bootstrap call and the name is known).
    pub fn declaration(&self, rank: usize, key: Option<&str>) -> Declaration {
        let args = CallArgs {
            collective: self.kind.name().to_string(),
            seq: self.seq,
            bytes: (self.count != COUNT_UNKNOWN).then_some(self.count),
            dtype: self.dtype.name().to_string(),
            op: self.op.name().to_string(),
            root: (self.kind == CallKind::Broadcast).then_some(self.root),
            tag: (self.op == Op::User || self.tag != 0).then_some(self.tag),
            key: key.map(str::to_string),
        };
        let call = match key {
            Some(k) => format!("{k} ({})", self.describe()),
            None => self.describe(),
        };
        Declaration { rank, call, args: Some(Box::new(args)) }
    }

    /// Merges a peer's declaration into ours: `Ok(merged)` if they agree (an unknown count
    /// takes the known one), `Err(reason)` naming both declarations if not.
    pub fn merge(&self, other: &CallHeader, me: usize, peer: usize) -> std::result::Result<CallHeader, String> {
        let mut a = *self;
        let mut b = *other;
        if a.count == COUNT_UNKNOWN {
            a.count = b.count;
        }
        if b.count == COUNT_UNKNOWN {
            b.count = a.count;
        }
        if a == b {
            Ok(a)
        } else {
            Err(format!("rank {me} called {} but rank {peer} called {}", self.describe(), other.describe()))
        }
    }

    /// Encodes the header with status "proceed".
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = STATUS_OK;
        b[1] = self.kind as u8;
        b[2] = self.dtype as u8;
        b[3] = self.op as u8;
        b[4..6].copy_from_slice(&self.elem_size.to_le_bytes());
        b[6] = self.numbering as u8;
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.count.to_le_bytes());
        b[24..28].copy_from_slice(&self.root.to_le_bytes());
        b[28..32].copy_from_slice(&self.tag.to_le_bytes());
        b
    }
}

/// What a received header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderMsg {
    /// The sender proceeds with this declaration.
    Proceed(CallHeader),
    /// The sender aborts the call; `reason_len` bytes of UTF-8 reason follow, first raised
    /// by `origin`.
    Abort {
        /// Rank that raised the abort.
        origin: u32,
        /// Length of the reason that follows the header.
        reason_len: u32,
    },
}

/// Longest abort reason carried on a link.
pub const MAX_ABORT_REASON: usize = 4096;

/// Encodes an abort header followed by its reason (truncated to [`MAX_ABORT_REASON`]).
pub fn encode_abort(origin: usize, reason: &str) -> Vec<u8> {
    let mut r = reason.as_bytes();
    if r.len() > MAX_ABORT_REASON {
        r = &r[..MAX_ABORT_REASON];
    }
    let mut b = vec![0u8; HEADER_LEN];
    b[0] = STATUS_ABORT;
    b[24..28].copy_from_slice(&(origin as u32).to_le_bytes());
    b[28..32].copy_from_slice(&(r.len() as u32).to_le_bytes());
    b.extend_from_slice(r);
    b
}

/// Decodes a header; a malformed one is a protocol error naming `peer`.
pub fn decode_header(b: &[u8; HEADER_LEN], peer: usize) -> Result<HeaderMsg> {
    let bad = |what: &str| Error::Protocol(format!("peer rank {peer} sent a malformed call header ({what})"));
    match b[0] {
        STATUS_OK => {
            let kind = CallKind::from_code(b[1]).ok_or_else(|| bad("kind"))?;
            let dtype = DataType::from_code(b[2]).ok_or_else(|| bad("type"))?;
            let op = Op::from_code(b[3]).ok_or_else(|| bad("op"))?;
            let numbering = Numbering::from_code(b[6]).ok_or_else(|| bad("numbering"))?;
            Ok(HeaderMsg::Proceed(CallHeader {
                numbering,
                kind,
                dtype,
                op,
                elem_size: u16::from_le_bytes(b[4..6].try_into().unwrap()),
                seq: u64::from_le_bytes(b[8..16].try_into().unwrap()),
                count: u64::from_le_bytes(b[16..24].try_into().unwrap()),
                root: u32::from_le_bytes(b[24..28].try_into().unwrap()),
                tag: u32::from_le_bytes(b[28..32].try_into().unwrap()),
            }))
        }
        STATUS_ABORT => {
            let reason_len = u32::from_le_bytes(b[28..32].try_into().unwrap());
            if reason_len as usize > MAX_ABORT_REASON {
                return Err(bad("abort reason too long"));
            }
            Ok(HeaderMsg::Abort { origin: u32::from_le_bytes(b[24..28].try_into().unwrap()), reason_len })
        }
        _ => Err(bad("status")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr() -> CallHeader {
        CallHeader {
            seq: 7,
            numbering: Numbering::Count,
            kind: CallKind::AllreduceTree,
            dtype: DataType::F32,
            op: Op::Sum,
            elem_size: 4,
            root: 0,
            count: 400,
            tag: 0,
        }
    }

    #[test]
    fn header_round_trip() {
        let h = hdr();
        assert_eq!(decode_header(&h.encode(), 1).unwrap(), HeaderMsg::Proceed(h));
        for numbering in [Numbering::Checkpointed, Numbering::Bootstrap] {
            let h = CallHeader { numbering, seq: (23 << 32) | 5, ..hdr() };
            assert_eq!(decode_header(&h.encode(), 1).unwrap(), HeaderMsg::Proceed(h));
        }
        let mut bad = hdr().encode();
        bad[6] = 9;
        assert!(decode_header(&bad, 1).is_err(), "an unknown numbering");
    }

    #[test]
    fn a_call_is_named_as_a_person_counts_it() {
        assert_eq!(hdr().describe(), "allreduce(tree) #7 of 400 bytes f32 sum");
        let ring = CallHeader {
            kind: CallKind::AllreduceRing,
            numbering: Numbering::Checkpointed,
            seq: (23 << 32) | 5,
            ..hdr()
        };
        assert_eq!(ring.describe(), "allreduce(ring) #5 of version 23, 400 bytes f32 sum in rank order");
        let root = CallHeader::large_allreduce_root(4096, ReductionOrder::Ranks) as u32;
        let ranks = CallHeader { root, ..ring };
        assert_eq!(
            ranks.describe(),
            "allreduce(ring) #5 of version 23, 400 bytes f32 sum in slices of 4096 bytes in rank order"
        );
        let root = CallHeader::large_allreduce_root(4096, ReductionOrder::Hosts) as u32;
        let hosts = CallHeader { root, ..ring };
        assert_eq!((hosts.ring_slice(), hosts.reduction_order()), (Some(4096), Some(ReductionOrder::Hosts)));
        assert!(hosts.describe().ends_with("slices of 4096 bytes in host order"), "{}", hosts.describe());
        assert!(ranks.merge(&hosts, 0, 1).is_err(), "the orders differ");
        assert_eq!(hdr().reduction_order(), None, "a tree allreduce has no reduction order to agree on");
        let boot = CallHeader { numbering: Numbering::Bootstrap, seq: 0x1f, ..hdr() };
        assert_eq!(boot.describe(), "allreduce(tree) bootstrap key 0x000000000000001f, 400 bytes f32 sum");
    }

    #[test]
    fn abort_round_trip() {
        let b = encode_abort(3, "sizes differ");
        let head: [u8; HEADER_LEN] = b[..HEADER_LEN].try_into().unwrap();
        assert_eq!(decode_header(&head, 1).unwrap(), HeaderMsg::Abort { origin: 3, reason_len: 12 });
        assert_eq!(&b[HEADER_LEN..], b"sizes differ");
    }

    #[test]
    fn garbage_header_is_an_error() {
        let mut b = hdr().encode();
        b[1] = 99;
        assert!(matches!(decode_header(&b, 2), Err(Error::Protocol(m)) if m.contains("rank 2")));
        b[0] = 7;
        assert!(decode_header(&b, 2).is_err());
    }

    #[test]
    fn merge_detects_each_field() {
        let a = hdr();
        assert_eq!(a.merge(&a, 0, 1), Ok(a));
        let mut b = a;
        b.count = 800;
        let e = a.merge(&b, 0, 1).unwrap_err();
        assert!(e.contains("400 bytes") && e.contains("800 bytes") && e.contains("rank 1"), "{e}");
        for f in [
            |h: &mut CallHeader| h.dtype = DataType::F64,
            |h: &mut CallHeader| h.op = Op::Max,
            |h: &mut CallHeader| h.seq = 8,
            |h: &mut CallHeader| h.kind = CallKind::AllreduceRing,
        ] {
            let mut b = a;
            f(&mut b);
            assert!(a.merge(&b, 0, 1).is_err());
        }
        let mut unknown = a;
        unknown.count = COUNT_UNKNOWN;
        assert_eq!(unknown.merge(&a, 0, 1).unwrap().count, 400);
    }
}

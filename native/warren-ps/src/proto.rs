//! The parameter server's wire protocol, with no I/O: requests, replies, and how errors cross
//! the wire.
//!
//! A connection opens with the handshake every Warren service uses (see [`warren_wire`]),
//! for [`Purpose::ParamServer`](warren_wire::auth::Purpose::ParamServer). Then the client
//! sends [`Request`] frames and gets exactly one [`Reply`] for each, in order. A frame is
//! binary ([`encode`], [`decode`]): the [`wire`](warren_wire) framing (`u32` little-endian
//! length, at most [`MAX_PS_FRAME`] bytes), then a tail of little-endian `f32` values and
//! `u64` keys and a small JSON header pointing into it (see `floats.rs`). A client may send several requests before reading the
//! replies (the trainer client sends one to every server before it waits).

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::consistency::Mode;
use super::table::TableSpec;
use warren_base::error::Error;
use warren_wire::pool;

/// Largest frame a parameter server or its client accepts.
pub const MAX_PS_FRAME: usize = 1 << 30;

/// Encodes a request, a reply (or any message with bulk arrays) as one binary frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    super::floats::encode_frame(msg)
}

/// Decodes a whole frame (length included) written by [`encode`]; anything malformed is an
/// [`Error::Protocol`]. The frame is left as it was, to be reused.
pub fn decode<T: serde::de::DeserializeOwned>(frame: &mut Vec<u8>) -> warren_base::error::Result<T> {
    super::floats::decode_frame(frame)
}

/// A frame in pieces, written in order: `prefix`, `arrays`, `header`.
pub(crate) struct Parts<'a> {
    /// Frame length and tail length.
    pub prefix: [u8; 8],
    /// The tail: the message's arrays, where they are.
    pub arrays: Vec<&'a [u8]>,
    /// The JSON header.
    pub header: Vec<u8>,
}

impl Parts<'_> {
    /// The pieces in the order they are written.
    pub fn pieces(&self) -> Vec<&[u8]> {
        let mut all = Vec::with_capacity(self.arrays.len() + 2);
        all.push(&self.prefix[..]);
        all.extend_from_slice(&self.arrays);
        all.push(&self.header);
        all
    }
}

/// A push's frame in pieces, for a vectored write: its gradients are written from where
/// they are, not copied into a frame first; the pieces make the bytes [`encode`] gives.
/// `None` for other requests (small: [`encode`] them), and on big-endian machines.
pub(crate) fn push_parts(req: &Request) -> Option<Parts<'_>> {
    let Request::Push { grads, .. } = req else { return None };
    if cfg!(target_endian = "big") {
        return None;
    }
    let (prefix, header) = super::floats::encode_head(req);
    // The arrays in the order serde visits them: a gradient's fields in declaration order.
    let mut arrays: Vec<&[u8]> = Vec::with_capacity(2 * grads.len());
    for g in grads.iter() {
        match g {
            Grad::Dense { values, .. } => arrays.push(bytemuck::cast_slice(values)),
            Grad::Sparse { keys, values, .. } => {
                arrays.push(bytemuck::cast_slice(keys));
                arrays.push(bytemuck::cast_slice(values));
            }
            Grad::SparseBags { keys, ends, values, .. } => {
                arrays.push(bytemuck::cast_slice(keys));
                arrays.push(bytemuck::cast_slice(ends));
                arrays.push(bytemuck::cast_slice(values));
            }
        }
    }
    Some(Parts { prefix, arrays, header })
}

/// What a job runs: its trainers, its consistency mode and its tables. The first trainer to
/// send it defines it; the same again is a no-op, another one an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Number of trainers (ids `0..trainers`).
    pub trainers: u32,
    /// Sync, async or SSP(k).
    pub mode: Mode,
    /// The tables.
    pub tables: Vec<TableSpec>,
    /// Trainer ids that do not take part at the start: each joins later, at a step it names
    /// ([`Request::Join`]). Empty: every trainer takes part from step 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joining: Vec<u32>,
}

/// A request to one parameter server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Opens the session: `trainer` is the trainer's id, `None` for an observer (status,
    /// model dumps) whose pulls never wait and who cannot push.
    Hello {
        /// The trainer id.
        trainer: Option<u32>,
    },
    /// Defines the job (see [`JobSpec`]).
    Define {
        /// The job.
        job: JobSpec,
    },
    /// Parameters of one or more tables (all on this server), answered with one
    /// [`Reply::Floats`]: each piece's values in the order of `pieces`, so a trainer's step
    /// pulls every table it reads in one round trip.
    Pull {
        /// What to pull.
        pieces: Vec<PullPiece>,
    },
    /// The trainer's gradients of `step` for this server (possibly none). In a sync job they
    /// are staged: held, not counted until [`Request::Commit`] (see the two-phase pushes of
    /// `consistency.rs`), and the answer is [`Reply::Staged`]. In async and SSP jobs they
    /// count on arrival, and the answer is [`Reply::Pushed`].
    Push {
        /// The trainer's step: its pushes to this server so far.
        step: u64,
        /// The gradients (shared with the copy the trainer keeps to push again after a
        /// server restart).
        grads: Arc<Vec<Grad>>,
    },
    /// Commits the trainer's staged push of `step` (a no-op if it is already committed).
    Commit {
        /// The step.
        step: u64,
    },
    /// Drops the trainer's staged push of `step`, if any: its replacement undoes a push that
    /// no server committed.
    Abort {
        /// The step.
        step: u64,
    },
    /// Async and SSP, after the trainer's predecessor died with a push counted at other
    /// servers only (or this server restarted without its log): the trainer
    /// goes on at `step`; the steps in between are counted as lost.
    Resume {
        /// The trainer's next step.
        step: u64,
    },
    /// The trainer leaves the job: it holds nobody back any more.
    Leave,
    /// The trainer (named as joining, or one that left) takes part from its step `step` on.
    Join {
        /// The first step it pushes.
        step: u64,
    },
    /// Asks for the server's state.
    Status,
}

/// One table's part of a [`Request::Pull`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PullPiece {
    /// Elements `start..end` of a dense table.
    Dense {
        /// The table.
        table: String,
        /// First element.
        start: u64,
        /// One past the last element.
        end: u64,
    },
    /// Rows `keys` of a sparse table, concatenated in the order of `keys`, created if new.
    Sparse {
        /// The table.
        table: String,
        /// The keys.
        #[serde(with = "super::floats::u64s")]
        keys: Vec<u64>,
    },
    /// The sum of each bag's rows of a sparse table (see `ps::bags`), bag by
    /// bag; rows created if new.
    SparseBags {
        /// The table.
        table: String,
        /// The keys, bag by bag.
        #[serde(with = "super::floats::u64s")]
        keys: Vec<u64>,
        /// Where each bag ends in `keys`.
        #[serde(with = "super::floats::u64s")]
        ends: Vec<u64>,
    },
}

impl PullPiece {
    /// The table pulled from.
    pub fn table(&self) -> &str {
        match self {
            PullPiece::Dense { table, .. } | PullPiece::Sparse { table, .. } | PullPiece::SparseBags { table, .. } => {
                table
            }
        }
    }
}

/// What a server knows about its job and progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// This server's index.
    pub index: usize,
    /// Number of servers.
    pub servers: usize,
    /// The job, once defined.
    pub job: Option<JobSpec>,
    /// Each trainer's clock (pushes received).
    pub clocks: Vec<u64>,
    /// Steps applied (sync) or the slowest live clock (async, SSP).
    pub applied: u64,
    /// Sparse rows held.
    pub rows: usize,
    /// Pushes taken since the job started (restored with a checkpoint).
    pub pushes: u64,
    /// Trainers' pushes lost in this server's restarts, or by a trainer that died with its
    /// push counted at other servers only (async, SSP).
    #[serde(default)]
    pub lost: u64,
}

/// A server's answer to one [`Request`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// Answer to [`Request::Hello`].
    Hello {
        /// This server's index.
        index: usize,
        /// Number of servers.
        servers: usize,
        /// The job, if defined.
        job: Option<JobSpec>,
        /// The trainer's clock here (0 for a new trainer).
        clock: u64,
        /// The step the trainer has staged here and not committed, if any.
        #[serde(default)]
        staged: Option<u64>,
    },
    /// The request was carried out.
    Done,
    /// Answer to [`Request::Push`] in a sync job: staged.
    Staged,
    /// Answer to [`Request::Commit`], and to [`Request::Push`] in async and SSP jobs: counted.
    Pushed {
        /// The trainer's clock in this server's last checkpoint: the trainer must keep its
        /// pushes from this step on, to push them again should the server restart from that
        /// checkpoint. `None`: the server keeps no checkpoints (nothing to keep).
        durable: Option<u64>,
    },
    /// Answer to [`Request::Resume`].
    Resumed {
        /// The trainer's pushes lost in the restart.
        lost: u64,
    },
    /// Answer to a pull.
    Floats {
        /// The values (rows concatenated in key order for a sparse pull).
        #[serde(with = "super::floats")]
        values: Vec<f32>,
    },
    /// A [`Reply::Floats`] as the trainer's client received it: its values still in the
    /// frame, read from there into the caller's buffer with one copy. Made by the client's
    /// link in place of decoding; never on the wire.
    #[serde(skip)]
    Received(ReceivedFloats),
    /// Answer to [`Request::Status`].
    Status {
        /// The state.
        status: ServerStatus,
    },
    /// The request failed; the connection stays usable unless the frame was malformed.
    Error {
        /// Which [`Error`] variant.
        kind: ErrorKind,
        /// Its message.
        message: String,
    },
}

/// The values of a floats reply where they arrived: the received frame and where in it
/// they are (little-endian `f32`s), so that a pull copies them once, from the frame into
/// the caller's buffer, instead of decoding them into a buffer of their own first.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedFloats {
    frame: Vec<u8>,
    values: Range<usize>,
}

impl ReceivedFloats {
    /// `frame` (a whole frame, length prefix included) if it is a floats reply; else it is
    /// given back.
    pub(crate) fn from_frame(frame: Vec<u8>) -> std::result::Result<ReceivedFloats, Vec<u8>> {
        match super::floats::floats_reply_values(&frame) {
            Some(values) => Ok(ReceivedFloats { frame, values }),
            None => Err(frame),
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.values.len() / 4
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The bytes of values `at..at + n`, which must be received ones.
    fn bytes(&self, at: usize, n: usize) -> &[u8] {
        assert!(at + n <= self.len(), "values {at}..+{n} of the {} received", self.len());
        let start = self.values.start + 4 * at;
        &self.frame[start..start + 4 * n]
    }

    /// Copies `out.len()` values, from value `at` on, into `out`.
    pub fn copy_to(&self, at: usize, out: &mut [f32]) {
        super::floats::copy_f32s(self.bytes(at, out.len()), out);
    }

    /// Copies `to.len()` rows of `width` values, from value `at` on, row `i` to row `to[i]`
    /// of `out` (as a sparse pull puts one server's rows in the order of the caller's
    /// keys). Every `to[i]` must be a row of `out`.
    pub fn scatter_rows(&self, at: usize, width: usize, to: &[usize], out: &mut [f32]) {
        let rows = self.bytes(at, to.len() * width).chunks_exact(4 * width);
        for (row, &at) in rows.zip(to) {
            super::floats::copy_f32s(row, &mut out[at * width..(at + 1) * width]);
        }
    }

    /// Adds `to.len()` rows of `width` values, from value `at` on, row `i` to row `to[i]` of
    /// `out` (as a bagged pull adds one server's sums of bags to the caller's). Every `to[i]`
    /// must be a row of `out`.
    pub fn add_rows(&self, at: usize, width: usize, to: &[usize], out: &mut [f32]) {
        let rows = self.bytes(at, to.len() * width).chunks_exact(4 * width);
        for (row, &at) in rows.zip(to) {
            for (o, v) in out[at * width..(at + 1) * width].iter_mut().zip(row.chunks_exact(4)) {
                *o += f32::from_le_bytes(v.try_into().expect("4 bytes"));
            }
        }
    }

    /// The frame, to read a later one into.
    pub fn into_frame(self) -> Vec<u8> {
        self.frame
    }
}

/// Gradients for one table, as a trainer pushes them to one server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Grad {
    /// Gradients of elements `offset..offset + values.len()` of a dense table.
    Dense {
        /// The table.
        table: String,
        /// First element.
        offset: u64,
        /// One per element.
        #[serde(with = "super::floats")]
        values: Vec<f32>,
    },
    /// Gradients of rows of a sparse table: `values` holds `keys.len()` rows of the table's
    /// width, in the order of `keys`; a key given twice has its rows summed.
    Sparse {
        /// The table.
        table: String,
        /// Row keys.
        #[serde(with = "super::floats::u64s")]
        keys: Vec<u64>,
        /// The rows, concatenated.
        #[serde(with = "super::floats")]
        values: Vec<f32>,
    },
    /// A gradient of sums of rows of a sparse table (see `ps::bags`): `values`
    /// holds one row of the table's width per bag of `keys` (cut by `ends`), which counts for
    /// every key of the bag; a key given twice has its rows summed.
    SparseBags {
        /// The table.
        table: String,
        /// Row keys, bag by bag.
        #[serde(with = "super::floats::u64s")]
        keys: Vec<u64>,
        /// Where each bag ends in `keys`.
        #[serde(with = "super::floats::u64s")]
        ends: Vec<u64>,
        /// A row per bag, concatenated.
        #[serde(with = "super::floats")]
        values: Vec<f32>,
    },
}

impl Grad {
    /// Gives its buffer back to the [`warren_wire::pool`], once it is not needed.
    pub fn recycle(self) {
        match self {
            Grad::Dense { values, .. } | Grad::Sparse { values, .. } | Grad::SparseBags { values, .. } => {
                pool::FLOATS.give(values)
            }
        }
    }

    /// The table it is for.
    pub fn table(&self) -> &str {
        match self {
            Grad::Dense { table, .. } | Grad::Sparse { table, .. } | Grad::SparseBags { table, .. } => table,
        }
    }
}

/// The frame of a [`Reply::Floats`] of `values`, encoded from where they are.
#[cfg(test)]
pub(crate) fn floats_frame(values: &[f32]) -> Vec<u8> {
    floats_frame_by(values.len(), |out| super::floats::put_f32s(out, values))
}

/// [`floats_frame`] of `n` values that `fill` appends to the frame (as little-endian bytes,
/// e.g. with [`put_f32s`](super::floats::put_f32s)), so they are written where they are
/// found, with no buffer between. `fill` must append exactly `n` values.
pub(crate) fn floats_frame_by(n: usize, fill: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(tag = "reply", rename = "floats")]
    struct Floats {
        #[serde(with = "super::floats::counted")]
        values: usize,
    }
    let (prefix, header) = super::floats::encode_head(&Floats { values: n });
    let mut out = warren_wire::pool::BYTES.take(prefix.len() + 4 * n + header.len());
    out.extend_from_slice(&prefix);
    fill(&mut out);
    assert_eq!(out.len(), prefix.len() + 4 * n, "a floats frame's fill appends exactly its values");
    out.extend_from_slice(&header);
    out
}

/// The [`Error`] variants that cross the wire; the client rebuilds the same variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// [`Error::InvalidArgument`]: a wrong table, key, range, width or step.
    InvalidArgument,
    /// [`Error::Protocol`]: the request could not be decoded.
    Protocol,
    /// [`Error::Timeout`]: a pull waited past its deadline for slower trainers.
    Timeout,
    /// Anything else, rebuilt as [`Error::Protocol`].
    Other,
}

/// The reply that carries `e` to the client.
pub fn error_reply(e: &Error) -> Reply {
    let (kind, message) = match e {
        Error::InvalidArgument(m) => (ErrorKind::InvalidArgument, m.clone()),
        Error::Protocol(m) => (ErrorKind::Protocol, m.clone()),
        Error::Timeout { .. } => (ErrorKind::Timeout, e.to_string()),
        other => (ErrorKind::Other, other.to_string()),
    };
    Reply::Error { kind, message }
}

/// The error a client raises for an error reply from the server named `who`.
pub fn reply_error(kind: ErrorKind, message: String, who: &str) -> Error {
    match kind {
        ErrorKind::InvalidArgument => Error::InvalidArgument(format!("{who}: {message}")),
        ErrorKind::Timeout => Error::Timeout { what: format!("{who}: {message}"), after: Default::default() },
        ErrorKind::Protocol | ErrorKind::Other => Error::Protocol(format!("{who}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Optimizer;
    use crate::table::{Init, TableKind};

    #[test]
    fn requests_and_replies_round_trip_through_frames() {
        let job = JobSpec {
            trainers: 4,
            joining: Vec::new(),
            mode: Mode::Ssp { staleness: 2 },
            tables: vec![TableSpec {
                name: "emb".into(),
                kind: TableKind::Sparse { width: 16, expected_rows: 0 },
                init: Init::Uniform { scale: 0.01, seed: 1 },
                optimizer: Optimizer::adam(0.001),
            }],
        };
        let reqs = [
            Request::Hello { trainer: Some(3) },
            Request::Define { job: job.clone() },
            Request::Pull {
                pieces: vec![
                    PullPiece::Dense { table: "w".into(), start: 2, end: 9 },
                    PullPiece::Sparse { table: "emb".into(), keys: vec![u64::MAX, 0] },
                ],
            },
            Request::Push {
                step: 7,
                grads: vec![Grad::Sparse { table: "emb".into(), keys: vec![1], values: vec![0.5; 16] }].into(),
            },
            Request::Commit { step: 7 },
            Request::Abort { step: 7 },
            Request::Resume { step: 9 },
            Request::Leave,
            Request::Status,
        ];
        for r in reqs {
            assert_eq!(decode::<Request>(&mut encode(&r)).unwrap(), r);
        }
        let replies = [
            Reply::Hello { index: 1, servers: 2, job: Some(job), clock: 5, staged: Some(5) },
            Reply::Staged,
            Reply::Floats { values: vec![1.5, -0.0] },
            Reply::Pushed { durable: Some(3) },
            Reply::Resumed { lost: 2 },
            error_reply(&Error::InvalidArgument("no table".into())),
        ];
        for r in replies {
            assert_eq!(decode::<Reply>(&mut encode(&r)).unwrap(), r);
        }
        let values = vec![0.5, -0.0, f32::MAX];
        assert_eq!(floats_frame(&values), encode(&Reply::Floats { values }), "a pull's reply in place");
        let push = Request::Push {
            step: 2,
            grads: vec![
                Grad::Dense { table: "w".into(), offset: 3, values: vec![1.5, -2.0] },
                Grad::Sparse { table: "emb".into(), keys: vec![7, u64::MAX], values: vec![0.25; 32] },
            ]
            .into(),
        };
        let parts = push_parts(&push).unwrap();
        assert_eq!(parts.pieces().concat(), encode(&push), "a push written in pieces is the same frame");
        assert!(push_parts(&Request::Status).is_none());
        let pull = Request::Pull { pieces: vec![PullPiece::Dense { table: "w".into(), start: 0, end: 1 }] };
        let json = serde_json::to_string(&pull).unwrap();
        assert_eq!(json, r#"{"op":"pull","pieces":[{"kind":"dense","table":"w","start":0,"end":1}]}"#);
    }

    #[test]
    fn a_received_floats_reply_is_read_from_its_frame_bit_for_bit() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        let values: Vec<f32> = vec![0.5, -0.0, f32::MAX, f32::NAN, 1e-40, -3.25];
        for frame in [floats_frame(&values), encode(&Reply::Floats { values: values.clone() })] {
            let got = ReceivedFloats::from_frame(frame).expect("a floats reply");
            assert_eq!(got.len(), values.len());
            let mut out = vec![7.0f32; values.len()];
            got.copy_to(0, &mut out);
            assert_eq!(bits(&out), bits(&values));
            // Three rows of 2, put back in the order of the keys that asked for them.
            let mut rows = vec![0f32; 6];
            got.scatter_rows(0, 2, &[2, 0, 1], &mut rows);
            assert_eq!(bits(&rows), bits(&[f32::MAX, f32::NAN, 1e-40, -3.25, 0.5, -0.0]));
            // Pieces of one reply (a pull of several tables), each from where it starts.
            let mut head = [0f32; 1];
            got.copy_to(1, &mut head);
            assert_eq!(bits(&head), bits(&[-0.0]));
            let mut two = vec![0f32; 4];
            got.scatter_rows(2, 2, &[1, 0], &mut two);
            assert_eq!(bits(&two), bits(&[1e-40, -3.25, f32::MAX, f32::NAN]));
        }
        let empty = ReceivedFloats::from_frame(floats_frame(&[])).expect("no values is still a floats reply");
        assert!(empty.is_empty());
        for other in [Reply::Staged, Reply::Done, error_reply(&Error::InvalidArgument("floats".into()))] {
            let frame = encode(&other);
            let back = ReceivedFloats::from_frame(frame.clone()).expect_err("not a floats reply");
            assert_eq!(back, frame, "any other reply is given back as it was, to be decoded");
        }
        // A floats header pointing past its tail is not read from: decoding it says why.
        let mut bad = floats_frame(&values);
        let cut = 8 + 4 * values.len();
        bad.drain(8 + 4..cut);
        bad[4..8].copy_from_slice(&4u32.to_le_bytes());
        let len = (bad.len() - 4) as u32;
        bad[..4].copy_from_slice(&len.to_le_bytes());
        let mut bad = ReceivedFloats::from_frame(bad).expect_err("values overrunning the tail");
        let e = decode::<Reply>(&mut bad).unwrap_err();
        assert!(e.to_string().contains("overrun"), "{e}");
    }

    #[test]
    fn errors_keep_their_variant_and_name_the_server() {
        for e in [
            Error::InvalidArgument("key 3 of table \"emb\" belongs to server 1".into()),
            Error::Protocol("malformed message".into()),
            Error::Timeout { what: "trainers [2]".into(), after: Default::default() },
        ] {
            let Reply::Error { kind, message } = error_reply(&e) else { panic!() };
            let back = reply_error(kind, message, "ps server 0 (h:1)");
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(&e));
            assert!(back.to_string().contains("ps server 0 (h:1)"), "{back}");
        }
    }
}

//! The master's wire protocol, with no I/O: requests, replies, and how errors cross the wire.
//!
//! A connection opens with the handshake every Warren service uses (see [`warren_wire`]):
//! the client sends the preamble, the master answers with the preamble and a nonce, the
//! client answers with `auth::prove(secret, Purpose::Master, nonce)`, and the master replies
//! one byte, 1 (accepted) or 0 (refused, then closes). After that the client sends
//! [`Request`] frames (`u32` little-endian length + JSON, [`warren_wire::encode_frame`])
//! and gets exactly one [`Reply`] frame for each, in order.

use serde::{Deserialize, Serialize};

use super::queue::{Ack, GetTask, QueueCounts, TaskId};
use warren_base::error::Error;

/// A request from a worker (or `warren master status`) to the master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Sets the dataset: RecordIO files matched by `patterns` (globs, expanded and indexed
    /// by the master), cut into tasks of `chunks_per_task` chunks. The first call wins; the
    /// same dataset again is a no-op; another one is [`Error::DatasetMismatch`].
    SetDataset {
        /// Glob patterns of RecordIO files.
        patterns: Vec<String>,
        /// Chunks per task.
        chunks_per_task: u32,
    },
    /// Asks for a task of pass `pass`.
    GetTask {
        /// The pass the worker is in.
        pass: u64,
    },
    /// Reports hand-out `epoch` of task `id` finished.
    TaskFinished {
        /// The task.
        id: TaskId,
        /// Its epoch, as handed out.
        epoch: u64,
    },
    /// Reports hand-out `epoch` of task `id` failed.
    TaskFailed {
        /// The task.
        id: TaskId,
        /// Its epoch, as handed out.
        epoch: u64,
        /// Why (logged by the master and kept with a discarded task).
        reason: String,
    },
    /// Reports a task finished and asks for the next one of pass `pass`, in one durable step.
    FinishAndGetTask {
        /// The finished task.
        id: TaskId,
        /// Its epoch, as handed out.
        epoch: u64,
        /// The pass the worker is in.
        pass: u64,
    },
    /// Asks for the queue counts.
    Status,
}

/// What the master knows about its progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterStatus {
    /// Whether a dataset has been set.
    pub has_dataset: bool,
    /// The current pass.
    pub pass: u64,
    /// Number of tasks in the dataset.
    pub tasks: usize,
    /// Tasks in each queue.
    #[serde(flatten)]
    pub counts: QueueCounts,
}

/// The master's answer to one [`Request`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// The request was carried out (and is durable).
    Done,
    /// Answer to [`Request::GetTask`].
    Task {
        /// The answer.
        task: GetTask,
    },
    /// Answer to [`Request::TaskFinished`] and [`Request::TaskFailed`].
    Ack {
        /// Whether the report was about the live hand-out.
        ack: Ack,
    },
    /// Answer to [`Request::FinishAndGetTask`].
    FinishedAndTask {
        /// What became of the report.
        ack: Ack,
        /// The next task.
        task: GetTask,
    },
    /// Answer to [`Request::Status`].
    Status {
        /// The counts.
        status: MasterStatus,
    },
    /// The request failed.
    Error {
        /// Which [`Error`] variant.
        kind: ErrorKind,
        /// Its message.
        message: String,
    },
}

/// The [`Error`] variants that cross the wire; the client rebuilds the same variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// [`Error::DatasetMismatch`].
    DatasetMismatch,
    /// [`Error::InvalidArgument`] (a glob matching nothing, a bad task id, no dataset yet).
    InvalidArgument,
    /// [`Error::Corrupt`] (a dataset file whose chunk headers cannot be indexed).
    Corrupt,
    /// [`Error::StoreFailed`]: the master must restart; clients retry.
    StoreFailed,
    /// [`Error::Protocol`]: the request could not be decoded.
    Protocol,
    /// Anything else, reported as [`Error::Master`].
    Other,
}

impl ErrorKind {
    /// Whether a client should retry the request (on a restarted master) rather than fail.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::StoreFailed)
    }
}

/// The reply that carries `e` to the client.
pub fn error_reply(e: &Error) -> Reply {
    let kind = match e {
        Error::DatasetMismatch(_) => ErrorKind::DatasetMismatch,
        Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
        Error::Corrupt { .. } => ErrorKind::Corrupt,
        Error::StoreFailed(_) => ErrorKind::StoreFailed,
        Error::Protocol(_) => ErrorKind::Protocol,
        _ => ErrorKind::Other,
    };
    // Send the variant's inner text, so that the rebuilt error does not repeat its prefix.
    let message = match e {
        Error::DatasetMismatch(m) | Error::InvalidArgument(m) | Error::StoreFailed(m) | Error::Protocol(m) => m.clone(),
        other => other.to_string(),
    };
    Reply::Error { kind, message }
}

/// The error a client raises for an error reply from the master at `uri`.
pub fn reply_error(kind: ErrorKind, message: String, uri: &str) -> Error {
    match kind {
        ErrorKind::DatasetMismatch => Error::DatasetMismatch(format!("master {uri}: {message}")),
        ErrorKind::InvalidArgument => Error::InvalidArgument(format!("master {uri}: {message}")),
        ErrorKind::StoreFailed => Error::StoreFailed(format!("master {uri}: {message}")),
        ErrorKind::Protocol => Error::Protocol(format!("master {uri}: {message}")),
        ErrorKind::Corrupt | ErrorKind::Other => Error::Master(format!("{uri}: {message}")),
    }
}

/// Whether `reply` is the kind of answer `request` expects (a mismatch means the two ends
/// disagree about the protocol).
pub fn reply_fits(request: &Request, reply: &Reply) -> bool {
    matches!(
        (request, reply),
        (_, Reply::Error { .. })
            | (Request::SetDataset { .. }, Reply::Done)
            | (Request::GetTask { .. }, Reply::Task { .. })
            | (Request::TaskFinished { .. } | Request::TaskFailed { .. }, Reply::Ack { .. })
            | (Request::FinishAndGetTask { .. }, Reply::FinishedAndTask { .. })
            | (Request::Status, Reply::Status { .. })
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChunkRef, Task};
    use warren_wire::{MAX_FRAME, decode_frame, encode_frame};

    #[test]
    fn requests_have_a_readable_shape_and_round_trip() {
        let r = Request::TaskFailed { id: TaskId(4), epoch: 2, reason: "bad chunk".into() };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#"{"op":"task_failed","id":4,"epoch":2,"reason":"bad chunk"}"#);
        for req in [
            r,
            Request::SetDataset { patterns: vec!["/d/*.rio".into()], chunks_per_task: 3 },
            Request::GetTask { pass: 1 },
            Request::TaskFinished { id: TaskId(1), epoch: 1 },
            Request::FinishAndGetTask { id: TaskId(1), epoch: 1, pass: 0 },
            Request::Status,
        ] {
            let frame = encode_frame(&req);
            let (back, used) = decode_frame::<Request>(&frame).unwrap().unwrap();
            assert_eq!((back, used), (req, frame.len()));
        }
    }

    #[test]
    fn replies_round_trip_through_frames_even_split() {
        let task = Task {
            id: TaskId(7),
            epoch: 3,
            pass: 1,
            chunks: vec![ChunkRef { path: "/d/a.rio".into(), index: 2, offset: 40, len: 20, records: 5 }],
        };
        let replies = [
            Reply::Done,
            Reply::Task { task: GetTask::Task(task.clone()) },
            Reply::Task { task: GetTask::PassFinished { current_pass: 2 } },
            Reply::Ack { ack: Ack::Stale },
            Reply::FinishedAndTask { ack: Ack::Accepted, task: GetTask::NoMoreTasksNow },
            Reply::Status {
                status: MasterStatus {
                    has_dataset: true,
                    pass: 1,
                    tasks: 9,
                    counts: QueueCounts { todo: 1, pending: 2, done: 3, failed: 3 },
                },
            },
            error_reply(&Error::DatasetMismatch("x".into())),
        ];
        let mut stream = Vec::new();
        for r in &replies {
            stream.extend(encode_frame(r));
        }
        // Fed byte by byte, the decoder reports "incomplete" until a whole frame is there.
        let mut got = Vec::new();
        let mut buf = Vec::new();
        for b in stream {
            buf.push(b);
            if let Some((r, used)) = decode_frame::<Reply>(&buf).unwrap() {
                buf.drain(..used);
                got.push(r);
            }
        }
        assert!(buf.is_empty());
        assert_eq!(got, replies);
    }

    #[test]
    fn status_json_is_flat() {
        let s = MasterStatus {
            has_dataset: true,
            pass: 0,
            tasks: 3,
            counts: QueueCounts { todo: 3, ..Default::default() },
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"has_dataset":true,"pass":0,"tasks":3,"todo":3,"pending":0,"done":0,"failed":0}"#
        );
    }

    #[test]
    fn garbage_and_oversized_frames_are_protocol_errors() {
        let mut f = 5u32.to_le_bytes().to_vec();
        f.extend_from_slice(b"hello");
        assert!(matches!(decode_frame::<Request>(&f), Err(Error::Protocol(_))));
        let f = encode_frame(&serde_json::json!({"op": "launch_missiles"}));
        assert!(matches!(decode_frame::<Request>(&f), Err(Error::Protocol(_))));
        let f = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(matches!(decode_frame::<Request>(&f), Err(Error::Protocol(_))));
    }

    #[test]
    fn errors_keep_their_variant_and_name_the_master() {
        let cases = [
            (Error::DatasetMismatch("m".into()), "dataset mismatch: master h:1: m"),
            (Error::InvalidArgument("pattern \"x\" matches no file".into()), "master h:1: pattern"),
            (Error::StoreFailed("disk".into()), "master h:1: disk"),
            (Error::Config("c".into()), "master: h:1: configuration error: c"),
        ];
        for (e, needle) in cases {
            let Reply::Error { kind, message } = error_reply(&e) else { panic!() };
            let back = reply_error(kind, message, "h:1");
            assert_eq!(std::mem::discriminant(&back) == std::mem::discriminant(&e), kind != ErrorKind::Other);
            assert!(back.to_string().contains(needle), "{back}");
        }
        assert!(ErrorKind::StoreFailed.is_retryable());
        assert!(!ErrorKind::DatasetMismatch.is_retryable());
    }

    #[test]
    fn replies_must_fit_their_request() {
        assert!(reply_fits(&Request::Status, &Reply::Status { status: MasterStatus::default() }));
        assert!(reply_fits(&Request::GetTask { pass: 0 }, &error_reply(&Error::InvalidArgument("x".into()))));
        assert!(!reply_fits(&Request::GetTask { pass: 0 }, &Reply::Done));
        assert!(!reply_fits(&Request::TaskFinished { id: TaskId(0), epoch: 1 }, &Reply::Done));
    }
}

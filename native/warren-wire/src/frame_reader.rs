//! Frames read from an async stream (the services' side of a connection).

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::frame::{MAX_FRAME, decode_frame_within};
use super::inbox::Inbox;
use warren_base::error::{Error, Result};

/// Reads whole frames from an async stream, buffering what arrives between them.
#[derive(Debug)]
pub struct FrameReader<R> {
    rd: R,
    who: String,
    inbox: Inbox,
    max_frame: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames from `rd`; `who` names the other end in I/O errors.
    pub fn new(rd: R, who: impl Into<String>) -> FrameReader<R> {
        FrameReader { rd, who: who.into(), inbox: Inbox::default(), max_frame: MAX_FRAME }
    }

    /// Accepts frames of up to `max` body bytes instead of [`MAX_FRAME`].
    pub fn with_max_frame(mut self, max: usize) -> FrameReader<R> {
        self.max_frame = max;
        self
    }

    /// The next message: `Ok(None)` once the other end has closed the connection, an
    /// [`Error::Protocol`] for a malformed or oversized frame, an [`Error::Io`] if reading
    /// failed.
    pub async fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>> {
        loop {
            if let Some((msg, used)) = decode_frame_within::<T>(self.inbox.bytes(), self.max_frame)? {
                self.inbox.consume(used);
                return Ok(Some(msg));
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }

    /// The next whole frame as bytes (its length prefix included), for services whose
    /// bodies are not JSON; otherwise as [`next`](Self::next).
    pub async fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        loop {
            if let Some(frame) = self.inbox.take_frame(self.max_frame)? {
                return Ok(Some(frame));
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }

    /// Gives back a frame [`next_frame`](Self::next_frame) returned, once read: a large one
    /// is reused to read the next large frame into.
    pub fn recycle(&mut self, frame: Vec<u8>) {
        self.inbox.recycle(frame);
    }

    /// Reads what arrives next straight into the inbox; `false` once the other end has closed.
    async fn fill(&mut self) -> Result<bool> {
        match self.rd.read(self.inbox.space(self.max_frame)).await {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.inbox.filled(n);
                Ok(true)
            }
            Err(e) => Err(Error::io(format!("reading from {}", self.who), e)),
        }
    }
}

//! Frames read from an async stream (the services' side of a connection).

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::frame::{MAX_FRAME, decode_frame_within, frame_len_within, take_frame};
use crate::error::{Error, Result};

/// Reads whole frames from an async stream, buffering what arrives between them.
#[derive(Debug)]
pub struct FrameReader<R> {
    rd: R,
    who: String,
    inbox: Vec<u8>,
    chunk: Vec<u8>,
    max_frame: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames from `rd`; `who` names the other end in I/O errors.
    pub fn new(rd: R, who: impl Into<String>) -> FrameReader<R> {
        FrameReader { rd, who: who.into(), inbox: Vec::new(), chunk: vec![0u8; 8192], max_frame: MAX_FRAME }
    }

    /// Accepts frames of up to `max` body bytes instead of [`MAX_FRAME`], reading in larger
    /// pieces.
    pub fn with_max_frame(mut self, max: usize) -> FrameReader<R> {
        self.max_frame = max;
        self.chunk.resize(self.chunk.len().max((max / 16).clamp(8192, 1 << 20)), 0);
        self
    }

    /// The next message: `Ok(None)` once the other end has closed the connection, an
    /// [`Error::Protocol`] for a malformed or oversized frame, an [`Error::Io`] if reading
    /// failed.
    pub async fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>> {
        loop {
            if let Some((msg, used)) = decode_frame_within::<T>(&self.inbox, self.max_frame)? {
                self.inbox.drain(..used);
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
            if let Some(len) = frame_len_within(&self.inbox, self.max_frame)? {
                return Ok(Some(take_frame(&mut self.inbox, len)));
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }

    /// Reads what arrives next into the inbox; `false` once the other end has closed.
    async fn fill(&mut self) -> Result<bool> {
        match self.rd.read(&mut self.chunk).await {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.inbox.extend_from_slice(&self.chunk[..n]);
                Ok(true)
            }
            Err(e) => Err(Error::io(format!("reading from {}", self.who), e)),
        }
    }
}

//! Length-prefixed frames: a `u32` little-endian length, then that many bytes of JSON.
//!
//! The decoder reports "incomplete" (`Ok(None)`) instead of blocking, so it serves both the
//! async services and blocking clients, and can be tested on byte slices.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest frame body accepted, in bytes.
pub const MAX_FRAME: usize = 1 << 20;

/// Encodes a message as a frame: `u32` little-endian length, then JSON.
pub fn encode_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("service messages always serialize");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes one frame from the front of `buf`: `Ok(None)` if incomplete, otherwise the message
/// and the number of bytes it used.
pub fn decode_frame<T: for<'de> Deserialize<'de>>(buf: &[u8]) -> Result<Option<(T, usize)>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
    if len > MAX_FRAME {
        return Err(Error::Protocol(format!("frame of {len} bytes exceeds the {MAX_FRAME}-byte limit")));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    let msg =
        serde_json::from_slice(&buf[4..4 + len]).map_err(|e| Error::Protocol(format!("malformed message: {e}")))?;
    Ok(Some((msg, 4 + len)))
}

//! Length-prefixed frames: a `u32` little-endian length, then that many bytes of JSON.
//!
//! The decoder reports "incomplete" (`Ok(None)`) instead of blocking, so it serves both the
//! async services and blocking clients, and can be tested on byte slices.

use serde::{Deserialize, Serialize};

use warren_base::error::{Error, Result};

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
    decode_frame_within(buf, MAX_FRAME)
}

/// [`decode_frame`] with a limit of `max` body bytes instead of [`MAX_FRAME`] (services that
/// carry model parameters, like the parameter server, accept larger frames).
pub fn decode_frame_within<T: for<'de> Deserialize<'de>>(buf: &[u8], max: usize) -> Result<Option<(T, usize)>> {
    let Some(used) = frame_len_within(buf, max)? else { return Ok(None) };
    let msg = serde_json::from_slice(&buf[4..used]).map_err(|e| Error::Protocol(format!("malformed message: {e}")))?;
    Ok(Some((msg, used)))
}

/// The length (prefix included) of the frame at the front of `buf` once it has arrived
/// whole, `Ok(None)` before; a body over `max` bytes is an [`Error::Protocol`] as soon as its
/// length is read. For services whose bodies are not JSON (the parameter server's binary
/// frames), which take the frame's bytes as they are.
pub fn frame_len_within(buf: &[u8], max: usize) -> Result<Option<usize>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
    if len > max {
        return Err(Error::Protocol(format!("frame of {len} bytes exceeds the {max}-byte limit")));
    }
    Ok((buf.len() >= 4 + len).then_some(4 + len))
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Msg {
        op: String,
        n: u64,
    }

    fn msg() -> Msg {
        Msg { op: "get".into(), n: 7 }
    }

    #[test]
    fn a_frame_is_a_little_endian_length_then_json() {
        let f = encode_frame(&msg());
        let body = br#"{"op":"get","n":7}"#;
        assert_eq!(&f[..4], (body.len() as u32).to_le_bytes());
        assert_eq!(&f[4..], body);
    }

    #[test]
    fn every_cut_of_a_frame_is_incomplete_and_the_whole_is_exact() {
        let f = encode_frame(&msg());
        for cut in 0..f.len() {
            assert!(decode_frame::<Msg>(&f[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        assert_eq!(decode_frame::<Msg>(&f).unwrap(), Some((msg(), f.len())));
    }

    #[test]
    fn back_to_back_frames_decode_one_at_a_time() {
        let mut buf = encode_frame(&msg());
        let first = buf.len();
        buf.extend(encode_frame(&Msg { op: "put".into(), n: 8 }));
        buf.extend_from_slice(&[9, 0]); // the start of a third
        let (a, used) = decode_frame::<Msg>(&buf).unwrap().unwrap();
        assert_eq!((a, used), (msg(), first));
        let (b, used2) = decode_frame::<Msg>(&buf[used..]).unwrap().unwrap();
        assert_eq!(b.op, "put");
        assert!(decode_frame::<Msg>(&buf[used + used2..]).unwrap().is_none());
    }

    #[test]
    fn an_oversized_length_is_refused_before_its_body_arrives() {
        let at_limit = (MAX_FRAME as u32).to_le_bytes();
        assert!(decode_frame::<Msg>(&at_limit).unwrap().is_none(), "the limit itself is allowed");
        let over = (MAX_FRAME as u32 + 1).to_le_bytes();
        let e = decode_frame::<Msg>(&over).unwrap_err();
        assert!(matches!(&e, Error::Protocol(m) if m.contains("exceeds")), "{e}");
        let e = decode_frame::<Msg>(&u32::MAX.to_le_bytes()).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)));
        let big = encode_frame(&"x".repeat(MAX_FRAME));
        assert!(decode_frame::<String>(&big).is_err(), "over the default limit");
        let (s, used) = decode_frame_within::<String>(&big, 2 * MAX_FRAME).unwrap().unwrap();
        assert_eq!((s.len(), used), (MAX_FRAME, big.len()), "within a larger limit");
    }

    #[test]
    fn a_raw_frame_length_is_known_once_it_has_arrived_whole() {
        let mut inbox = encode_frame(&msg());
        let first = inbox.len();
        assert_eq!(frame_len_within(&inbox[..first - 1], MAX_FRAME).unwrap(), None);
        inbox.extend_from_slice(&[9, 0]);
        assert_eq!(frame_len_within(&inbox, MAX_FRAME).unwrap(), Some(first));
        assert!(frame_len_within(&u32::MAX.to_le_bytes(), MAX_FRAME).is_err());
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let mut not_json = 5u32.to_le_bytes().to_vec();
        not_json.extend_from_slice(b"hello");
        let wrong_shape = encode_frame(&serde_json::json!({"op": 3}));
        let mut http = b"GET / HTTP/1.1\r\n".to_vec();
        http.resize(64, b' ');
        for bad in [not_json, wrong_shape] {
            let e = decode_frame::<Msg>(&bad).unwrap_err();
            assert!(matches!(&e, Error::Protocol(m) if m.contains("malformed")), "{e}");
        }
        // "GET " read as a length is far over the limit.
        assert!(matches!(decode_frame::<Msg>(&http), Err(Error::Protocol(_))));
    }
}

//! The parameter server's binary encoding: a message (or a checkpoint) is a small JSON
//! *header* and a binary *tail* holding its bulk arrays (`f32` values, `u64` keys) as
//! little-endian bytes, so that a 64 MiB model crosses the wire as 64 MiB, copied, not
//! printed and parsed.
//!
//! Frame: `u32` little-endian body length (the [`wire`](warren_wire) framing), then the body:
//! `u32` tail length, the tail, the header. In the header each bulk array is `[offset,
//! count]` into the tail (order-independent, so serde's buffering of tagged enums is fine).
//! Fields opt in with `#[serde(with = "floats")]` (`f32`) or `#[serde(with = "floats::u64s")]`.
//! A `u64` array whose elements all fit in 32 bits may instead be written as `u32`s and
//! `[offset, count, 4]` ([`encode_narrow_frame_into`], for the servers' log, where keys are
//! about half of a bagged push's bytes); reading takes either form.
//! Outside [`encode_frame`] / [`decode_body`] (plain `serde_json`, e.g. a status dump) an
//! array is written as the hex string of its little-endian bytes, as in format 1, which is
//! still read.

use std::cell::{Cell, RefCell};

use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

use warren_base::error::Error;
use warren_wire::pool;

/// Bytes before the tail in an encoded frame: the frame length and the tail length.
const PREFIX: usize = 8;

/// Where the arrays of the frame being encoded on this thread go.
enum Out {
    /// Only their length is counted (the tail is written by the caller, or on a second pass).
    Count(usize),
    /// Appended to the frame.
    Write(Vec<u8>),
}

thread_local! {
    /// The frame being encoded on this thread.
    static OUT: RefCell<Option<Out>> = const { RefCell::new(None) };
    /// The frame being decoded on this thread.
    static IN: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
    /// Whether the frame being encoded on this thread writes `u64` arrays that fit in 32
    /// bits as `u32`s.
    static NARROW: Cell<bool> = const { Cell::new(false) };
}

/// Serializes `msg` with its arrays going to `out`: returns the JSON header and what `out`
/// became.
fn serialize_with<T: Serialize>(msg: &T, out: Out) -> (Vec<u8>, Out) {
    OUT.with(|o| *o.borrow_mut() = Some(out));
    let header = serde_json::to_vec(msg);
    let out = OUT.with(|o| o.borrow_mut().take()).expect("set above");
    (header.expect("parameter-server messages always serialize"), out)
}

/// The frame's first bytes: body length, tail length.
fn prefix(tail: usize, header: usize) -> [u8; PREFIX] {
    let mut p = [0u8; PREFIX];
    p[..4].copy_from_slice(&((PREFIX - 4 + tail + header) as u32).to_le_bytes());
    p[4..].copy_from_slice(&(tail as u32).to_le_bytes());
    p
}

/// Encodes `msg` as one frame: length, tail length, tail, JSON header, in a buffer of the
/// exact size taken from the [pool](warren_wire::pool) (a first pass counts the tail).
pub fn encode_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    let (header, Out::Count(tail)) = serialize_with(msg, Out::Count(0)) else { unreachable!("counted") };
    let mut out = pool::BYTES.take(PREFIX + tail + header.len());
    out.extend_from_slice(&prefix(tail, header.len()));
    let (_, Out::Write(mut out)) = serialize_with(msg, Out::Write(out)) else { unreachable!("written") };
    debug_assert_eq!(out.len(), PREFIX + tail);
    out.extend_from_slice(&header);
    out
}

/// [`encode_frame`] appended to `out` (one copy of the arrays, straight into `out`).
pub fn encode_frame_into<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let (header, Out::Count(tail)) = serialize_with(msg, Out::Count(0)) else { unreachable!("counted") };
    out.reserve(PREFIX + tail + header.len());
    out.extend_from_slice(&prefix(tail, header.len()));
    let (_, Out::Write(written)) = serialize_with(msg, Out::Write(std::mem::take(out))) else {
        unreachable!("written")
    };
    *out = written;
    out.extend_from_slice(&header);
}

/// [`encode_frame_into`], with every `u64` array whose elements all fit in 32 bits written
/// as `u32`s (`[offset, count, 4]` in the header): half the bytes for the keys of a table of
/// up to 2^32 rows. Builds before this form cannot read such a frame; only the servers'
/// store, whose format name says so, holds them.
pub fn encode_narrow_frame_into<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    narrow(|| encode_frame_into(msg, out))
}

/// [`encode_frame`] with `u64` arrays narrowed as [`encode_narrow_frame_into`] does.
pub fn encode_narrow_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    narrow(|| encode_frame(msg))
}

/// Runs `encode` with `u64` arrays narrowed where they fit; the flag is cleared however
/// `encode` ends (a panic too), so that no later frame of this thread is narrowed.
fn narrow<R>(encode: impl FnOnce() -> R) -> R {
    struct Wide;
    impl Drop for Wide {
        fn drop(&mut self) {
            NARROW.with(|n| n.set(false));
        }
    }
    NARROW.with(|n| n.set(true));
    let _wide = Wide;
    encode()
}

/// The parts of `msg`'s frame but its tail: the prefix (length, tail length) and the JSON
/// header. The frame is the prefix, then every array of `msg` as little-endian bytes in the
/// order serde visits them, then the header; the caller writes it from these parts and its
/// own arrays (see `proto::push_parts`), with no copy into one buffer.
pub fn encode_head<T: Serialize>(msg: &T) -> ([u8; PREFIX], Vec<u8>) {
    let (header, Out::Count(tail)) = serialize_with(msg, Out::Count(0)) else { unreachable!("counted") };
    (prefix(tail, header.len()), header)
}

/// Decodes a whole frame (its length included) as written by [`encode_frame`]; anything
/// malformed is an [`Error::Protocol`]. The arrays are copied once, out of `frame`, into
/// buffers of the [pool](warren_wire::pool); `frame` is left as it was (to be reused).
pub fn decode_frame<T: DeserializeOwned>(frame: &mut Vec<u8>) -> warren_base::error::Result<T> {
    let bad = |why: String| Error::Protocol(format!("malformed message: {why}"));
    if frame.len() < PREFIX {
        return Err(bad(format!("{} bytes, no tail length", frame.len())));
    }
    let tail = u32::from_le_bytes(frame[4..8].try_into().expect("4 bytes")) as usize;
    if tail > frame.len() - PREFIX {
        return Err(bad(format!("a tail of {tail} bytes in a frame of {}", frame.len())));
    }
    let header = frame[PREFIX + tail..].to_vec();
    IN.with(|i| *i.borrow_mut() = Some(std::mem::take(frame)));
    let msg = serde_json::from_slice(&header).map_err(|e| bad(e.to_string()));
    *frame = IN.with(|i| i.borrow_mut().take()).expect("set above");
    msg
}

/// [`decode_frame`] of a frame's body (after its length).
#[cfg(test)]
fn decode_body<T: DeserializeOwned>(body: &[u8]) -> warren_base::error::Result<T> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(body);
    decode_frame(&mut frame)
}

/// Writes `bytes` (`n` elements) to the tail of the frame being encoded, or, outside one,
/// as a hex string.
fn put<S: Serializer>(s: S, n: usize, size: usize, write: impl Fn(&mut Vec<u8>)) -> Result<S::Ok, S::Error> {
    match tail_at(n, size, &write) {
        Some(at) => (at as u64, n as u64).serialize(s),
        None => s.serialize_str(&hex_of(write)),
    }
}

/// The hex string of what `write` writes.
fn hex_of(write: impl Fn(&mut Vec<u8>)) -> String {
    let mut bytes = Vec::new();
    write(&mut bytes);
    hex::encode(bytes)
}

/// Writes `n` elements of `size` bytes to the tail of the frame being encoded (or counts
/// them): where they start in the tail, or `None` outside a frame.
fn tail_at(n: usize, size: usize, write: impl Fn(&mut Vec<u8>)) -> Option<usize> {
    OUT.with(|o| {
        o.borrow_mut().as_mut().map(|out| match out {
            Out::Count(len) => {
                let at = *len;
                *len += n * size;
                at
            }
            Out::Write(out) => {
                let at = out.len() - PREFIX;
                write(out);
                at
            }
        })
    })
}

/// Reads `[offset, count]` into the tail, or a hex string, as a `Vec` of `T`: `size`-byte
/// little-endian elements converted by `conv`; or `[offset, count, 4]`, 4-byte elements
/// converted by `narrow` (an array that takes that form).
struct Array<T> {
    size: usize,
    conv: Conv<T>,
    narrow: Option<Conv<T>>,
}

/// Converts an array's little-endian bytes to its elements.
type Conv<T> = fn(&[u8]) -> Vec<T>;

impl<'de, T> Visitor<'de> for Array<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "[offset, count] into the tail, or a hex string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<T>, E> {
        let bytes = hex::decode(v.as_bytes()).map_err(E::custom)?;
        if bytes.len() % self.size != 0 {
            return Err(E::custom(format!(
                "{} bytes are not a whole number of {}-byte elements",
                bytes.len(),
                self.size
            )));
        }
        Ok((self.conv)(&bytes))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let at: u64 = seq.next_element()?.ok_or_else(|| de::Error::custom("no offset"))?;
        let n: u64 = seq.next_element()?.ok_or_else(|| de::Error::custom("no count"))?;
        let (size, conv) = match seq.next_element::<u64>()? {
            None => (self.size, self.conv),
            Some(4) if self.narrow.is_some() => (4, self.narrow.expect("checked")),
            Some(w) => return Err(de::Error::custom(format!("elements of {w} bytes in an array of {}", self.size))),
        };
        let range = usize::try_from(at)
            .ok()
            .zip(usize::try_from(n).ok().and_then(|n| n.checked_mul(size)))
            .and_then(|(a, len)| Some(a.checked_add(PREFIX)?..a.checked_add(PREFIX)?.checked_add(len)?));
        IN.with(|i| {
            let frame = i.borrow();
            let Some(frame) = frame.as_ref() else {
                return Err(de::Error::custom("an array in a tail, outside a binary frame"));
            };
            let tail_end = PREFIX + u32::from_le_bytes(frame[4..8].try_into().expect("checked")) as usize;
            match range {
                Some(r) if r.end <= tail_end => Ok(conv(&frame[r])),
                _ => Err(de::Error::custom(format!(
                    "{n} elements at {at} overrun a tail of {} bytes",
                    tail_end - PREFIX
                ))),
            }
        })
    }
}

/// Little-endian bytes to `f32`s, by one copy (into a buffer of the pool).
fn f32s(b: &[u8]) -> Vec<f32> {
    let mut v = pool::FLOATS.take(b.len() / 4);
    match bytemuck::try_cast_slice::<u8, f32>(b) {
        Ok(aligned) if cfg!(target_endian = "little") => v.extend_from_slice(aligned),
        _ => v.extend(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))),
    }
    v
}

/// Little-endian bytes to `u64`s, by one copy.
fn u64s_of(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// Little-endian `u32` bytes to `u64`s.
fn u64s_of_u32s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(4).map(|c| u64::from(u32::from_le_bytes(c.try_into().expect("4 bytes")))).collect()
}

/// Appends `v` as little-endian bytes (one copy on a little-endian machine).
fn put_le<T: bytemuck::Pod>(out: &mut Vec<u8>, v: &[T], le: impl Fn(&T) -> T) {
    if cfg!(target_endian = "little") {
        out.extend_from_slice(bytemuck::cast_slice(v));
    } else {
        for x in v {
            out.extend_from_slice(bytemuck::bytes_of(&le(x)));
        }
    }
}

/// Appends `v` to a frame's tail as little-endian bytes (one copy on a little-endian machine).
pub(crate) fn put_f32s(out: &mut Vec<u8>, v: &[f32]) {
    put_le(out, v, |x| f32::from_bits(x.to_bits().to_le()))
}

/// Where the values of a [`Reply::Floats`](super::proto::Reply::Floats) frame lie in it (a
/// whole frame, length included), to read them from the frame with no decoding copy (see
/// `proto::ReceivedFloats`); `None` for any other frame, or a malformed one (which
/// [`decode_frame`] then explains).
pub(crate) fn floats_reply_values(frame: &[u8]) -> Option<std::ops::Range<usize>> {
    /// The header of a floats reply, as `proto::floats_frame_by` writes it.
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        reply: &'a str,
        values: (u64, u64),
    }
    let tail = u32::from_le_bytes(frame.get(4..PREFIX)?.try_into().ok()?) as usize;
    let header = frame.get(PREFIX.checked_add(tail)?..)?;
    // The tag comes first (serde writes it first): other replies are not parsed twice.
    if !header.starts_with(br#"{"reply":"floats""#) {
        return None;
    }
    let head: Head<'_> = serde_json::from_slice(header).ok()?;
    let (at, n) = (usize::try_from(head.values.0).ok()?, usize::try_from(head.values.1).ok()?);
    let start = PREFIX.checked_add(at)?;
    let end = start.checked_add(n.checked_mul(4)?)?;
    (head.reply == "floats" && end <= PREFIX + tail).then_some(start..end)
}

/// Copies little-endian `f32` bytes into `out` (of `bytes.len() / 4` values): one copy.
pub(crate) fn copy_f32s(bytes: &[u8], out: &mut [f32]) {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice_mut::<f32, u8>(out).copy_from_slice(bytes);
    } else {
        for (x, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
    }
}

/// Writes `v` (see the module documentation).
pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
    put(s, v.len(), 4, |out| put_f32s(out, v))
}

/// An `f32` array given by its length only, for [`encode_head`]: the caller writes the
/// values into the tail itself (see `proto::floats_frame_by`).
pub(crate) mod counted {
    use super::*;

    /// Counts `n` `f32`s in the tail; writing them is the caller's (outside
    /// [`encode_head`] this writes nothing, so a frame would lack them: not for other use).
    pub fn serialize<S: Serializer>(n: &usize, s: S) -> Result<S::Ok, S::Error> {
        put(s, *n, 4, |_| {})
    }
}

/// Reads what [`serialize`] wrote.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    d.deserialize_any(Array { size: 4, conv: f32s, narrow: None })
}

/// `u64` arrays (sparse keys), the same way.
pub mod u64s {
    use super::*;

    /// Writes `v` (see the module documentation): as `u32`s within
    /// [`encode_narrow_frame_into`] if every element fits.
    pub fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        if NARROW.with(Cell::get) && v.iter().all(|x| *x <= u64::from(u32::MAX)) {
            let write = |out: &mut Vec<u8>| {
                let start = out.len();
                out.resize(start + 4 * v.len(), 0);
                for (b, x) in out[start..].chunks_exact_mut(4).zip(v) {
                    b.copy_from_slice(&(*x as u32).to_le_bytes());
                }
            };
            if let Some(at) = tail_at(v.len(), 4, write) {
                return (at as u64, v.len() as u64, 4u64).serialize(s);
            }
        }
        put(s, v.len(), 8, |out| put_le(out, v, |x| x.to_le()))
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        d.deserialize_any(Array { size: 8, conv: u64s_of, narrow: Some(u64s_of_u32s) })
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind")]
    enum M {
        A {
            #[serde(with = "super")]
            v: Vec<f32>,
            #[serde(with = "super::u64s")]
            k: Vec<u64>,
            #[serde(with = "super")]
            w: Vec<f32>,
        },
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn arrays_cross_as_little_endian_bytes_bit_for_bit() {
        let v = vec![0.1, -0.0, f32::MIN_POSITIVE, f32::MAX, 1e-45, f32::NAN];
        let m = M::A { v: v.clone(), k: vec![u64::MAX, 3], w: vec![] };
        let frame = encode_frame(&m);
        let body = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(body, frame.len() - 4);
        assert_eq!(&frame[8..12], &0.1f32.to_le_bytes(), "the tail starts with v's bytes");
        assert_eq!(u32::from_le_bytes(frame[4..8].try_into().unwrap()), 6 * 4 + 2 * 8);
        let header = std::str::from_utf8(&frame[8 + 40..]).unwrap();
        assert_eq!(header, r#"{"kind":"A","v":[0,6],"k":[24,2],"w":[40,0]}"#);
        let M::A { v: back, k, w } = decode_frame::<M>(&mut frame.clone()).unwrap();
        let (head, header) = encode_head(&m);
        assert_eq!([&head[..], &frame[8..48], &header].concat(), frame, "the same frame in parts");
        assert_eq!((bits(&back), k, w), (bits(&v), vec![u64::MAX, 3], vec![]));
    }

    #[test]
    fn narrowed_u64_arrays_that_fit_in_32_bits_take_4_bytes_and_read_back() {
        let m = M::A { v: vec![0.5], k: vec![u32::MAX as u64, 0, 7], w: vec![] };
        let mut frame = Vec::new();
        encode_narrow_frame_into(&m, &mut frame);
        assert_eq!(u32::from_le_bytes(frame[4..8].try_into().unwrap()), 4 + 3 * 4);
        let header = std::str::from_utf8(&frame[8 + 16..]).unwrap();
        assert_eq!(header, r#"{"kind":"A","v":[0,1],"k":[4,3,4],"w":[16,0]}"#);
        assert_eq!(decode_frame::<M>(&mut frame.clone()).unwrap(), m);
        assert_eq!(encode_narrow_frame(&m), frame);
        // An array with a key beyond 32 bits stays as it is, and narrowing ends with the frame.
        let wide = M::A { v: vec![], k: vec![1, u32::MAX as u64 + 1], w: vec![] };
        let frame = encode_narrow_frame(&wide);
        assert_eq!(frame, encode_frame(&wide));
        assert_eq!(decode_frame::<M>(&mut frame.clone()).unwrap(), wide);
        assert_eq!(encode_frame(&m), {
            let mut plain = Vec::new();
            encode_frame_into(&m, &mut plain);
            plain
        });
        assert!(encode_frame(&m).len() > encode_narrow_frame(&m).len());
    }

    #[test]
    fn a_narrowed_encoding_that_panics_leaves_the_next_frames_wide() {
        let m = M::A { v: vec![], k: vec![7], w: vec![] };
        let wide = encode_frame(&m);
        let ended = std::panic::catch_unwind(|| narrow(|| panic!("an encoding that fails")));
        assert!(ended.is_err());
        assert_eq!(encode_frame(&m), wide, "a frame after the panic is not narrowed");
    }

    #[test]
    fn an_element_width_an_array_cannot_take_is_an_error() {
        let frame = encode_frame(&M::A { v: vec![1.0; 2], k: vec![], w: vec![] });
        let mut bad = frame[..16].to_vec();
        let body = (bad.len() - 4 + 44) as u32;
        bad[..4].copy_from_slice(&body.to_le_bytes());
        bad.extend_from_slice(br#"{"kind":"A","v":[0,2,2],"k":[8,0],"w":[8,0]}"#);
        assert_eq!(bad.len(), 16 + 44);
        assert!(matches!(decode_frame::<M>(&mut bad), Err(Error::Protocol(_))));
    }

    #[test]
    fn outside_a_frame_arrays_are_hex_as_in_format_1() {
        let m = M::A { v: vec![0.1], k: vec![1], w: vec![] };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"kind":"A","v":"cdcccc3d","k":"0100000000000000","w":""}"#);
        assert_eq!(serde_json::from_str::<M>(&json).unwrap(), m);
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let good = encode_frame(&M::A { v: vec![1.0; 4], k: vec![], w: vec![] });
        let mut overrun = good[4..].to_vec();
        overrun[..4].copy_from_slice(&8u32.to_le_bytes()); // tail shorter than the array
        let cases: [&[u8]; 4] =
            [b"", &[9, 0, 0, 0, 1], &overrun, b"\x00\x00\x00\x00{\"kind\":\"A\",\"v\":[0,1],\"k\":\"\",\"w\":\"\"}"];
        for bad in cases {
            let e = decode_body::<M>(bad).unwrap_err();
            assert!(matches!(e, Error::Protocol(_)), "{e}");
        }
        for bad in ["\"abc\"", "\"zz000000\"", "\"000000\"", "7"] {
            let json = format!(r#"{{"kind":"A","v":{bad},"k":"","w":""}}"#);
            assert!(serde_json::from_str::<M>(&json).is_err(), "{bad}");
        }
    }
}

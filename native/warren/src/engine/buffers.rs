//! The caller buffers a call runs on: what a robust call needs of them ([`sealed::CallBuf`])
//! and the two buffers a broadcast fills ([`BroadcastBuf`]).

use crate::collective::header::COUNT_UNKNOWN;
use crate::error::{Error, Result};

pub(super) mod sealed {
    use crate::error::Result;

    /// A caller's buffer as a robust call sees it: read the output, overwrite with served data.
    pub trait CallBuf {
        fn bytes(&self) -> &[u8];
        fn bytes_mut(&mut self) -> &mut [u8];
        fn set(&mut self, data: &[u8]);
    }

    /// What a broadcast needs of its buffer.
    pub trait Broadcast: CallBuf {
        /// The payload length this rank declares in the call header.
        fn declared_count(&self, is_root: bool) -> u64;
        /// Makes room for the root's `len` bytes and returns them to be filled.
        fn fit(&mut self, len: usize) -> Result<&mut [u8]>;
    }
}

use sealed::{Broadcast, CallBuf};

/// A buffer a broadcast fills: a `Vec<u8>`, resized to the root's length (only the root needs
/// to know it), or a `[u8]` of fixed length, which every rank must pass alike (a mismatch
/// error otherwise). Implemented for these two only.
pub trait BroadcastBuf: Broadcast {}

impl BroadcastBuf for [u8] {}
impl BroadcastBuf for Vec<u8> {}

impl CallBuf for [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn set(&mut self, data: &[u8]) {
        self.copy_from_slice(data);
    }
}

impl CallBuf for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn set(&mut self, data: &[u8]) {
        self.clear();
        self.extend_from_slice(data);
    }
}

/// The caller's side of a lent call ([`super::Lent`]): its input, read only, and the result
/// a restarted worker was served, if it was (a result computed is lent by the call itself).
pub(super) struct LentInput<'a> {
    pub input: &'a [u8],
    pub served: Option<Vec<u8>>,
}

impl CallBuf for LentInput<'_> {
    fn bytes(&self) -> &[u8] {
        self.input
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        unreachable!("a lent call runs out of place: its input is never written")
    }
    fn set(&mut self, data: &[u8]) {
        self.served = Some(data.to_vec());
    }
}

impl Broadcast for [u8] {
    fn declared_count(&self, _is_root: bool) -> u64 {
        self.len() as u64
    }
    fn fit(&mut self, len: usize) -> Result<&mut [u8]> {
        // The headers agreed on the length; a difference here is a protocol fault.
        if len == self.len() {
            Ok(self)
        } else {
            Err(Error::Protocol(format!("broadcast of {len} bytes into a buffer of {}", self.len())))
        }
    }
}

impl Broadcast for Vec<u8> {
    fn declared_count(&self, is_root: bool) -> u64 {
        if is_root { self.len() as u64 } else { COUNT_UNKNOWN }
    }
    fn fit(&mut self, len: usize) -> Result<&mut [u8]> {
        self.resize(len, 0);
        Ok(self)
    }
}

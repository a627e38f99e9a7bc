//! The bytes a connection has read and not yet taken as frames (pure: the I/O reads into
//! [`Inbox::space`]). A read lands straight in the inbox, in a piece as large as the frame
//! being read still lacks (its length prefix says how much), so a frame of many megabytes is
//! read with no staging copy and no reallocation, and is then handed out without a copy.

use super::frame::frame_len_within;
use warren_base::error::Result;

/// The smallest read: what is asked of the socket when no frame length is known yet, or the
/// frame being read lacks less.
const MIN_READ: usize = 64 << 10;

/// Bytes read and not yet taken: `buf[..filled]`; `buf[filled..]` is space to read into.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
    filled: usize,
    /// A large frame handed out and given back ([`Inbox::recycle`]), to read the next one
    /// into (all of it initialized).
    spare: Vec<u8>,
}

impl Inbox {
    /// The bytes read and not yet taken.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.filled]
    }

    /// Space to read into next: at least what the frame at the front still lacks (if its
    /// length is known and at most `max`), at least [`MIN_READ`] bytes. Say how much was
    /// read with [`filled`](Self::filled).
    pub fn space(&mut self, max: usize) -> &mut [u8] {
        let lacking = match self.bytes() {
            b if b.len() >= 4 => {
                let len = u32::from_le_bytes(b[..4].try_into().expect("4 bytes")) as usize;
                if len <= max { (4 + len).saturating_sub(self.filled) } else { 0 }
            }
            _ => 0,
        };
        let need = self.filled + lacking.max(MIN_READ);
        if self.buf.len() < need {
            // The spare buffer if it is large enough, else a new zeroed one (fresh pages from
            // the allocator, not a pass of memset over the old one); the bytes read so far
            // are moved over.
            let mut grown = if self.spare.len() >= need { std::mem::take(&mut self.spare) } else { vec![0u8; need] };
            grown[..self.filled].copy_from_slice(self.bytes());
            self.buf = grown;
        }
        &mut self.buf[self.filled..]
    }

    /// `n` bytes were read into the front of [`space`](Self::space).
    pub fn filled(&mut self, n: usize) {
        self.filled = (self.filled + n).min(self.buf.len());
    }

    /// Takes back a frame [`take_frame`](Self::take_frame) handed out, once it is read, to
    /// read a later one into it.
    pub fn recycle(&mut self, mut frame: Vec<u8>) {
        if frame.capacity() > self.spare.len() && frame.capacity() > 2 * MIN_READ {
            frame.resize(frame.capacity(), 0);
            self.spare = frame;
        }
    }

    /// Drops the first `n` bytes.
    pub fn consume(&mut self, n: usize) {
        self.buf.copy_within(n..self.filled, 0);
        self.filled -= n;
    }

    /// The next whole frame (length prefix included) if it has arrived; an
    /// [`Error::Protocol`](warren_base::error::Error::Protocol) for a body over `max` bytes. A frame
    /// filling most of the buffer is handed out as the buffer itself (no copy).
    pub fn take_frame(&mut self, max: usize) -> Result<Option<Vec<u8>>> {
        let Some(len) = frame_len_within(self.bytes(), max)? else { return Ok(None) };
        if 2 * len < self.buf.len() {
            let frame = self.buf[..len].to_vec();
            self.consume(len);
            return Ok(Some(frame));
        }
        let rest = self.filled - len;
        let mut next = vec![0u8; rest.max(MIN_READ)];
        next[..rest].copy_from_slice(&self.buf[len..self.filled]);
        let mut frame = std::mem::replace(&mut self.buf, next);
        frame.truncate(len);
        self.filled = rest;
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    /// Feeds `bytes` into `inbox` in reads of at most `piece` bytes, checking that each read
    /// is offered the space the protocol promises, and collects the frames taken.
    fn feed(inbox: &mut Inbox, bytes: &[u8], piece: usize, max: usize) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let space = inbox.space(max);
            assert!(space.len() >= MIN_READ);
            let n = space.len().min(piece).min(bytes.len() - at);
            space[..n].copy_from_slice(&bytes[at..at + n]);
            inbox.filled(n);
            at += n;
            while let Some(f) = inbox.take_frame(max).unwrap() {
                frames.push(f);
            }
        }
        frames
    }

    #[test]
    fn frames_come_out_whole_whatever_the_reads() {
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let want = [frame(b"a"), frame(&big), frame(b""), frame(b"tail"), frame(&big[..70_000])];
        let stream: Vec<u8> = want.concat();
        for piece in [1, 3, 4096, MIN_READ, 1 << 20] {
            let mut inbox = Inbox::default();
            assert_eq!(feed(&mut inbox, &stream, piece, 1 << 20), want, "reads of {piece}");
            assert!(inbox.bytes().is_empty());
        }
    }

    #[test]
    fn a_large_frame_is_read_into_space_sized_from_its_length() {
        let body = vec![7u8; 5 << 20];
        let f = frame(&body);
        let mut inbox = Inbox::default();
        let first = inbox.space(1 << 30);
        first[..4].copy_from_slice(&f[..4]);
        inbox.filled(4);
        assert_eq!(inbox.space(1 << 30).len(), f.len() - 4, "the rest of the frame in one read");
        inbox.space(1 << 30)[..f.len() - 4].copy_from_slice(&f[4..]);
        inbox.filled(f.len() - 4);
        let got = inbox.take_frame(1 << 30).unwrap().unwrap();
        assert_eq!(got, f);
        let at = got.as_ptr();
        inbox.recycle(got);
        inbox.space(1 << 30)[..4].copy_from_slice(&f[..4]);
        inbox.filled(4);
        inbox.space(1 << 30);
        assert_eq!(inbox.buf.as_ptr(), at, "the next large frame is read into the recycled buffer");
    }

    #[test]
    fn an_oversized_length_is_an_error_and_does_not_grow_the_buffer() {
        let mut inbox = Inbox::default();
        inbox.space(10)[..4].copy_from_slice(&11u32.to_le_bytes());
        inbox.filled(4);
        assert_eq!(inbox.space(10).len(), MIN_READ, "no space beyond the smallest read");
        assert!(inbox.take_frame(10).is_err());
    }
}

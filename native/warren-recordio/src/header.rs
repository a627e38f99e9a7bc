//! The 20-byte chunk header and the compressor codes.
//!
//! Layout (all fields `u32`, little-endian), as written by PaddlePaddle's Go `recordio`:
//!
//! | bytes  | field                                              |
//! |--------|----------------------------------------------------|
//! | 0..4   | magic `0x01020304`                                 |
//! | 4..8   | CRC-32 (IEEE) of the compressed payload            |
//! | 8..12  | compressor: 0 none, 1 Snappy (framed), 2 Gzip      |
//! | 12..16 | size of the compressed payload in bytes            |
//! | 16..20 | number of records in the chunk                     |

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Magic number at the start of every chunk header.
pub const MAGIC: u32 = 0x0102_0304;

/// Size of an encoded [`ChunkHeader`] in bytes.
pub const HEADER_LEN: usize = 20;

/// How a chunk's payload is compressed. The discriminants are the codes stored in the header.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compressor {
    /// Stored as is.
    None = 0,
    /// Snappy *framing format* (stream identifier + framed blocks with masked CRC-32C), as
    /// written by Go's `snappy.NewBufferedWriter`; not the raw block format. The default, as
    /// in PaddlePaddle's writer.
    #[default]
    Snappy = 1,
    /// Gzip (RFC 1952), as written by Go's `compress/gzip`.
    Gzip = 2,
}

impl Compressor {
    /// The code stored in the chunk header.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The compressor for a header code, or `None` for an unknown code.
    pub fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Compressor::None),
            1 => Some(Compressor::Snappy),
            2 => Some(Compressor::Gzip),
            _ => None,
        }
    }

    /// Lower-case name: `none`, `snappy` or `gzip`.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::None => "none",
            Compressor::Snappy => "snappy",
            Compressor::Gzip => "gzip",
        }
    }
}

impl fmt::Display for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compressor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compressor::None),
            "snappy" => Ok(Compressor::Snappy),
            "gzip" => Ok(Compressor::Gzip),
            other => Err(format!("unknown compressor {other:?} (expected none, snappy or gzip)")),
        }
    }
}

/// The decoded fields of a chunk header (the magic is implied).
///
/// `compressor` is kept as the raw code so that a header with an unknown code can still be
/// listed by an index; [`ChunkHeader::compressor`] interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkHeader {
    /// CRC-32 (IEEE) of the compressed payload.
    pub checksum: u32,
    /// Compressor code (see [`Compressor`]).
    pub compressor_code: u32,
    /// Size in bytes of the compressed payload that follows the header.
    pub payload_len: u32,
    /// Number of records in the chunk.
    pub num_records: u32,
}

/// Why 20 bytes are not a chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadMagic(pub u32);

impl ChunkHeader {
    /// Encodes the header into its 20-byte form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut buf = [0u8; HEADER_LEN];
        let fields = [MAGIC, self.checksum, self.compressor_code, self.payload_len, self.num_records];
        for (slot, v) in buf.chunks_exact_mut(4).zip(fields) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
        buf
    }

    /// Decodes a 20-byte header, checking only the magic number.
    pub fn decode(buf: &[u8; HEADER_LEN]) -> Result<Self, BadMagic> {
        let field = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let magic = field(0);
        if magic != MAGIC {
            return Err(BadMagic(magic));
        }
        Ok(ChunkHeader {
            checksum: field(4),
            compressor_code: field(8),
            payload_len: field(12),
            num_records: field(16),
        })
    }

    /// The compressor, or `None` if the code is unknown.
    pub fn compressor(&self) -> Option<Compressor> {
        Compressor::from_code(self.compressor_code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_is_five_little_endian_u32() {
        let h = ChunkHeader { checksum: 0xdead_beef, compressor_code: 2, payload_len: 0x0001_0203, num_records: 7 };
        let b = h.encode();
        assert_eq!(
            b,
            [
                0x04, 0x03, 0x02, 0x01, // magic
                0xef, 0xbe, 0xad, 0xde, // checksum
                0x02, 0x00, 0x00, 0x00, // compressor
                0x03, 0x02, 0x01, 0x00, // payload size
                0x07, 0x00, 0x00, 0x00, // records
            ]
        );
        assert_eq!(ChunkHeader::decode(&b), Ok(h));
    }

    #[test]
    fn decode_rejects_bad_magic() {
        let mut b = ChunkHeader { checksum: 1, compressor_code: 0, payload_len: 4, num_records: 1 }.encode();
        b[0] = 0x05;
        assert_eq!(ChunkHeader::decode(&b), Err(BadMagic(0x0102_0305)));
    }

    #[test]
    fn unknown_compressor_code_is_kept() {
        let h = ChunkHeader { checksum: 0, compressor_code: 9, payload_len: 0, num_records: 0 };
        let d = ChunkHeader::decode(&h.encode()).unwrap();
        assert_eq!(d.compressor_code, 9);
        assert_eq!(d.compressor(), None);
    }

    #[test]
    fn compressor_codes_and_names() {
        for c in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
            assert_eq!(Compressor::from_code(c.code()), Some(c));
            assert_eq!(c.name().parse::<Compressor>(), Ok(c));
        }
        assert_eq!(Compressor::None.code(), 0);
        assert_eq!(Compressor::Snappy.code(), 1);
        assert_eq!(Compressor::Gzip.code(), 2);
        assert_eq!(Compressor::default(), Compressor::Snappy);
        assert!("lz4".parse::<Compressor>().is_err());
    }
}

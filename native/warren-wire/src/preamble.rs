//! The connection preamble: the 8 bytes `MAGIC, VERSION` both ends of every Warren connection
//! send first, so that a stray client, another protocol or another version is refused before
//! anything else is read.

use warren_base::error::{Error, Result};

/// First four bytes of every Warren connection ("WRN1" little-endian).
pub const MAGIC: u32 = 0x314E_5257;
/// Protocol version; both ends must agree. Bumped whenever a message changes shape or
/// meaning (2: the tracker's assignment carries a membership view, recovery proposals carry
/// the call header; 3: a finished worker waits for the tracker's word that every worker has;
/// 4: an assignment's addresses as a table of host strings and rows of numbers).
pub const VERSION: u32 = 4;
/// Byte length of the preamble.
pub const PREAMBLE_LEN: usize = 8;
/// Set in the preamble's version by an end that speaks TLS ([`super::tls`]): TLS begins once
/// both ends have sent it; an end that sees the other's flag differ from its own refuses the
/// connection, naming the mismatch.
pub const TLS_FLAG: u32 = 0x8000_0000;

/// The 8-byte preamble `MAGIC, VERSION` both ends send first.
pub fn preamble() -> [u8; PREAMBLE_LEN] {
    preamble_with(false)
}

/// The preamble, with [`TLS_FLAG`] set if `tls`.
pub fn preamble_with(tls: bool) -> [u8; PREAMBLE_LEN] {
    let mut b = [0u8; PREAMBLE_LEN];
    b[..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..].copy_from_slice(&(VERSION | if tls { TLS_FLAG } else { 0 }).to_le_bytes());
    b
}

/// Whether `b` is a Warren preamble, of this version or another: the other end is a Warren
/// build, which a server tells its own version (its challenge) before refusing it, so that
/// the other build reports the mismatch too instead of a connection closed on it.
pub fn is_warren(b: &[u8; PREAMBLE_LEN]) -> bool {
    b[..4] == MAGIC.to_le_bytes()
}

/// Checks a received preamble of a plain connection; `who` names the other end for the error.
pub fn check_preamble(b: &[u8; PREAMBLE_LEN], who: &str) -> Result<()> {
    check_mode(b, who, false)
}

/// Checks a received preamble on an end where TLS is `tls` (on or off): a Warren endpoint of
/// this version, with TLS alike. `who` names the other end for the error.
pub fn check_mode(b: &[u8; PREAMBLE_LEN], who: &str, tls: bool) -> Result<()> {
    let magic = u32::from_le_bytes(b[..4].try_into().unwrap());
    let raw = u32::from_le_bytes(b[4..].try_into().unwrap());
    let (version, theirs) = (raw & !TLS_FLAG, raw & TLS_FLAG != 0);
    if magic != MAGIC {
        return Err(Error::Protocol(format!("{who} is not a Warren endpoint (bad magic {magic:#010x})")));
    }
    if version != VERSION {
        return Err(Error::Protocol(format!("{who} speaks protocol version {version}, this build speaks {VERSION}")));
    }
    match (theirs, tls) {
        (true, false) => Err(Error::Protocol(format!(
            "TLS mismatch: {who} uses TLS (WARREN_TLS=1 there) but TLS is off here; set WARREN_TLS alike on every process of the job"
        ))),
        (false, true) => Err(Error::Protocol(format!(
            "TLS mismatch: {who} does not use TLS (WARREN_TLS is off there) but TLS is on here (WARREN_TLS=1); set WARREN_TLS alike on every process of the job"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preamble_is_magic_then_version_little_endian() {
        assert_eq!(&preamble(), b"WRN1\x04\0\0\0");
        assert!(check_preamble(&preamble(), "x").is_ok());
    }

    #[test]
    fn a_wrong_magic_names_the_other_end() {
        let mut p = preamble();
        p[0] ^= 1;
        let e = check_preamble(&p, "tracker t:1").unwrap_err();
        assert!(matches!(&e, Error::Protocol(m) if m.contains("tracker t:1") && m.contains("not a Warren")), "{e}");
        let http: [u8; PREAMBLE_LEN] = *b"GET / HT";
        assert!(check_preamble(&http, "x").is_err());
    }

    #[test]
    fn another_version_is_still_warren_a_stranger_is_not() {
        let mut q = preamble();
        q[4] = 4;
        assert!(is_warren(&q) && is_warren(&preamble()));
        assert!(!is_warren(b"GET / HT"));
    }

    #[test]
    fn a_wrong_version_says_both_versions() {
        let mut q = preamble();
        q[4] = 9;
        let e = check_preamble(&q, "x").unwrap_err();
        assert!(
            matches!(&e, Error::Protocol(m) if m.contains("version 9") && m.contains(&format!("speaks {VERSION}"))),
            "{e}"
        );
    }

    #[test]
    fn a_tls_mismatch_is_named_from_either_side() {
        assert_eq!(&preamble_with(true), b"WRN1\x04\0\0\x80");
        assert!(check_mode(&preamble_with(true), "x", true).is_ok());
        let e = check_preamble(&preamble_with(true), "client c:1").unwrap_err();
        assert!(
            e.to_string().contains("TLS mismatch: client c:1 uses TLS (WARREN_TLS=1 there) but TLS is off here"),
            "{e}"
        );
        let e = check_mode(&preamble(), "tracker t:1", true).unwrap_err();
        assert!(e.to_string().contains("TLS mismatch: tracker t:1 does not use TLS"), "{e}");
        let mut old = preamble_with(true);
        old[4] = 1;
        let e = check_mode(&old, "x", true).unwrap_err();
        assert!(e.to_string().contains("version 1"), "the version is checked first: {e}");
    }
}

//! The challenge-response handshake that opens every Warren connection: the client proves it
//! holds the job secret without sending it, and both ends check they speak this protocol.
//!
//! ```text
//! Client                                   Server
//!   hello: preamble [, rank]      ──────▶            (the rank only on a peer link)
//!                                 ◀──────   challenge: preamble, nonce
//!   answer: HMAC(secret, purpose, nonce) ──▶
//!                                 ◀──────   verdict: 1 (accepted) / 0 (refused, then closed)
//! ```
//!
//! The pieces ([`hello`], [`Challenge`], [`answer`], [`check_verdict`]) are pure and tested on
//! byte slices; [`client_handshake`] runs the client's side over a blocking socket. The
//! servers' sides are [`super::accept_authenticated`] (tokio services) and the peer
//! listener in [`crate::transport`].

use std::net::TcpStream;
use std::time::Instant;

use super::auth::{self, PROOF_LEN, Purpose};
use super::deadline::{read_exact_by, write_all_by};
use super::preamble::{PREAMBLE_LEN, check_preamble, preamble};
use crate::error::{Error, Result};

/// Byte length of a challenge: the preamble, then the nonce.
pub const CHALLENGE_LEN: usize = PREAMBLE_LEN + PROOF_LEN;
/// Verdict byte of an accepted answer.
pub const ACCEPTED: u8 = 1;
/// Verdict byte of a refused answer.
pub const REFUSED: u8 = 0;

/// What a client sends first: the preamble, followed on a peer link by the connecting rank
/// (`u32` little-endian), which the proof also binds.
pub fn hello(purpose: Purpose) -> Vec<u8> {
    let mut b = preamble().to_vec();
    if let Purpose::Peer(rank) = purpose {
        b.extend_from_slice(&rank.to_le_bytes());
    }
    b
}

/// The server's side of one handshake: a fresh nonce, and the answer it takes to be accepted.
#[derive(Debug)]
pub struct Challenge {
    nonce: [u8; PROOF_LEN],
}

impl Challenge {
    /// A challenge with a fresh random nonce.
    #[allow(clippy::new_without_default)] // a default challenge would hide that it is random
    pub fn new() -> Challenge {
        Challenge { nonce: auth::nonce() }
    }

    /// The bytes sent to the client: the preamble, then the nonce.
    pub fn bytes(&self) -> [u8; CHALLENGE_LEN] {
        let mut b = [0u8; CHALLENGE_LEN];
        b[..PREAMBLE_LEN].copy_from_slice(&preamble());
        b[PREAMBLE_LEN..].copy_from_slice(&self.nonce);
        b
    }

    /// Whether `answer` proves the client holds `secret` for `purpose` (in constant time; an
    /// answer of the wrong length is refused).
    pub fn accepts(&self, secret: &[u8], purpose: Purpose, answer: &[u8]) -> bool {
        auth::verify(secret, purpose, &self.nonce, answer)
    }
}

/// The client's answer to a server's `challenge`: checks the server's preamble (`who` names
/// the server in the error), then proves `secret` for `purpose`.
pub fn answer(challenge: &[u8], secret: &[u8], purpose: Purpose, who: &str) -> Result<[u8; PROOF_LEN]> {
    if challenge.len() != CHALLENGE_LEN {
        return Err(Error::Protocol(format!(
            "{who} sent a challenge of {} bytes instead of {CHALLENGE_LEN}",
            challenge.len()
        )));
    }
    check_preamble(challenge[..PREAMBLE_LEN].try_into().expect("PREAMBLE_LEN bytes"), who)?;
    Ok(auth::prove(secret, purpose, &challenge[PREAMBLE_LEN..]))
}

/// Checks the server's verdict on our answer: a refusal is [`Error::Auth`] naming `who`.
pub fn check_verdict(verdict: u8, purpose: Purpose, who: &str) -> Result<()> {
    if verdict == ACCEPTED {
        return Ok(());
    }
    Err(Error::Auth(match purpose {
        Purpose::Peer(rank) => format!("{who} refused our link (wrong job secret or unexpected rank {rank})"),
        Purpose::Tracker | Purpose::Master | Purpose::ParamServer => format!("{who} refused us: wrong job secret"),
    }))
}

/// Why a client handshake failed, sorted by whether another attempt can succeed.
#[derive(Debug)]
pub enum HandshakeFailure {
    /// The connection broke, closed or timed out on the way: a new connection may succeed
    /// (a restarted server, say).
    Broken(Error),
    /// The other end is not a Warren endpoint of this version, or it refused our proof:
    /// trying again cannot help.
    Refused(Error),
}

impl From<HandshakeFailure> for Error {
    fn from(f: HandshakeFailure) -> Error {
        match f {
            HandshakeFailure::Broken(e) | HandshakeFailure::Refused(e) => e,
        }
    }
}

/// Runs the client's side of the handshake over a connected blocking `stream` before
/// `deadline`; `who` names the server in errors.
pub fn client_handshake(
    stream: &mut TcpStream,
    secret: &[u8],
    purpose: Purpose,
    deadline: Instant,
    who: &str,
) -> std::result::Result<(), HandshakeFailure> {
    use HandshakeFailure::{Broken, Refused};
    write_all_by(stream, &hello(purpose), deadline, who).map_err(Broken)?;
    let mut challenge = [0u8; CHALLENGE_LEN];
    read_exact_by(stream, &mut challenge, deadline, who).map_err(Broken)?;
    let proof = answer(&challenge, secret, purpose, who).map_err(Refused)?;
    write_all_by(stream, &proof, deadline, who).map_err(Broken)?;
    let mut verdict = [0u8; 1];
    read_exact_by(stream, &mut verdict, deadline, who).map_err(Broken)?;
    check_verdict(verdict[0], purpose, who).map_err(Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"s3cret";

    #[test]
    fn hello_is_the_preamble_and_on_a_peer_link_the_rank() {
        assert_eq!(hello(Purpose::Tracker), preamble());
        assert_eq!(hello(Purpose::Master), preamble());
        let h = hello(Purpose::Peer(7));
        assert_eq!(&h[..PREAMBLE_LEN], preamble());
        assert_eq!(&h[PREAMBLE_LEN..], 7u32.to_le_bytes());
    }

    #[test]
    fn the_right_secret_is_accepted() {
        let c = Challenge::new();
        let a = answer(&c.bytes(), SECRET, Purpose::Master, "master").unwrap();
        assert!(c.accepts(SECRET, Purpose::Master, &a));
        assert!(check_verdict(ACCEPTED, Purpose::Master, "master").is_ok());
    }

    #[test]
    fn a_wrong_secret_purpose_rank_or_nonce_is_refused() {
        let c = Challenge::new();
        let wrong = answer(&c.bytes(), b"guess", Purpose::Tracker, "tracker").unwrap();
        assert!(!c.accepts(SECRET, Purpose::Tracker, &wrong));
        let for_master = answer(&c.bytes(), SECRET, Purpose::Master, "tracker").unwrap();
        assert!(!c.accepts(SECRET, Purpose::Tracker, &for_master), "a proof for one service opens no other");
        let as_rank_3 = answer(&c.bytes(), SECRET, Purpose::Peer(3), "rank 0").unwrap();
        assert!(!c.accepts(SECRET, Purpose::Peer(4), &as_rank_3), "a proof binds the connecting rank");
        let other = Challenge::new();
        assert!(!other.accepts(SECRET, Purpose::Peer(3), &as_rank_3), "a proof is good for one nonce only");
    }

    #[test]
    fn a_truncated_or_padded_answer_is_refused() {
        let c = Challenge::new();
        let a = answer(&c.bytes(), SECRET, Purpose::Tracker, "tracker").unwrap();
        for cut in 0..PROOF_LEN {
            assert!(!c.accepts(SECRET, Purpose::Tracker, &a[..cut]), "cut at {cut}");
        }
        let mut padded = a.to_vec();
        padded.push(0);
        assert!(!c.accepts(SECRET, Purpose::Tracker, &padded));
    }

    #[test]
    fn a_truncated_challenge_or_a_foreign_server_gets_no_answer() {
        let c = Challenge::new().bytes();
        for cut in 0..CHALLENGE_LEN {
            let e = answer(&c[..cut], SECRET, Purpose::Master, "master m:1").unwrap_err();
            assert!(matches!(&e, Error::Protocol(m) if m.contains("master m:1")), "{e}");
        }
        let mut http = c;
        http[..4].copy_from_slice(b"HTTP");
        assert!(matches!(answer(&http, SECRET, Purpose::Master, "m"), Err(Error::Protocol(m)) if m.contains("magic")));
        let mut v2 = c;
        v2[4] = 7;
        assert!(
            matches!(answer(&v2, SECRET, Purpose::Master, "m"), Err(Error::Protocol(m)) if m.contains("version 7"))
        );
    }

    #[test]
    fn a_refusal_names_the_server_and_what_to_check() {
        let e = check_verdict(REFUSED, Purpose::Tracker, "tracker t:1").unwrap_err();
        assert!(matches!(&e, Error::Auth(m) if m.contains("tracker t:1") && m.contains("secret")), "{e}");
        let e = check_verdict(REFUSED, Purpose::Peer(5), "peer rank 2").unwrap_err();
        assert!(matches!(&e, Error::Auth(m) if m.contains("peer rank 2") && m.contains("rank 5")), "{e}");
        assert!(check_verdict(7, Purpose::Master, "m").is_err(), "only 1 accepts");
    }
}

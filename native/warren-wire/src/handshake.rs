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
//! listener in the collective runtime's `transport`.

use std::net::TcpStream;
use std::time::Instant;

use rustls::StreamOwned;

use super::auth::{self, PROOF_LEN, Purpose};
use super::channel::Channel;
use super::deadline::{read_exact_by, write_all_by};
use super::preamble::{PREAMBLE_LEN, check_mode, check_preamble, preamble, preamble_with};
use super::tls::{self, Tls};
use warren_base::error::{Error, Result};

/// Byte length of a challenge: the preamble, then the nonce.
pub const CHALLENGE_LEN: usize = PREAMBLE_LEN + PROOF_LEN;
/// Verdict byte of an accepted answer.
pub const ACCEPTED: u8 = 1;
/// Verdict byte of a refused answer.
pub const REFUSED: u8 = 0;

/// What a client sends first: the preamble, followed on a peer link by the connecting rank
/// (`u32` little-endian), which the proof also binds.
pub fn hello(purpose: Purpose) -> Vec<u8> {
    hello_with(purpose, false)
}

/// The hello of an end where TLS is `tls`: the same bytes, [`super::TLS_FLAG`] set if on.
pub fn hello_with(purpose: Purpose, tls: bool) -> Vec<u8> {
    let mut b = preamble_with(tls).to_vec();
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

/// Opens a client connection over a connected blocking `stream` before `deadline`: the
/// handshake in plain text when `tls` is `None`, else TLS first and then the proofs of the
/// secret bound to the channel ([`super::tls`]). `who` names the server in errors.
pub fn client_channel(
    mut stream: TcpStream,
    secret: &[u8],
    purpose: Purpose,
    tls: Option<&Tls>,
    deadline: Instant,
    who: &str,
) -> std::result::Result<Channel, HandshakeFailure> {
    use HandshakeFailure::{Broken, Refused};
    let Some(tls) = tls else {
        client_handshake(&mut stream, secret, purpose, deadline, who)?;
        return Ok(Channel::Plain(stream));
    };
    write_all_by(&mut stream, &hello_with(purpose, true), deadline, who).map_err(Broken)?;
    let mut pre = [0u8; PREAMBLE_LEN];
    read_exact_by(&mut stream, &mut pre, deadline, who).map_err(Broken)?;
    check_mode(&pre, who, true).map_err(Refused)?;
    let ip = stream.peer_addr().map_err(|e| Broken(Error::io(format!("reading the address of {who}"), e)))?.ip();
    let session = tls.client(ip).map_err(Refused)?;
    let mut ch = Channel::Client(Box::new(StreamOwned::new(session, stream)));
    // The first read drives the TLS handshake, then brings the server's proof.
    let mut theirs = [0u8; PROOF_LEN];
    read_exact_by(&mut ch, &mut theirs, deadline, who).map_err(|e| tls_failure(e, who))?;
    let binding = ch.binding().map_err(Refused)?.expect("a TLS channel");
    if !tls::proof_holds(secret, purpose, &binding, &theirs, true) {
        return Err(Refused(Error::Auth(format!(
            "{who} did not prove the job secret over TLS (it holds another job's secret, or something sits in between): nothing sent to it"
        ))));
    }
    write_all_by(&mut ch, &tls::client_proof(secret, purpose, &binding), deadline, who).map_err(Broken)?;
    let mut verdict = [0u8; 1];
    read_exact_by(&mut ch, &mut verdict, deadline, who).map_err(|e| tls_failure(e, who))?;
    check_verdict(verdict[0], purpose, who).map_err(Refused)?;
    Ok(ch)
}

/// The server's side of the proofs on a TLS channel `ch` (for a peer link; tokio services
/// have their own): completes the TLS handshake, proves `secret` for `purpose`, checks the
/// client's proof and answers the verdict: accepted if the proof holds and `wanted`. Returns
/// whether the proof held.
pub fn server_tls_proofs(
    ch: &mut Channel,
    secret: &[u8],
    purpose: Purpose,
    wanted: bool,
    deadline: Instant,
    who: &str,
) -> Result<bool> {
    ch.complete_handshake(deadline, who).map_err(|e| Error::from(tls_failure(e, who)))?;
    let binding = ch.binding()?.expect("a TLS channel");
    write_all_by(ch, &tls::server_proof(secret, purpose, &binding), deadline, who)?;
    let mut proof = [0u8; PROOF_LEN];
    read_exact_by(ch, &mut proof, deadline, who).map_err(|e| match e {
        Error::Protocol(_) => Error::Auth(format!(
            "{who} sent no proof of the job secret: it holds another job's secret, or refused ours"
        )),
        other => other,
    })?;
    let ok = tls::proof_holds(secret, purpose, &binding, &proof, false);
    write_all_by(ch, &[if ok && wanted { ACCEPTED } else { REFUSED }], deadline, who)?;
    Ok(ok)
}

/// A failed read during a TLS handshake: refused for good if TLS refused the other end (or
/// it us), else broken (a new attempt may succeed).
pub(crate) fn tls_failure(e: Error, who: &str) -> HandshakeFailure {
    match &e {
        Error::Io { source, .. } => match tls::refusal(source) {
            Some(why) => HandshakeFailure::Refused(Error::Auth(format!("{who}: {why}"))),
            None => HandshakeFailure::Broken(e),
        },
        _ => HandshakeFailure::Broken(e),
    }
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

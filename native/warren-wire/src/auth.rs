//! Proof of the job secret by HMAC-SHA256 challenge-response; the secret never crosses the wire.

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// Length of a challenge nonce and of a proof, in bytes.
pub const PROOF_LEN: usize = 32;

/// Purpose labels keep a proof for one kind of connection useless for another.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    /// A worker (or CLI) connecting to the tracker.
    Tracker,
    /// A worker connecting to a peer worker; the proof also binds the connector's rank.
    Peer(u32),
    /// A client connecting to a data master.
    Master,
    /// A trainer (or `warren ps status`) connecting to a parameter server.
    ParamServer,
}

/// A fresh random challenge.
pub fn nonce() -> [u8; PROOF_LEN] {
    let mut n = [0u8; PROOF_LEN];
    rand::thread_rng().fill_bytes(&mut n);
    n
}

fn mac(secret: &[u8], purpose: Purpose, nonce: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    match purpose {
        Purpose::Tracker => m.update(b"warren-tracker-v1"),
        Purpose::Peer(rank) => {
            m.update(b"warren-peer-v1");
            m.update(&rank.to_le_bytes());
        }
        Purpose::Master => m.update(b"warren-master-v1"),
        Purpose::ParamServer => m.update(b"warren-ps-v1"),
    }
    m.update(nonce);
    m
}

/// The proof that the holder of `secret` answers to `nonce`.
pub fn prove(secret: &[u8], purpose: Purpose, nonce: &[u8]) -> [u8; PROOF_LEN] {
    mac(secret, purpose, nonce).finalize().into_bytes().into()
}

/// Checks a proof in constant time.
pub fn verify(secret: &[u8], purpose: Purpose, nonce: &[u8], proof: &[u8]) -> bool {
    mac(secret, purpose, nonce).verify_slice(proof).is_ok()
}

/// A new random job secret, hex encoded (64 characters).
pub fn generate_secret() -> String {
    hex::encode(nonce())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_secret_verifies_wrong_does_not() {
        let n = nonce();
        let p = prove(b"s3cret", Purpose::Tracker, &n);
        assert!(verify(b"s3cret", Purpose::Tracker, &n, &p));
        assert!(!verify(b"other", Purpose::Tracker, &n, &p));
        assert!(!verify(b"s3cret", Purpose::Tracker, &nonce(), &p));
        assert!(!verify(b"s3cret", Purpose::Master, &n, &p));
        assert!(!verify(b"s3cret", Purpose::ParamServer, &n, &p));
        let q = prove(b"s3cret", Purpose::Peer(3), &n);
        assert!(!verify(b"s3cret", Purpose::Peer(4), &n, &q));
    }
}

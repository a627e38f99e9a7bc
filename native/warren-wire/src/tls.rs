//! Encryption in transit (off by default; `WARREN_TLS=1`): TLS 1.3 (rustls with the `ring`
//! provider) on every connection that can leave a host: the tracker, the data master, the
//! parameter servers and the TCP peer links. Shared-memory links between workers on one host
//! carry their data through memory that never leaves the host: they stay as they are, and
//! their socket (which only carries one-byte wake-ups) is not encrypted after the handshake;
//! `WARREN_TRANSPORT=tcp` puts every peer link on TLS.
//!
//! # Keying from the job secret (the default: nothing new to set up)
//!
//! Every server (tracker, master, parameter server, a worker's peer listener) presents an
//! ephemeral self-signed certificate made when it starts (ECDSA P-256, [`Tls::ephemeral`]);
//! a client does not check it against any authority. Inside the encrypted channel both ends
//! then prove that they hold the job secret, *bound to this channel*:
//!
//! ```text
//! binding = TLS exporter (RFC 8446 section 7.5), label "EXPORTER-warren-channel-binding", 32 bytes
//! server -> client: HMAC(secret, purpose, "tls-server" || binding)
//! client -> server: HMAC(secret, purpose, "tls-client" || binding)   (only if the server's checks)
//! server -> client: verdict byte
//! ```
//!
//! Two ends derive the same binding only if they share one TLS session. A man in the middle
//! holds two sessions with two different bindings, so it can neither relay a proof from one
//! to the other nor make one up without the secret; a client sends nothing (no proof, no
//! request) before the server proved the secret, and a server accepts nothing before the
//! client did. The purpose label (and on a peer link the connecting rank) keeps a proof for
//! one kind of connection useless for another, as in plain mode ([`super::auth`]).
//!
//! # User-given certificates (for clusters that require a PKI)
//!
//! With `WARREN_TLS_CA` (a PEM bundle of trusted authorities), `WARREN_TLS_CERT` (this host's
//! certificate chain, PEM) and `WARREN_TLS_KEY` (its private key, PEM, PKCS#8, PKCS#1 or
//! SEC1), every end presents its certificate and checks the other's chain against the
//! bundle, both ways (mutual TLS): a client with no certificate, or one signed by another
//! authority, is refused during the TLS handshake. Host names are not checked (peers are
//! addressed by the IP address they advertise); the proof of the job secret still runs
//! inside the channel, so a certificate alone does not join a job.
//!
//! # Both ends must agree
//!
//! Before TLS starts, the client sends its usual hello with [`TLS_FLAG`](super::TLS_FLAG) set
//! in the preamble's version, and the server answers its own preamble. A TLS client and a
//! plain server (or the other way round) both see the other's preamble and fail at once with
//! an error naming the mismatch ([`super::check_mode`]); neither waits for a timeout.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::auth::{self, PROOF_LEN, Purpose};
use warren_base::config::keys;
use warren_base::error::{Error, Result};

/// The label of the exporter that binds the proofs of the job secret to one TLS session.
const BINDING_LABEL: &[u8] = b"EXPORTER-warren-channel-binding";

pub use warren_base::config::TlsSettings;

/// A TLS context: what this process presents and how it checks the other end. Cheap to
/// clone (shared configurations).
#[derive(Clone)]
pub struct Tls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    /// `"job secret"` or `"certificates"`, for messages.
    keying: &'static str,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("keying", &self.keying).finish()
    }
}

/// ring's suites with TLS 1.3's mandatory AES-128-GCM first: its 10 AES rounds against
/// AES-256's 14 encrypt a link's bytes about a fifth faster (12.4 against 10.2 GB/s on one
/// core here, 16 KiB records), and both ends then pick it.
fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(p)
}

fn tls_error(doing: &str, e: impl fmt::Display) -> Error {
    Error::Config(format!("TLS: {doing}: {e}"))
}

impl Tls {
    /// The TLS context `settings` describe: `None` when TLS is off; certificates read from
    /// the files given, or an ephemeral one keyed from the job secret.
    pub fn from_settings(settings: &TlsSettings) -> Result<Option<Tls>> {
        if !settings.enabled {
            return Ok(None);
        }
        match (&settings.ca, &settings.cert, &settings.key) {
            (Some(ca), Some(cert), Some(key)) => Tls::from_pem(ca, cert, key).map(Some),
            _ => Tls::ephemeral().map(Some),
        }
    }

    /// Keyed from the job secret: an ephemeral self-signed certificate, not checked by
    /// clients; the proofs of the job secret bound to the channel authenticate both ends.
    pub fn ephemeral() -> Result<Tls> {
        let made = rcgen::generate_simple_self_signed(vec!["warren".to_string()])
            .map_err(|e| tls_error("making an ephemeral certificate", e))?;
        let certs = vec![made.cert.der().clone()];
        let key = PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
        let p = provider();
        let server = ServerConfig::builder_with_provider(p.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("configuring the server side", e))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| tls_error("configuring the server side", e))?;
        let verifier = SecretBound { algorithms: p.signature_verification_algorithms };
        let client = ClientConfig::builder_with_provider(p)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("configuring the client side", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Tls::new(client, server, "job secret"))
    }

    /// Keyed from user certificates: `ca` (PEM authorities), `cert` (PEM chain) and `key`
    /// (PEM private key). Both ends present their certificate and check the other's.
    pub fn from_pem(ca: &Path, cert: &Path, key: &Path) -> Result<Tls> {
        let mut roots = RootCertStore::empty();
        for c in read_certs(ca, keys::TLS_CA)? {
            roots.add(c).map_err(|e| tls_error(&format!("{} {}", keys::TLS_CA, ca.display()), e))?;
        }
        let chain = read_certs(cert, keys::TLS_CERT)?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| Error::Config(format!("{} {}: no private key read: {e}", keys::TLS_KEY, key.display())))?;
        let roots = Arc::new(roots);
        let p = provider();
        let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), p.clone())
            .build()
            .map_err(|e| tls_error("checking client certificates", e))?;
        let server = ServerConfig::builder_with_provider(p.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("configuring the server side", e))?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| tls_error(&format!("{} and {}", keys::TLS_CERT, keys::TLS_KEY), e))?;
        let servers = WebPkiServerVerifier::builder_with_provider(roots, p.clone())
            .build()
            .map_err(|e| tls_error("checking server certificates", e))?;
        let client = ClientConfig::builder_with_provider(p)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("configuring the client side", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(servers)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| tls_error(&format!("{} and {}", keys::TLS_CERT, keys::TLS_KEY), e))?;
        Ok(Tls::new(client, server, "certificates"))
    }

    fn new(client: ClientConfig, mut server: ServerConfig, keying: &'static str) -> Tls {
        // No resumption: every connection is a full handshake with a fresh binding.
        server.send_tls13_tickets = 0;
        Tls { client: Arc::new(client), server: Arc::new(server), keying }
    }

    /// A client session to the server at `ip`.
    pub(crate) fn client(&self, ip: IpAddr) -> Result<rustls::ClientConnection> {
        rustls::ClientConnection::new(self.client.clone(), ServerName::IpAddress(ip.into()))
            .map_err(|e| tls_error("starting a client session", e))
    }

    /// A server session.
    pub fn server(&self) -> Result<rustls::ServerConnection> {
        rustls::ServerConnection::new(self.server.clone()).map_err(|e| tls_error("starting a server session", e))
    }

    /// The server side for tokio services.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.server.clone())
    }
}

fn read_certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<std::result::Result<_, _>>())
        .map_err(|e| Error::Config(format!("{key} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!("{key} {}: no PEM certificate in it", path.display())));
    }
    Ok(certs)
}

/// The channel binding of a session whose handshake is complete.
pub(crate) fn binding<D>(conn: &rustls::ConnectionCommon<D>) -> Result<[u8; PROOF_LEN]> {
    conn.export_keying_material([0u8; PROOF_LEN], BINDING_LABEL, None)
        .map_err(|e| Error::Protocol(format!("TLS channel binding: {e}")))
}

/// The server's proof of `secret` for `purpose` on the channel with `binding`.
pub(crate) fn server_proof(secret: &[u8], purpose: Purpose, binding: &[u8]) -> [u8; PROOF_LEN] {
    auth::prove(secret, purpose, &[b"tls-server" as &[u8], binding].concat())
}

/// The client's proof of `secret` for `purpose` on the channel with `binding`.
pub(crate) fn client_proof(secret: &[u8], purpose: Purpose, binding: &[u8]) -> [u8; PROOF_LEN] {
    auth::prove(secret, purpose, &[b"tls-client" as &[u8], binding].concat())
}

/// Checks a proof from the other end in constant time; `from_server` says which it is.
pub(crate) fn proof_holds(secret: &[u8], purpose: Purpose, binding: &[u8], proof: &[u8], from_server: bool) -> bool {
    let label: &[u8] = if from_server { b"tls-server" } else { b"tls-client" };
    auth::verify(secret, purpose, &[label, binding].concat(), proof)
}

/// Whether an I/O error is TLS refusing the other end (a bad certificate, an alert), which no
/// new attempt can cure, and if so the reason.
pub(crate) fn refusal(e: &std::io::Error) -> Option<String> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()).map(|t| match t {
        rustls::Error::InvalidCertificate(c) => format!("its TLS certificate is not accepted here ({c:?})"),
        rustls::Error::NoCertificatesPresented => {
            "it presented no TLS certificate (WARREN_TLS_CERT unset there)".into()
        }
        rustls::Error::AlertReceived(a) => format!("it refused the TLS handshake ({a:?}: our certificate, or none)"),
        other => format!("TLS failed: {other}"),
    })
}

/// Keyed from the job secret: any server certificate is taken (the handshake's signatures are
/// still checked); the proofs of the secret bound to the channel authenticate the server.
#[derive(Debug)]
struct SecretBound {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for SecretBound {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// User certificates: the server's chain must lead to the CA bundle; its names are not
/// checked (peers are addressed by IP address).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(kv: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: std::collections::HashMap<String, String> =
            kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn off_by_default_on_with_the_flag() {
        assert_eq!(TlsSettings::from_lookup(&lookup(&[])).unwrap(), TlsSettings::default());
        assert!(Tls::from_settings(&TlsSettings::default()).unwrap().is_none());
        assert_eq!(TlsSettings::from_lookup(&lookup(&[("WARREN_TLS", "1")])).unwrap(), TlsSettings::on());
        assert!(Tls::from_settings(&TlsSettings::on()).unwrap().is_some());
    }

    #[test]
    fn certificates_need_the_flag_and_all_three_paths() {
        let e = TlsSettings::from_lookup(&lookup(&[("WARREN_TLS_CERT", "/c.pem")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TLS_CERT set but WARREN_TLS is not 1"), "{e}");
        let e = TlsSettings::from_lookup(&lookup(&[("WARREN_TLS", "1"), ("WARREN_TLS_CA", "/ca.pem")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TLS_CERT and WARREN_TLS_KEY missing"), "{e}");
        let e = TlsSettings::from_lookup(&lookup(&[("WARREN_TLS", "maybe")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TLS=\"maybe\""), "{e}");
    }

    #[test]
    fn unreadable_certificate_files_are_named() {
        let s = TlsSettings {
            enabled: true,
            ca: Some("/nonexistent/ca.pem".into()),
            cert: Some("/nonexistent/c.pem".into()),
            key: Some("/nonexistent/k.pem".into()),
        };
        let e = Tls::from_settings(&s).unwrap_err();
        assert!(matches!(&e, Error::Config(m) if m.contains("WARREN_TLS_CA /nonexistent/ca.pem")), "{e}");
    }

    #[test]
    fn a_proof_binds_the_side_the_purpose_and_the_channel() {
        let (b1, b2) = ([1u8; 32], [2u8; 32]);
        let s = server_proof(b"k", Purpose::Tracker, &b1);
        assert!(proof_holds(b"k", Purpose::Tracker, &b1, &s, true));
        assert!(!proof_holds(b"k", Purpose::Tracker, &b1, &s, false), "a server proof is no client proof");
        assert!(!proof_holds(b"k", Purpose::Tracker, &b2, &s, true), "another channel");
        assert!(!proof_holds(b"k", Purpose::Master, &b1, &s, true), "another purpose");
        assert!(!proof_holds(b"other", Purpose::Tracker, &b1, &s, true), "another secret");
        let c = client_proof(b"k", Purpose::Peer(3), &b1);
        assert!(proof_holds(b"k", Purpose::Peer(3), &b1, &c, false));
        assert!(!proof_holds(b"k", Purpose::Peer(4), &b1, &c, false), "another rank");
    }
}

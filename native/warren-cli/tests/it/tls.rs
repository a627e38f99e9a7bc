//! Encryption in transit with real processes: `warren run` of the example training
//! job with `WARREN_TLS=1` ends with the model of the plain run, also after a SIGKILL, keyed
//! from the job secret or from user certificates; a worker whose TLS setting, secret or
//! certificate does not fit the tracker's fails fast with an error naming why, and the tracker
//! refuses it. Every run has a hard time limit.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::crash::Dir;
use crate::support::procs::{Proc, worker_env};
use crate::support::training::{Run, WARREN, launch, launch_killing};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType};

/// A 1 MB model: its gradient allreduces run over the ring, through every link.
const ARGS: [&str; 6] = ["--model-bytes", "1000000", "--iters", "60", "--compute-ms", "4"];
const SECRET: &str = "tls-cli-test-secret";

/// `(tcp links, tls links)` of rank 0 after the last call.
fn links(r: &Run) -> (usize, usize) {
    let line = r.stdout.lines().find_map(|l| l.strip_prefix("LINKS ")).expect("a LINKS line");
    let count = |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k)).expect(k).parse::<usize>().unwrap();
    (count("tcp="), count("tls="))
}

#[test]
fn a_job_under_tls_gives_the_plain_model_and_recovers_from_a_sigkill() {
    let tcp = [("WARREN_TRANSPORT", "tcp")];
    let plain = launch(4, &[], &ARGS, &tcp, |_| {});
    assert!(plain.ok(), "plain: {}", plain.stderr);
    assert_eq!(links(&plain), (3, 0), "plain: no link encrypted");
    let env = [("WARREN_TRANSPORT", "tcp"), ("WARREN_TLS", "1")];
    let tls = launch(4, &[], &ARGS, &env, |_| {});
    assert!(tls.ok(), "under TLS: {}", tls.stderr);
    assert_eq!(links(&tls), (3, 3), "WARREN_TLS=1: every TCP link encrypted");
    assert_eq!(tls.hash(), plain.hash(), "the same model bits under TLS");
    let killed = launch_killing(4, &ARGS, &env, 2);
    assert!(killed.ok(), "under TLS, a SIGKILL: {}", killed.stderr);
    assert!(killed.restarts() >= 1, "the killed worker was restarted");
    assert_eq!(killed.hash(), plain.hash(), "the same model bits under TLS after a SIGKILL");
}

/// A certificate authority named `name`, written to `dir/<name>-ca.pem`, and a certificate
/// for 127.0.0.1 it signs (for servers and clients), in `dir/<name>-cert.pem` and
/// `dir/<name>-key.pem`. Returns the three paths.
fn authority(dir: &Path, name: &str) -> [String; 3] {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, format!("{name} test CA"));
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let paths = ["ca", "cert", "key"].map(|k| dir.join(format!("{name}-{k}.pem")).display().to_string());
    std::fs::write(&paths[0], ca_cert.pem()).unwrap();
    std::fs::write(&paths[1], cert.pem()).unwrap();
    std::fs::write(&paths[2], key.serialize_pem()).unwrap();
    paths
}

fn pki_env(paths: &[String; 3]) -> Vec<(&'static str, String)> {
    vec![
        ("WARREN_TLS", "1".to_string()),
        ("WARREN_TLS_CA", paths[0].clone()),
        ("WARREN_TLS_CERT", paths[1].clone()),
        ("WARREN_TLS_KEY", paths[2].clone()),
    ]
}

#[test]
fn a_job_with_user_certificates_gives_the_plain_model() {
    let dir = Dir::new("tls-pki-job");
    let ours = authority(&dir.0, "ours");
    let env: Vec<(&str, String)> =
        [("WARREN_TRANSPORT", "tcp".to_string())].into_iter().chain(pki_env(&ours)).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = ["--model-bytes", "40000", "--iters", "12"];
    let plain = launch(3, &[], &args, &[], |_| {});
    let pki = launch(3, &[], &args, &env, |_| {});
    assert!(pki.ok(), "with certificates: {}", pki.stderr);
    assert_eq!(links(&pki), (2, 2), "every TCP link encrypted");
    assert_eq!(pki.hash(), plain.hash(), "the same model bits with certificates");
}

/// A `warren tracker` for one worker with `env`; its address.
fn tracker(env: &[(&str, String)]) -> (Proc, String) {
    let mut cmd = Command::new(WARREN);
    cmd.args(["tracker", "--workers", "1"]).env("WARREN_JOB_SECRET", SECRET).env("WARREN_PEER_TIMEOUT_S", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Proc::tracker(&mut cmd)
}

/// A worker of the tracker at `uri` with `secret` and `env`: it must fail within 10 s (no
/// wait for its 30 s connect timeout); returns its stderr.
fn refused_worker(uri: &str, secret: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(WARREN);
    cmd.args(["example", "train", "--iters", "2"]).envs(worker_env(uri, 1, secret, 0, 0));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let ended = Proc::start(&mut cmd).finish(Duration::from_secs(20));
    assert!(!ended.status.success(), "the worker should be refused:\n{}", ended.stderr);
    assert!(started.elapsed() < Duration::from_secs(10), "refused after {:?}", started.elapsed());
    ended.stderr
}

/// The tracker's log says it refused a connection because of `why`, within 5 s.
fn tracker_refused(t: &Proc, why: &str) {
    let line = crate::support::procs::wait_for(&t.log, "refused connection", Duration::from_secs(5));
    assert!(line.contains(why), "tracker: {line}");
}

#[test]
fn tls_on_one_side_only_or_a_wrong_secret_fails_fast_naming_it() {
    let on = vec![("WARREN_TLS", "1".to_string())];
    let (t, uri) = tracker(&on);
    let e = refused_worker(&uri, SECRET, &[]);
    assert!(e.contains("TLS mismatch") && e.contains("uses TLS (WARREN_TLS=1 there) but TLS is off here"), "{e}");
    tracker_refused(&t, "TLS mismatch");
    let e = refused_worker(&uri, "another job's secret", &on);
    assert!(e.contains("did not prove the job secret over TLS"), "{e}");
    tracker_refused(&t, "no proof of the job secret");
    drop(t);
    let (t, uri) = tracker(&[]);
    let e = refused_worker(&uri, SECRET, &on);
    assert!(e.contains("TLS mismatch") && e.contains("does not use TLS (WARREN_TLS is off there)"), "{e}");
    tracker_refused(&t, "TLS mismatch");
}

#[test]
fn a_certificate_of_another_authority_or_none_is_refused() {
    let dir = Dir::new("tls-pki-refused");
    let (ours, theirs) = (authority(&dir.0, "ours"), authority(&dir.0, "theirs"));
    let (t, uri) = tracker(&pki_env(&ours));
    // Signed by another authority: each end refuses the other's certificate.
    let e = refused_worker(&uri, SECRET, &pki_env(&theirs));
    assert!(e.contains("TLS certificate is not accepted here"), "{e}");
    tracker_refused(&t, "TLS handshake failed");
    // No certificate (TLS keyed from the secret only): the tracker requires one.
    let e = refused_worker(&uri, SECRET, &[("WARREN_TLS", "1".to_string())]);
    assert!(e.contains("refused the TLS handshake"), "{e}");
    tracker_refused(&t, "TLS handshake failed");
    // Certificates without WARREN_TLS=1, or a missing key: a configuration error at once.
    let mut half = pki_env(&ours);
    half.retain(|(k, _)| *k != "WARREN_TLS");
    let e = refused_worker(&uri, SECRET, &half);
    assert!(e.contains("set but WARREN_TLS is not 1"), "{e}");
    let mut no_key = pki_env(&ours);
    no_key.retain(|(k, _)| *k != "WARREN_TLS_KEY");
    let e = refused_worker(&uri, SECRET, &no_key);
    assert!(e.contains("WARREN_TLS_KEY missing"), "{e}");
}

//! Encryption in transit over real loopback sockets: the data master, the parameter servers
//! and peer links under TLS keyed from the job secret. A TLS end against a plain
//! one, or a wrong secret, fails fast with an error naming what is wrong, and is not served.

use std::time::{Duration, Instant};

use warren::Error;
use warren::master::{ClientOptions, MasterClient, MasterConfig, MasterService};
use warren::ps::{PsClient, PsClientOptions, PsConfig, PsServer};
use warren::store::FileStore;
use warren::tracker::proto::PeerAddr;
use warren::transport::{Link, LinkSetup, PeerListener, connect_peers};
use warren::wire::{Tls, TlsSettings};

const SECRET: &str = "tls-test-secret";

fn tls() -> Option<Tls> {
    warren::wire::Tls::from_settings(&TlsSettings::on()).unwrap()
}

/// A master on a free port in a fresh directory, under TLS if `tls` is set.
fn master(tag: &str, tls: Option<Tls>) -> (MasterService, std::path::PathBuf) {
    let dir = crate::common::temp_dir(&format!("tls-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = MasterConfig::new(SECRET);
    cfg.tls = tls;
    (MasterService::start(cfg, Box::new(FileStore::open(dir.join("store")).unwrap())).unwrap(), dir)
}

fn master_client(uri: &str, secret: &str, tls: Option<Tls>) -> warren::Result<MasterClient> {
    MasterClient::connect(
        uri,
        secret,
        ClientOptions { call_timeout: Duration::from_secs(10), tls, ..Default::default() },
    )
}

/// Runs `f` and checks that it took less than 5 s (no wait for a timeout).
fn fast<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let r = f();
    assert!(started.elapsed() < Duration::from_secs(5), "{what} took {:?}", started.elapsed());
    r
}

#[test]
fn a_master_under_tls_serves_tls_clients_and_refuses_the_others_naming_why() {
    let (m, dir) = master("master", tls());
    let uri = m.uri().to_string();
    let mut c = master_client(&uri, SECRET, tls()).unwrap();
    assert_eq!(c.status().unwrap().tasks, 0, "a TLS client is served");
    let e = fast("a plain client", || master_client(&uri, SECRET, None).unwrap_err());
    assert!(e.to_string().contains("TLS mismatch") && e.to_string().contains("uses TLS"), "{e}");
    let e = fast("a wrong secret", || master_client(&uri, "another job", tls()).unwrap_err());
    assert!(matches!(&e, Error::Auth(m) if m.contains("did not prove the job secret")), "{e}");
    // And the other way round: a TLS client of a plain master.
    let (plain, plain_dir) = master("plain-master", None);
    let e = fast("a TLS client of a plain master", || master_client(plain.uri(), SECRET, tls()).unwrap_err());
    assert!(e.to_string().contains("TLS mismatch") && e.to_string().contains("does not use TLS"), "{e}");
    drop((m, plain));
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(plain_dir);
}

#[test]
fn parameter_servers_under_tls_serve_trainers_under_tls_only() {
    let servers: Vec<PsServer> = (0..2)
        .map(|i| {
            let mut cfg = PsConfig::new(SECRET, i, 2);
            cfg.tls = tls();
            PsServer::start(cfg).unwrap()
        })
        .collect();
    let uris: Vec<String> = servers.iter().map(|s| s.uri().to_string()).collect();
    let opts =
        |tls| PsClientOptions { connect_timeout: Duration::from_secs(10), call_timeout: Duration::from_secs(10), tls };
    let mut c = PsClient::connect(&uris, SECRET, None, opts(tls())).unwrap();
    assert_eq!(c.status().unwrap().len(), 2, "both servers answer under TLS");
    let e = fast("a plain trainer", || PsClient::connect(&uris, SECRET, Some(0), opts(None)).unwrap_err());
    assert!(e.to_string().contains("TLS mismatch"), "{e}");
    let e = fast("a wrong secret", || PsClient::connect(&uris, "another job", Some(0), opts(tls())).unwrap_err());
    assert!(matches!(&e, Error::Auth(m) if m.contains("did not prove the job secret")), "{e}");
}

fn peers(l0: &PeerListener, l1: &PeerListener) -> Vec<PeerAddr> {
    [l0, l1]
        .iter()
        .enumerate()
        .map(|(rank, l)| PeerAddr {
            rank,
            task_id: rank.to_string(),
            host: "127.0.0.1".into(),
            port: l.port,
            pid: 0,
            host_id: String::new(),
            placed_on: String::new(),
        })
        .collect()
}

/// Links rank 0 (with `tls0`, `secret0`) and rank 1 (with `tls1`, `secret1`).
fn link_pair(
    tls0: Option<Tls>,
    secret0: &'static [u8],
    tls1: Option<Tls>,
    secret1: &'static [u8],
) -> [warren::Result<Vec<Link>>; 2] {
    let (l0, l1) = (PeerListener::bind("127.0.0.1").unwrap(), PeerListener::bind("127.0.0.1").unwrap());
    let p = peers(&l0, &l1);
    let deadline = Instant::now() + Duration::from_secs(3);
    let p0 = p.clone();
    let rank0 = std::thread::spawn(move || {
        let setup = LinkSetup { me: 0, secret: secret0, tls: tls0.as_ref(), deadline, socket_buffer: None, shm: None };
        connect_peers(&l0, &setup, &p0, &[1], &mut || Ok(()))
    });
    let setup = LinkSetup { me: 1, secret: secret1, tls: tls1.as_ref(), deadline, socket_buffer: None, shm: None };
    let one = connect_peers(&l1, &setup, &p, &[0], &mut || Ok(()));
    [rank0.join().unwrap(), one]
}

#[test]
fn peer_links_under_tls_carry_bytes_both_ways_encrypted() {
    let [a, b] = link_pair(tls(), b"k", tls(), b"k");
    let (mut a, mut b) = (a.unwrap().remove(0), b.unwrap().remove(0));
    assert!(a.is_tls() && b.is_tls());
    // 3 MiB each way at once, moved by non-blocking reads and writes as the algorithms do.
    let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (mut got_a, mut got_b) = (vec![0u8; data.len()], vec![0u8; data.len()]);
    let (mut sa, mut sb, mut ra, mut rb) = (0, 0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while ra < data.len() || rb < data.len() || !a.flush().unwrap() || !b.flush().unwrap() {
        assert!(Instant::now() < deadline, "stuck at {sa} {sb} {ra} {rb}");
        sa += a.write_some(&data[sa..]).unwrap();
        sb += b.write_some(&data[sb..]).unwrap();
        ra += a.read_some(&mut got_a[ra..]).unwrap();
        rb += b.read_some(&mut got_b[rb..]).unwrap();
    }
    assert!(got_a == data && got_b == data, "the bytes arrive whole and in order");
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    let e = loop {
        match b.read_some(&mut got_b) {
            Ok(0) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Ok(n) => panic!("read {n} bytes from a closed link"),
            Err(e) => break e,
        }
    };
    assert!(matches!(&e, Error::PeerLost { rank: 0, .. }), "a closed TLS link is a lost peer: {e}");
}

#[test]
fn a_peer_with_tls_off_or_another_secret_is_refused_at_once() {
    for (tls0, tls1, want) in [(tls(), None, "TLS mismatch"), (None, tls(), "TLS mismatch")] {
        let [_, one] = fast("a mismatch", || link_pair(tls0, b"k", tls1, b"k"));
        let e = one.unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    }
    let [zero, one] = fast("a wrong secret", || link_pair(tls(), b"k", tls(), b"wrong"));
    let e = one.unwrap_err();
    assert!(matches!(&e, Error::Auth(m) if m.contains("did not prove the job secret")), "{e}");
    assert!(zero.is_err(), "rank 0 accepted no link (it timed out waiting)");
}

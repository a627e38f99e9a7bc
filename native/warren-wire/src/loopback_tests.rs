//! The blocking client ([`Connection`]) against the tokio server side ([`serve`],
//! [`FrameReader`]) over real loopback sockets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::auth::Purpose;
use super::{Backoff, Connection, FrameReader, HandshakeFailure, connect_by, serve};
use warren_base::error::Error;

const SECRET: &[u8] = b"loopback secret";
const ONCE: Backoff = Backoff { first: Duration::ZERO, max: Duration::ZERO };

/// A tokio echo service on a free port: answers every string frame with `echo <it>`.
struct Echo {
    addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

fn echo_service() -> Echo {
    let super::Bound { runtime, listener, addr } = super::bind("echo", 1, "127.0.0.1", 0).unwrap();
    runtime.spawn(serve(listener, Arc::new(SECRET.to_vec()), None, Purpose::Master, "echo", |stream| async move {
        let (rd, mut wr) = stream.into_split();
        let mut requests = FrameReader::new(rd, "a client");
        loop {
            let reply = match requests.next::<String>().await {
                Ok(Some(s)) => format!("echo {s}"),
                Ok(None) => return,
                Err(e) => format!("error {e}"),
            };
            if wr.write_all(&super::encode_frame(&reply)).await.is_err() {
                return;
            }
        }
    }));
    Echo { addr, _runtime: runtime }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

fn dial(addr: SocketAddr, secret: &[u8], purpose: Purpose) -> Result<Connection, HandshakeFailure> {
    let stream = connect_by(addr, soon(), "echo", ONCE, None, &mut |_| Ok(false)).map_err(HandshakeFailure::Broken)?;
    Connection::handshake(stream, secret, purpose, None, soon(), "echo service")
}

#[test]
fn a_client_with_the_secret_exchanges_frames() {
    let echo = echo_service();
    let mut c = dial(echo.addr, SECRET, Purpose::Master).unwrap();
    for word in ["one", "two"] {
        c.send(&word, soon()).unwrap();
        assert_eq!(c.recv::<String>(soon()).unwrap(), Some(format!("echo {word}")));
    }
}

#[test]
fn a_wrong_secret_or_purpose_is_refused_for_good() {
    let echo = echo_service();
    for (secret, purpose) in [(&b"guess"[..], Purpose::Master), (SECRET, Purpose::Tracker)] {
        match dial(echo.addr, secret, purpose) {
            Err(HandshakeFailure::Refused(Error::Auth(m))) => assert!(m.contains("echo service"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn a_malformed_frame_is_answered_by_the_service_not_fatal_to_the_client() {
    let echo = echo_service();
    let mut c = dial(echo.addr, SECRET, Purpose::Master).unwrap();
    c.send(&42u32, soon()).unwrap();
    let reply = c.recv::<String>(soon()).unwrap().unwrap();
    assert!(reply.starts_with("error protocol error: malformed"), "{reply}");
}

/// A server for one connection: reads the client's hello, then runs `then` on the socket.
fn after_hello(then: impl FnOnce(TcpStream) + Send + 'static) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 8];
        s.read_exact(&mut hello).unwrap();
        then(s);
    });
    (addr, server)
}

/// A server for one connection that completes the handshake, then runs `then` on the socket.
fn scripted(then: impl FnOnce(TcpStream) + Send + 'static) -> (SocketAddr, std::thread::JoinHandle<()>) {
    after_hello(move |mut s| {
        let challenge = super::handshake::Challenge::new();
        s.write_all(&challenge.bytes()).unwrap();
        let mut proof = [0u8; 32];
        s.read_exact(&mut proof).unwrap();
        assert!(challenge.accepts(SECRET, Purpose::Master, &proof));
        s.write_all(&[super::handshake::ACCEPTED]).unwrap();
        then(s);
    })
}

#[test]
fn a_server_that_hangs_up_during_the_handshake_is_a_broken_attempt() {
    // Half a challenge, then gone.
    let (addr, server) = after_hello(|mut s| s.write_all(&super::preamble()).unwrap());
    match dial(addr, SECRET, Purpose::Master) {
        Err(HandshakeFailure::Broken(e)) => assert!(e.to_string().contains("echo service"), "{e}"),
        other => panic!("expected a broken attempt, got {other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn a_frame_that_arrives_in_pieces_is_received_whole() {
    let (addr, server) = scripted(|mut s| {
        let f = super::encode_frame(&"slow");
        for b in f {
            s.write_all(&[b]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let mut c = dial(addr, SECRET, Purpose::Master).unwrap();
    assert_eq!(c.recv::<String>(soon()).unwrap().as_deref(), Some("slow"));
    server.join().unwrap();
}

#[test]
fn a_silent_service_times_out_naming_it_and_a_closed_one_is_none() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = scripted(move |s| {
        rx.recv().unwrap();
        drop(s);
    });
    let mut c = dial(addr, SECRET, Purpose::Master).unwrap();
    let started = Instant::now();
    let e = c.recv::<String>(Instant::now() + Duration::from_millis(200)).unwrap_err();
    assert!(matches!(&e, Error::Timeout { what, .. } if what.contains("echo service")), "{e}");
    // The message says how long it waited (not "after 0ns").
    assert!(matches!(&e, Error::Timeout { after, .. } if *after >= Duration::from_millis(150)), "{e}");
    assert!(e.to_string().starts_with("timed out after "), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A deadline already past when the wait begins says so.
    let late = c.recv::<String>(Instant::now() - Duration::from_millis(1)).unwrap_err();
    assert!(late.to_string().contains("its deadline had already passed"), "{late}");
    assert!(c.read_available().unwrap(), "nothing has arrived, the connection is open");
    tx.send(()).unwrap();
    server.join().unwrap();
    assert_eq!(c.recv::<String>(soon()).unwrap(), None);
}

#[test]
fn read_available_takes_what_has_arrived_without_waiting() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (addr, server) = scripted(move |mut s| {
        let mut two = super::encode_frame(&"a");
        two.extend(super::encode_frame(&"b"));
        s.write_all(&two).unwrap();
        rx.recv().unwrap();
    });
    let mut c = dial(addr, SECRET, Purpose::Master).unwrap();
    let mut got = Vec::new();
    let deadline = soon();
    while got.len() < 2 && Instant::now() < deadline {
        assert!(c.read_available().unwrap());
        while let Some(m) = c.next_buffered::<String>().unwrap() {
            got.push(m);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got, ["a", "b"]);
    tx.send(()).unwrap();
    server.join().unwrap();
}

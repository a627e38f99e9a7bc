//! Bad input gets a clear error on every rank, never a hang: mismatched calls, a wrong
//! secret, a worker that never arrives, garbage on the ports, a build of another protocol
//! version, a peer that goes away.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{run_world, start_tracker, worker_config};
use warren::robust::BootstrapKey;
use warren::{CallOptions, Communicator, Error, Op, Tracker, TrackerConfig};

/// Every rank reports the mismatch, with the two declarations (two ranks, two different
/// calls) as data, one of them naming `needle`.
fn all_mismatch<T: std::fmt::Debug>(results: Vec<warren::Result<T>>, needle: &str) {
    let world = results.len();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Err(Error::Mismatch(m)) => {
                let (a, b) = (&m.first, &m.second);
                assert!(a.rank != b.rank && a.rank < world && b.rank < world, "rank {rank}: {m:?}");
                assert_ne!(a.call, b.call, "rank {rank}");
                assert!(a.call.contains(needle) || b.call.contains(needle), "rank {rank}: {m}");
                assert!(m.to_string().contains(needle), "rank {rank}: {m}");
            }
            other => panic!("rank {rank} should report a mismatch, got {other:?}"),
        }
    }
}

#[test]
fn mismatched_sizes_are_reported_on_every_rank() {
    for world in [2, 3, 7] {
        let results = run_world(
            world,
            |_, _| {},
            move |c: &mut Communicator| {
                let len = if c.rank() == world - 1 { 11 } else { 10 };
                let mut v = vec![1.0f32; len];
                c.allreduce(&mut v, Op::Sum)
            },
        );
        all_mismatch(results, "44 bytes");
    }
}

/// Global state that differs between ranks (per-rank state put in the global checkpoint)
/// is reported on every rank, stating the contract and where per-worker state belongs.
#[test]
fn a_global_checkpoint_that_differs_between_ranks_states_the_contract() {
    let results = run_world(
        3,
        |_, c| c.robust = true,
        |c: &mut Communicator| {
            let global = [c.rank() as u8; 24];
            c.checkpoint(&global, None)
        },
    );
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Err(e @ Error::Mismatch(_)) => {
                let text = e.to_string();
                assert!(text.contains("must be the same bytes on every worker"), "rank {rank}: {text}");
                assert!(text.contains("global state checksum"), "rank {rank}: {text}");
            }
            other => panic!("rank {rank} should report a mismatch, got {other:?}"),
        }
    }
}

#[test]
fn mismatched_type_op_or_algorithm_is_reported_on_every_rank() {
    let results = run_world(
        4,
        |_, _| {},
        |c: &mut Communicator| {
            if c.rank() == 2 { c.allreduce(&mut [1i32; 4], Op::Sum) } else { c.allreduce(&mut [1.0f32; 4], Op::Sum) }
        },
    );
    all_mismatch(results, "i32");
    let results = run_world(
        3,
        |_, _| {},
        |c: &mut Communicator| {
            let op = if c.rank() == 0 { Op::Max } else { Op::Sum };
            c.allreduce(&mut [1u8; 4], op)
        },
    );
    all_mismatch(results, "max");
    // Ranks configured with different ring thresholds would pick different algorithms.
    let results = run_world(
        3,
        |task, c| c.ring_threshold = if task == 1 { 1 } else { usize::MAX },
        |c: &mut Communicator| c.allreduce(&mut [1.0f64; 64], Op::Sum),
    );
    all_mismatch(results, "ring");
    // Ranks configured with different ring slices would pair different byte ranges.
    let results = run_world(
        3,
        |task, c| {
            c.ring_threshold = 1024;
            c.ring_slice = if task == 2 { 4096 } else { 8192 };
        },
        |c: &mut Communicator| c.allreduce(&mut [1.0f32; 10_000], Op::Sum),
    );
    all_mismatch(results, "slices of 4096 bytes");
    // Ranks configured with different reduction orders would add in different orders on some
    // placements: refused on every placement, here one host.
    let results = run_world(
        3,
        |task, c| {
            c.ring_threshold = 1024;
            if task == 1 {
                c.reduction_order = warren::config::ReductionOrder::Hosts;
            }
        },
        |c: &mut Communicator| c.allreduce(&mut [1.0f32; 10_000], Op::Sum),
    );
    all_mismatch(results, "in host order");
}

#[test]
fn mismatched_call_order_and_broadcast_root() {
    let results = run_world(
        3,
        |_, _| {},
        |c: &mut Communicator| {
            if c.rank() == 1 { c.barrier() } else { c.allreduce(&mut [0u32; 2], Op::Sum) }
        },
    );
    all_mismatch(results, "barrier");
    let results = run_world(
        5,
        |_, _| {},
        |c: &mut Communicator| {
            let root = if c.rank() == 4 { 3 } else { 0 };
            let mut d = vec![7u8; 100];
            c.broadcast(&mut d, root)
        },
    );
    all_mismatch(results, "root");
}

#[test]
fn mismatched_call_options_are_reported_on_every_rank() {
    // A tag is part of the declaration, for typed, byte-buffer and broadcast calls alike.
    let results = run_world(
        3,
        |_, _| {},
        |c: &mut Communicator| {
            let opts = CallOptions::new().tag(if c.rank() == 1 { 7 } else { 8 });
            c.allreduce_with(&mut [1.0f32; 4], Op::Sum, &opts)
        },
    );
    for r in &results {
        if let Err(Error::Mismatch(m)) = r {
            let tags: Vec<Option<u32>> = [&m.first, &m.second].iter().map(|d| d.args.as_ref().unwrap().tag).collect();
            assert!(tags.contains(&Some(7)) && tags.contains(&Some(8)), "{tags:?}");
        }
    }
    all_mismatch(results, "tag 7");
    let results = run_world(
        2,
        |_, _| {},
        |c: &mut Communicator| {
            let opts = CallOptions::new().tag(c.rank() as u32);
            c.allreduce_bytes(&mut [0u8; 8], warren::DataType::U32, Op::Max, &opts)
        },
    );
    all_mismatch(results, "tag 1");
    let results = run_world(
        2,
        |_, _| {},
        |c: &mut Communicator| c.broadcast_with(&mut vec![1u8; 3], 0, &CallOptions::new().tag(5 + c.rank() as u32)),
    );
    all_mismatch(results, "tag 6");
    // Bootstrap calls under different keys (or a bootstrap call against an ordinary one) are
    // different calls: the key's hash is the call's number (shown as the key).
    let other = BootstrapKey::new("key:b", 0).hash;
    let results = run_world(
        3,
        |_, _| {},
        |c: &mut Communicator| {
            let opts = CallOptions::new().bootstrap_key(if c.rank() == 2 { "b" } else { "a" });
            c.allreduce_with(&mut [1u64; 2], Op::Max, &opts)
        },
    );
    all_mismatch(results, &format!("bootstrap key {other:#018x},"));
    let results = run_world(
        2,
        |_, _| {},
        |c: &mut Communicator| {
            let opts = if c.rank() == 0 { CallOptions::new().bootstrap_key("b") } else { CallOptions::new() };
            c.broadcast_with(&mut vec![1u8; 3], 0, &opts)
        },
    );
    all_mismatch(results, &format!("bootstrap key {other:#018x},"));
}

#[test]
fn communicator_is_unusable_after_a_failure() {
    let results = run_world(
        2,
        |_, _| {},
        |c: &mut Communicator| {
            let first = c.allreduce(&mut vec![0u8; 1 + c.rank()], Op::Sum);
            let second = c.barrier();
            Ok((first.is_err(), second.map_err(|e| e.to_string())))
        },
    );
    for r in results {
        let (first_failed, second) = r.unwrap();
        assert!(first_failed);
        assert!(second.unwrap_err().contains("earlier failure"));
    }
}

#[test]
fn invalid_arguments_are_refused_locally() {
    let mut c = Communicator::init(warren::Config::default()).unwrap();
    assert!(matches!(c.allreduce(&mut [1.0f32], Op::BitAnd), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.broadcast(&mut vec![1], 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        c.allreduce_custom(&mut [0u8; 5], 2, &CallOptions::new(), |_, _| {}),
        Err(Error::InvalidArgument(_))
    ));
    // A world of one works with no tracker.
    let mut v = vec![3i64, 4];
    c.allreduce(&mut v, Op::Prod).unwrap();
    assert_eq!(v, [3, 4]);
    assert_eq!(c.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
    c.finalize().unwrap();
}

#[test]
fn wrong_secret_is_refused_and_the_job_goes_on() {
    let tracker = start_tracker(2);
    let mut bad = worker_config(&tracker, 0);
    bad.secret = "not-the-secret".into();
    match Communicator::init(bad) {
        Err(Error::Auth(m)) => assert!(m.contains("secret"), "{m}"),
        other => panic!("expected an authentication error, got {other:?}"),
    }
    // The tracker still serves the real workers.
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let cfg = worker_config(&tracker, t);
            std::thread::spawn(move || {
                let mut c = Communicator::init(cfg)?;
                let mut v = [1u32];
                c.allreduce(&mut v, Op::Sum)?;
                c.finalize()?;
                Ok::<u32, Error>(v[0])
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), 2);
    }
    assert_eq!(tracker.wait(Some(Duration::from_secs(10))).unwrap().world, 2);
}

/// A worker whose call fails with an error that cannot succeed on retry tells the tracker
/// before the error reaches its runner: the job has failed, and a re-run that registers
/// afterwards is held, not answered, so that a runner that retries failed tasks on its own
/// (Spark) cannot use up its attempts on re-runs that would fail the same way. The held
/// re-run ends as soon as the tracker stops.
#[test]
fn after_a_final_error_a_re_run_is_held_until_the_tracker_stops() {
    let tracker = start_tracker(2);
    let handles: Vec<_> = (0..2usize)
        .map(|t| {
            let mut cfg = worker_config(&tracker, t);
            cfg.robust = true;
            std::thread::spawn(move || {
                let mut c = Communicator::init(cfg)?;
                let mut v = vec![1.0f32; 10 + t];
                c.allreduce(&mut v, Op::Sum)
            })
        })
        .collect();
    for h in handles {
        assert!(matches!(h.join().unwrap(), Err(Error::Mismatch(_))));
    }
    let e = tracker.wait(Some(Duration::from_secs(5))).unwrap_err().to_string();
    assert!(e.contains("failed with an error that cannot succeed on retry"), "{e}");
    assert!(e.contains("collective call mismatch"), "{e}");

    let mut cfg = worker_config(&tracker, 1);
    cfg.robust = true;
    cfg.attempt = 1;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Communicator::init(cfg).map(|_| ()));
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "a re-run after the final error must be held, not answered"
    );
    let stopped = Instant::now();
    tracker.stop();
    let r = rx.recv_timeout(Duration::from_secs(10)).expect("the held re-run ends once the tracker stops");
    assert!(r.is_err(), "{r:?}");
    assert!(stopped.elapsed() < Duration::from_secs(5), "stopping took {:?}", stopped.elapsed());
}

/// A worker that fails the job with an error no re-run can mend ends the job for the others
/// too: those waiting for it fail with `Error::JobFailed` naming that error (final, so that
/// their runners do not re-run them either), not with a tracker error a runner would retry.
#[test]
fn the_others_learn_that_a_final_error_failed_the_job() {
    let results = run_world(
        3,
        |_, cfg| cfg.robust = true,
        |c| {
            c.checkpoint(&[1u8, 2, 3], None)?;
            if c.rank() == 1 {
                c.fail_job("the input of rank 1 cannot be parsed");
                return Ok(());
            }
            let mut v = vec![1.0f32; 4];
            c.allreduce(&mut v, Op::Sum)
        },
    );
    assert!(results[1].is_ok(), "{:?}", results[1]);
    for r in [0, 2] {
        match &results[r] {
            Err(e @ Error::JobFailed(m)) => {
                assert!(m.contains("rank 1") && m.contains("cannot be parsed"), "{m}");
                assert!(e.is_final());
                assert!(e.to_string().starts_with("the job has failed: "), "{e}");
            }
            other => panic!("rank {r}: expected the job's failure, got {other:?}"),
        }
    }
}

#[test]
fn a_worker_that_never_arrives_is_named_by_the_deadline() {
    let mut cfg = TrackerConfig::new(3, "s");
    cfg.rendezvous_timeout = Duration::from_millis(800);
    let tracker = Tracker::start(cfg).unwrap();
    let started = Instant::now();
    let handles: Vec<_> = [0usize, 2]
        .into_iter()
        .map(|t| {
            let cfg = worker_config(&tracker, t);
            std::thread::spawn(move || Communicator::init(cfg).map(|_| ()))
        })
        .collect();
    for h in handles {
        match h.join().unwrap() {
            Err(Error::Tracker(m)) => assert!(m.contains("missing task ids [1]"), "{m}"),
            other => panic!("expected the rendezvous error, got {other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let e = tracker.wait(Some(Duration::from_secs(5))).unwrap_err();
    assert!(e.to_string().contains("missing task ids [1]"), "{e}");
}

#[test]
fn garbage_on_the_tracker_port_is_refused_without_harm() {
    let tracker = start_tracker(1);
    for garbage in [&b"GET / HTTP/1.1\r\n\r\n"[..], &[0xffu8; 64][..], &[][..]] {
        let mut s = TcpStream::connect(tracker.uri()).unwrap();
        let _ = s.write_all(garbage); // the tracker may hang up first
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest); // the tracker closes on us
        assert!(rest.len() <= 40, "no more than the challenge is ever sent to a stranger");
    }
    // A malformed frame after a valid handshake gets an error frame and the connection closes.
    let mut s = TcpStream::connect(tracker.uri()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(&warren::wire::preamble()).unwrap();
    let mut challenge = [0u8; 40];
    s.read_exact(&mut challenge).unwrap();
    s.write_all(&warren::wire::auth::prove(b"test-secret", warren::wire::auth::Purpose::Tracker, &challenge[8..]))
        .unwrap();
    let mut ok = [0u8; 1];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(ok[0], 1);
    s.write_all(&[5, 0, 0, 0, b'h', b'e', b'l', b'l', b'o']).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let (msg, _) = warren::wire::decode_frame::<warren::tracker::proto::FromTracker>(&reply).unwrap().unwrap();
    assert!(
        matches!(msg, warren::tracker::proto::FromTracker::Error { ref message } if message.contains("malformed")),
        "{msg:?}"
    );
    // The tracker still serves a real worker.
    let mut c = Communicator::init(worker_config(&tracker, 0)).unwrap();
    c.print("still serving").unwrap();
    c.finalize().unwrap();
    tracker.wait(Some(Duration::from_secs(5))).unwrap();
}

/// The preamble a build of another protocol version sends (this one's version + 1).
fn other_version_preamble() -> [u8; warren::wire::PREAMBLE_LEN] {
    let mut p = warren::wire::preamble();
    p[4..].copy_from_slice(&(warren::wire::VERSION + 1).to_le_bytes());
    p
}

/// A worker built from another commit (another protocol version) joining this build's
/// tracker is told the tracker's version before the tracker hangs up, so that it can say
/// which versions differ (as this build does, below) instead of seeing a closed connection;
/// the tracker goes on serving the job's own workers.
#[test]
fn a_worker_of_another_protocol_version_is_told_ours_and_the_job_goes_on() {
    use warren::wire::handshake::CHALLENGE_LEN;
    let tracker = start_tracker(1);
    let mut s = TcpStream::connect(tracker.uri()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(&other_version_preamble()).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply); // the tracker hangs up after its challenge
    assert_eq!(reply.len(), CHALLENGE_LEN, "the challenge and nothing more: {reply:?}");
    assert_eq!(&reply[..warren::wire::PREAMBLE_LEN], &warren::wire::preamble(), "the tracker's own preamble");
    let mut c = Communicator::init(worker_config(&tracker, 0)).unwrap();
    c.print("still serving").unwrap();
    c.finalize().unwrap();
    tracker.wait(Some(Duration::from_secs(5))).unwrap();
}

/// This build joining a tracker of another protocol version (one that answers with its
/// preamble, as this build does) fails at once with an error naming both versions, instead of
/// retrying until the connect timeout.
#[test]
fn joining_a_tracker_of_another_protocol_version_is_a_clear_error_at_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let other = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; warren::wire::PREAMBLE_LEN];
        s.read_exact(&mut hello).unwrap();
        let mut challenge = other_version_preamble().to_vec();
        challenge.extend_from_slice(&[7u8; 32]);
        s.write_all(&challenge).unwrap();
    });
    let mut env = std::collections::HashMap::new();
    for (k, v) in [
        ("WARREN_TRACKER_URI", addr.to_string()),
        ("WARREN_NUM_WORKERS", "2".into()),
        ("WARREN_JOB_SECRET", "test-secret".into()),
        ("WARREN_TASK_ID", "0".into()),
        ("WARREN_CONNECT_TIMEOUT_S", "30".into()),
    ] {
        env.insert(k.to_string(), v);
    }
    let started = Instant::now();
    let e = Communicator::init(warren::Config::from_map(&env).unwrap()).unwrap_err();
    let (theirs, ours) = (warren::wire::VERSION + 1, warren::wire::VERSION);
    assert!(
        matches!(&e, Error::Protocol(m) if m.contains(&format!("speaks protocol version {theirs}, this build speaks {ours}"))),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "not retried until the connect timeout");
    other.join().unwrap();
}

#[test]
fn garbage_and_impostors_on_a_peer_port_are_refused_and_linking_completes() {
    use warren::tracker::proto::PeerAddr;
    use warren::transport::{LinkSetup, PeerListener, connect_peers};
    let l0 = PeerListener::bind("127.0.0.1").unwrap();
    let l1 = PeerListener::bind("127.0.0.1").unwrap();
    let peers = vec![
        PeerAddr {
            rank: 0,
            task_id: "0".into(),
            host: "127.0.0.1".into(),
            port: l0.port,
            pid: 0,
            host_id: String::new(),
            placed_on: String::new(),
        },
        PeerAddr {
            rank: 1,
            task_id: "1".into(),
            host: "127.0.0.1".into(),
            port: l1.port,
            pid: 0,
            host_id: String::new(),
            placed_on: String::new(),
        },
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    // Garbage arrives first, then an impostor without the secret, then the real rank 1.
    let mut garbage = TcpStream::connect(("127.0.0.1", l0.port)).unwrap();
    garbage.write_all(b"\x00garbage that is not a warren peer").unwrap();
    let p = peers.clone();
    let rank0 = std::thread::spawn(move || {
        connect_peers(
            &l0,
            &LinkSetup { me: 0, secret: b"k", tls: None, deadline, socket_buffer: None, shm: None },
            &p,
            &[1],
            &mut || Ok(()),
        )
    });
    let p = peers.clone();
    let impostor = std::thread::spawn(move || {
        let l = PeerListener::bind("127.0.0.1").unwrap();
        connect_peers(
            &l,
            &LinkSetup { me: 1, secret: b"wrong", tls: None, deadline, socket_buffer: None, shm: None },
            &p,
            &[0],
            &mut || Ok(()),
        )
    });
    match impostor.join().unwrap() {
        Err(Error::Auth(m)) => assert!(m.contains("refused"), "{m}"),
        other => panic!("the impostor should be refused, got {other:?}"),
    }
    let p = peers.clone();
    let real = std::thread::spawn(move || {
        connect_peers(
            &l1,
            &LinkSetup { me: 1, secret: b"k", tls: None, deadline, socket_buffer: None, shm: None },
            &p,
            &[0],
            &mut || Ok(()),
        )
        .map(|l| l.len())
    });
    let links = rank0.join().unwrap().unwrap();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].peer, 1);
    assert_eq!(real.join().unwrap().unwrap(), 1);
}

/// A peer that accepts a connection and closes it before the link is set up (a joiner dying
/// right after it accepted) is reported lost, naming its rank: the caller re-links, as for a
/// peer lost in a call, instead of failing on an I/O error.
#[test]
fn a_peer_that_breaks_off_while_linking_is_lost_not_an_io_failure() {
    use warren::tracker::proto::PeerAddr;
    use warren::transport::{LinkSetup, PeerListener, connect_peers};
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = fake.local_addr().unwrap().port();
    let closer = std::thread::spawn(move || drop(fake.accept().unwrap()));
    let l1 = PeerListener::bind("127.0.0.1").unwrap();
    let addr = |rank: usize, port: u16| PeerAddr {
        rank,
        task_id: rank.to_string(),
        host: "127.0.0.1".into(),
        port,
        pid: 0,
        host_id: String::new(),
        placed_on: String::new(),
    };
    let peers = vec![addr(0, port), addr(1, l1.port)];
    let deadline = Instant::now() + Duration::from_secs(20);
    let setup = LinkSetup { me: 1, secret: b"k", tls: None, deadline, socket_buffer: None, shm: None };
    let r = connect_peers(&l1, &setup, &peers, &[0], &mut || Ok(()));
    closer.join().unwrap();
    assert!(matches!(&r, Err(Error::PeerLost { rank: 0, .. })), "{:?}", r.map(|l| l.len()));
}

#[test]
fn a_vanished_peer_fails_the_others_promptly() {
    // Rank 1 leaves (finalizes) instead of calling the second allreduce: in plain mode the
    // others fail at once on the broken link.
    let started = Instant::now();
    let results = run_world(
        4,
        |_, c| c.robust = false,
        |c: &mut Communicator| {
            let mut v = vec![1.0f32; 1000];
            c.allreduce(&mut v, Op::Sum)?;
            if c.rank() == 1 {
                return Ok(());
            }
            c.allreduce(&mut v, Op::Sum)
        },
    );
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    for (rank, r) in results.iter().enumerate() {
        match rank {
            1 => assert!(r.is_ok(), "rank 1 finalized: {r:?}"),
            _ => assert!(matches!(r, Err(Error::PeerLost { .. })), "rank {rank}: {r:?}"),
        }
    }
}

/// A robust worker that loses a peer waits for its replacement while it re-links; when none
/// comes within the connect timeout, the timeout names the call it was in (here the second
/// allreduce), not only what the re-link waited for.
#[test]
fn a_peer_never_replaced_is_a_timeout_naming_the_call() {
    let started = Instant::now();
    let results = run_world(
        3,
        |_, c| {
            c.robust = true;
            c.connect_timeout = Duration::from_secs(2);
        },
        |c: &mut Communicator| {
            let mut v = vec![1.0f32; 1000];
            c.allreduce(&mut v, Op::Sum)?;
            if c.rank() == 2 {
                // Cancelled, it leaves as lost (at finalize), and no replacement comes.
                c.cancel_handle().cancel("the test");
                return Ok(());
            }
            c.allreduce(&mut v, Op::Sum)
        },
    );
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    for (rank, r) in results.iter().enumerate().take(2) {
        match r {
            Err(Error::Timeout { what, .. }) => {
                assert!(what.starts_with("allreduce(tree) #1 of version 0, 4000 bytes"), "rank {rank}: {what}");
                assert!(what.contains("re-linking after a lost peer"), "rank {rank}: {what}");
            }
            other => panic!("rank {rank}: expected a timeout naming the call, got {other:?}"),
        }
    }
}

/// In robust mode `finalize` waits for every worker to reach it (a worker lost meanwhile is
/// replaced), so a worker that reaches it while the others call on (a loop that ran fewer
/// times on one rank) is a call mismatch: every rank reports it at once, naming finalize,
/// whichever rank it is and whatever the call (a small allreduce on the flat tree of a world
/// of 4, a large one on the ring), long before the call timeout.
#[test]
fn a_worker_at_finalize_while_the_others_call_on_is_a_mismatch_everywhere() {
    for early in 0..4 {
        for floats in [1000, 1 << 19] {
            let started = Instant::now();
            let results = run_world(
                4,
                |_, c| {
                    c.robust = true;
                    c.timeout = Duration::from_secs(60);
                },
                move |c: &mut Communicator| {
                    let mut v = vec![1.0f32; floats];
                    c.allreduce(&mut v, Op::Sum)?;
                    if c.rank() == early {
                        return Ok(());
                    }
                    c.allreduce(&mut v, Op::Sum)
                },
            );
            let took = started.elapsed();
            assert!(took < Duration::from_secs(10), "rank {early} early, {floats} floats: took {took:?}");
            for (rank, r) in results.iter().enumerate() {
                assert!(
                    matches!(r, Err(e @ Error::Mismatch(_)) if e.to_string().contains("finalize")),
                    "rank {early} early, {floats} floats: rank {rank}: {r:?}"
                );
            }
        }
    }
}

/// The calls a rank can be in, for the test below: each opens with a pass on the one tree
/// every call's first pass runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    Barrier,
    SmallAllreduce,
    RingAllreduce,
    Broadcast,
    Allgather,
}

impl Call {
    const ALL: [Call; 5] = [Call::Barrier, Call::SmallAllreduce, Call::RingAllreduce, Call::Broadcast, Call::Allgather];

    /// What the call's declaration says, as an error message names it.
    fn name(self) -> &'static str {
        match self {
            Call::Barrier => "barrier",
            Call::SmallAllreduce => "allreduce(tree)",
            Call::RingAllreduce => "allreduce(ring)",
            Call::Broadcast => "broadcast",
            Call::Allgather => "allgather",
        }
    }

    fn make(self, c: &mut Communicator) -> warren::Result<()> {
        match self {
            Call::Barrier => c.barrier(),
            Call::SmallAllreduce => c.allreduce(&mut [1.0f32; 100], Op::Sum),
            Call::RingAllreduce => c.allreduce(&mut vec![1.0f32; 1 << 19], Op::Sum),
            Call::Broadcast => c.broadcast(&mut vec![7u8; 100], 2),
            Call::Allgather => c.allgather(&[1, 2, 3]).map(|_| ()),
        }
    }
}

/// Ranks making different calls (one rank's loop ran differently) find the mismatch at once,
/// whatever the two calls and whichever rank differs, in a world of 4, where a small
/// allreduce runs on a flat tree, and of 6: before every call's first pass ran on that tree, a barrier
/// (or a broadcast, an allgather, a ring's agreement) on the heap tree and a small allreduce
/// on the flat one never met, and the ranks waited out the call timeout.
#[test]
fn ranks_making_different_calls_find_the_mismatch_at_once_whatever_the_calls() {
    for odd in Call::ALL {
        for others in Call::ALL {
            if odd == others {
                continue;
            }
            for (world, odd_rank) in [(4, 0), (4, 3), (6, 0), (6, 5)] {
                let started = Instant::now();
                let results = run_world(
                    world,
                    |_, c| c.timeout = Duration::from_secs(60),
                    move |c: &mut Communicator| if c.rank() == odd_rank { odd.make(c) } else { others.make(c) },
                );
                let took = started.elapsed();
                let case = format!("world {world}: rank {odd_rank} in {odd:?}, the others in {others:?}");
                assert!(took < Duration::from_secs(10), "{case}: took {took:?}");
                for (rank, r) in results.iter().enumerate() {
                    assert!(
                        matches!(r, Err(e @ Error::Mismatch(_)) if e.to_string().contains(odd.name())),
                        "{case}: rank {rank}: {r:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_silent_peer_times_out_naming_it() {
    let results = run_world(
        2,
        |_, c| c.timeout = Duration::from_millis(700),
        |c: &mut Communicator| {
            if c.rank() == 1 {
                std::thread::sleep(Duration::from_secs(2));
                return Ok(String::new());
            }
            match c.barrier() {
                Err(Error::Timeout { what, .. }) => Ok(what),
                other => panic!("expected a timeout, got {other:?}"),
            }
        },
    );
    let what = results[0].as_ref().unwrap();
    assert!(what.contains("rank 1"), "{what}");
}

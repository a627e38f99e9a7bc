//! The parameter server over real sockets, in process: sync training by trainer threads
//! against two servers gives the values worked out by hand whatever the arrival order; SSP
//! holds a fast trainer back; bad input (a wrong table, a key on the wrong server, a wrong
//! width, a garbage frame, a wrong secret) is an error to that client while the servers keep
//! serving the others. Every wait is bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use warren::Error;
use warren::ps::proto::{PullPiece, Reply, Request};
use warren::ps::{
    CheckpointPolicy, DEFAULT_LOG_SYNC, Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, PsConfig,
    PsServer, Pull, TableKind, TableSpec, sparse_server,
};
use warren::wire::auth::{PROOF_LEN, Purpose, prove};

const SECRET: &str = "ps-test-secret";

fn servers(n: usize) -> (Vec<PsServer>, Vec<String>) {
    let servers: Vec<PsServer> = (0..n)
        .map(|i| {
            let mut cfg = PsConfig::new(SECRET, i, n);
            cfg.pull_timeout = Duration::from_secs(30);
            // Every other server on one thread: the jobs below run on both kinds.
            cfg.threads = 1 + i % 2;
            PsServer::start(cfg).unwrap()
        })
        .collect();
    let uris = servers.iter().map(|s| s.uri().to_string()).collect();
    (servers, uris)
}

fn opts() -> PsClientOptions {
    PsClientOptions {
        connect_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

fn job(trainers: u32, mode: Mode) -> JobSpec {
    JobSpec {
        trainers,
        joining: Vec::new(),
        mode,
        tables: vec![
            TableSpec {
                name: "w".into(),
                kind: TableKind::Dense { len: 5 },
                init: Init::Zeros,
                optimizer: Optimizer::sgd(1.0),
            },
            TableSpec {
                name: "emb".into(),
                kind: TableKind::Sparse { width: 3, expected_rows: 0 },
                init: Init::Zeros,
                optimizer: Optimizer::sgd(0.5),
            },
        ],
    }
}

/// A pull of several tables (one round trip) fills each buffer as that table's own pull
/// does; bad input in any of its pulls fails before anything is sent.
#[test]
fn a_pull_of_several_tables_fills_each_buffer_as_its_own_pull_would() {
    let (_servers, uris) = servers(2);
    let mut c = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    c.define(&job(1, Mode::Sync)).unwrap();
    let keys: Vec<u64> = (0..40).map(|k| k * 7919).collect();
    let values: Vec<f32> = (0..keys.len() * 3).map(|i| i as f32).collect();
    c.push(&[
        Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0, 2.0, 3.0, 4.0, 5.0] },
        Grad::Sparse { table: "emb".into(), keys: keys.clone(), values },
    ])
    .unwrap();
    let (mut rows, mut w, mut some) = (vec![f32::NAN; keys.len() * 3], vec![f32::NAN; 4], vec![f32::NAN; 6]);
    c.pull(&mut [
        Pull::Sparse { table: "emb", keys: &keys, out: &mut rows },
        Pull::Dense { table: "w", range: 1..5, out: &mut w },
        Pull::Sparse { table: "emb", keys: &[keys[9], keys[2]], out: &mut some },
    ])
    .unwrap();
    let each = c.pull_sparse("emb", &keys).unwrap();
    assert!(each.iter().any(|v| *v != 0.0), "the push moved the rows");
    assert_eq!(rows, each);
    assert_eq!(w, c.pull_dense("w", 1..5).unwrap());
    assert_eq!(w, vec![-2.0, -3.0, -4.0, -5.0], "SGD with rate 1 from zeros");
    assert_eq!(some, [&each[27..30], &each[6..9]].concat());

    let held: usize = c.status().unwrap().iter().map(|s| s.rows).sum();
    assert_eq!(held, keys.len());
    let (mut fresh, mut wide) = (vec![0f32; 3], vec![0f32; 6]);
    let e = c
        .pull(&mut [
            Pull::Sparse { table: "emb", keys: &[1 << 50], out: &mut fresh },
            Pull::Dense { table: "w", range: 3..9, out: &mut wide },
        ])
        .unwrap_err();
    assert!(e.to_string().contains("outside table \"w\" of 5"), "{e}");
    let e = c.pull(&mut [Pull::Dense { table: "emb", range: 0..3, out: &mut fresh }]).unwrap_err();
    assert!(e.to_string().contains("is sparse: pull it by keys"), "{e}");
    let e = c.pull(&mut [Pull::Sparse { table: "emb", keys: &[1 << 50], out: &mut wide }]).unwrap_err();
    assert!(e.to_string().contains("a buffer of 6 floats for 1 rows of width 3"), "{e}");
    let after: usize = c.status().unwrap().iter().map(|s| s.rows).sum();
    assert_eq!(after, held, "nothing was sent: no row was created for key 1 << 50");
}

/// A job with one sparse table of random initial rows, for bagged pulls and pushes.
fn bag_job() -> JobSpec {
    JobSpec {
        trainers: 1,
        joining: Vec::new(),
        mode: Mode::Sync,
        tables: vec![TableSpec {
            name: "emb".into(),
            kind: TableKind::Sparse { width: 3, expected_rows: 0 },
            init: Init::Uniform { scale: 0.5, seed: 7 },
            optimizer: Optimizer::sgd(0.25),
        }],
    }
}

/// A bagged pull gives each bag the sum of its rows, as the rows pulled one by one summed by
/// hand give it (each server's keys of the bag from zero in key order, those sums added in
/// server order, from zero); a bagged push changes the model bit for bit as pushing each
/// key its bag's row does, over three servers, for bags with repeated keys, keys repeated
/// across bags and an empty bag. Bad bags are refused before anything is sent.
#[test]
fn a_bagged_pull_sums_its_rows_and_a_bagged_push_equals_its_rows_one_by_one() {
    let servers_of = 3;
    let (_bagged_servers, bagged_uris) = servers(servers_of);
    let (_plain_servers, plain_uris) = servers(servers_of);
    let mut bagged = PsClient::connect(&bagged_uris, SECRET, Some(0), opts()).unwrap();
    let mut plain = PsClient::connect(&plain_uris, SECRET, Some(0), opts()).unwrap();
    bagged.define(&bag_job()).unwrap();
    plain.define(&bag_job()).unwrap();
    let width = 3;
    // Bags of 0 to 6 keys out of 40, some keys twice in a bag or in two bags.
    let lens = [3usize, 6, 0, 1, 5, 2, 6, 4];
    let ends: Vec<u64> = lens
        .iter()
        .scan(0u64, |at, &n| {
            *at += n as u64;
            Some(*at)
        })
        .collect();
    for step in 0..3u64 {
        let keys: Vec<u64> =
            (0..*ends.last().unwrap()).map(|i| warren::ps::mix(i * 31 + step * 7) % 40 * 1_000_003).collect();
        let mut sums = vec![f32::NAN; lens.len() * width];
        bagged.pull(&mut [Pull::SparseBags { table: "emb", keys: &keys, ends: &ends, out: &mut sums }]).unwrap();
        let rows = plain.pull_sparse("emb", &keys).unwrap();
        assert_eq!(bagged.pull_sparse("emb", &keys).unwrap(), rows, "step {step}: the same model");
        let mut start = 0;
        for (b, &end) in ends.iter().enumerate() {
            let mut want = vec![0f32; width];
            for s in 0..servers_of {
                let mine: Vec<usize> =
                    (start..end as usize).filter(|&i| sparse_server(keys[i], servers_of) == s).collect();
                if mine.is_empty() {
                    continue;
                }
                let mut part = vec![0f32; width];
                for i in mine {
                    part.iter_mut().zip(&rows[i * width..(i + 1) * width]).for_each(|(a, v)| *a += v);
                }
                want.iter_mut().zip(&part).for_each(|(a, v)| *a += v);
            }
            let got = &sums[b * width..(b + 1) * width];
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "step {step} bag {b}"
            );
            start = end as usize;
        }
        assert_eq!(&sums[2 * width..3 * width], &[0.0; 3], "an empty bag sums to zeros");

        let bag_rows: Vec<f32> = (0..lens.len() * width).map(|i| (i as f32 - 7.5) * 0.125 + step as f32).collect();
        let per_key: Vec<f32> = (0..lens.len())
            .flat_map(|b| std::iter::repeat_n(&bag_rows[b * width..(b + 1) * width], lens[b]).flatten().copied())
            .collect();
        bagged
            .push(&[Grad::SparseBags { table: "emb".into(), keys: keys.clone(), ends: ends.clone(), values: bag_rows }])
            .unwrap();
        plain.push(&[Grad::Sparse { table: "emb".into(), keys: keys.clone(), values: per_key }]).unwrap();
        let (after_bagged, after_plain) =
            (bagged.pull_sparse("emb", &keys).unwrap(), plain.pull_sparse("emb", &keys).unwrap());
        assert_ne!(after_plain, rows, "step {step}: the push moved the rows");
        assert_eq!(
            after_bagged.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            after_plain.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "step {step}"
        );
    }

    let held: usize = bagged.status().unwrap().iter().map(|s| s.rows).sum();
    let mut out = vec![0f32; 2 * width];
    let e = bagged
        .pull(&mut [Pull::SparseBags { table: "emb", keys: &[1 << 50, 3], ends: &[1], out: &mut out[..width] }])
        .unwrap_err();
    assert!(e.to_string().contains("bags of table \"emb\": the last bag ends at key 1, but there are 2 keys"), "{e}");
    let e = bagged
        .pull(&mut [Pull::SparseBags { table: "emb", keys: &[1 << 50, 3], ends: &[2, 1], out: &mut out }])
        .unwrap_err();
    assert!(e.to_string().contains("bag 1 ends at key 1, before bag 0 ends (at 2)"), "{e}");
    let e = bagged
        .pull(&mut [Pull::SparseBags { table: "emb", keys: &[1 << 50, 3], ends: &[2], out: &mut out }])
        .unwrap_err();
    assert!(e.to_string().contains("bags of table \"emb\": a buffer of 6 floats for 1 bags of width 3"), "{e}");
    let grad = Grad::SparseBags { table: "emb".into(), keys: vec![1 << 50], ends: vec![1], values: vec![1.0; 6] };
    let e = bagged.push(&[grad]).unwrap_err();
    assert!(e.to_string().contains("bags of table \"emb\": a gradient of 6 floats for 1 bags of width 3"), "{e}");
    let after: usize = bagged.status().unwrap().iter().map(|s| s.rows).sum();
    assert_eq!(after, held, "nothing was sent: no row was created for key 1 << 50");

    // The server refuses bad bags a client sends it anyway, and keeps serving.
    let mut s = raw(&bagged_uris[0]);
    assert!(matches!(ask(&mut s, &Request::Hello { trainer: None }), Reply::Hello { .. }));
    let on_0: u64 = (0..).find(|&k| sparse_server(k, servers_of) == 0).unwrap();
    let piece = PullPiece::SparseBags { table: "emb".into(), keys: vec![on_0], ends: vec![3] };
    let m = error_text(ask(&mut s, &Request::Pull { pieces: vec![piece] }));
    assert!(m.contains("the last bag ends at key 3, but there are 1 keys"), "{m}");
    assert!(matches!(ask(&mut s, &Request::Status), Reply::Status { .. }));
    bagged.leave().unwrap();
}

#[test]
fn sync_training_over_two_servers_gives_the_sums_worked_out_by_hand() {
    let (_servers, uris) = servers(2);
    let trainers = 3u32;
    let steps = 4u64;
    let handles: Vec<_> = (0..trainers)
        .map(|t| {
            let uris = uris.clone();
            thread::spawn(move || {
                let mut c = PsClient::connect(&uris, SECRET, Some(t), opts()).unwrap();
                c.define(&job(trainers, Mode::Sync)).unwrap();
                let mut seen = Vec::new();
                for step in 0..steps {
                    // Vary arrival order: later trainers sleep less on even steps.
                    thread::sleep(Duration::from_millis(((t as u64 + step) % 3) * 15));
                    seen.push(c.pull_dense("w", 0..5).unwrap());
                    let rows = c.pull_sparse("emb", &[7, 1 << 40]).unwrap();
                    assert_eq!(rows.len(), 6);
                    c.push(&[
                        Grad::Dense { table: "w".into(), offset: 0, values: vec![(t + 1) as f32; 5] },
                        Grad::Sparse { table: "emb".into(), keys: vec![7, 7], values: vec![1.0; 6] },
                    ])
                    .unwrap();
                }
                c.leave().unwrap();
                seen
            })
        })
        .collect();
    let seen: Vec<Vec<Vec<f32>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Every step subtracts 1 + 2 + 3 = 6 from each element (SGD, lr 1); a trainer pulling at
    // step n sees exactly n steps applied, whoever arrived first.
    for per_trainer in &seen {
        for (n, w) in per_trainer.iter().enumerate() {
            assert_eq!(w, &vec![-6.0 * n as f32; 5], "step {n}");
        }
    }
    let mut observer = PsClient::connect(&uris, SECRET, None, opts()).unwrap();
    assert_eq!(observer.pull_dense("w", 1..4).unwrap(), vec![-24.0; 3]);
    // Key 7 gets 2 rows of ones from each of 3 trainers per step: -0.5 * 6 * 4 steps.
    assert_eq!(observer.pull_sparse("emb", &[7]).unwrap(), vec![-12.0; 3]);
    let status = observer.status().unwrap();
    assert!(status.iter().all(|s| s.clocks == vec![steps; 3] && s.applied == steps), "{status:?}");
}

#[test]
fn ssp_holds_a_fast_trainer_back_until_the_slow_one_is_within_k() {
    let (_servers, uris) = servers(2);
    let mut fast = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    fast.define(&job(2, Mode::Ssp { staleness: 1 })).unwrap();
    let mut slow = PsClient::connect(&uris, SECRET, Some(1), opts()).unwrap();
    let g = [Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0; 5] }];
    fast.push(&g).unwrap();
    assert_eq!(fast.pull_dense("w", 0..5).unwrap(), vec![-1.0; 5], "one step ahead is allowed");
    fast.push(&g).unwrap();
    let go = Arc::new(Barrier::new(2));
    let slow_thread = {
        let go = go.clone();
        thread::spawn(move || {
            go.wait();
            thread::sleep(Duration::from_millis(300));
            slow.push(&[Grad::Dense { table: "w".into(), offset: 0, values: vec![10.0; 5] }]).unwrap();
        })
    };
    go.wait();
    let started = Instant::now();
    let w = fast.pull_dense("w", 0..5).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250), "the pull waited for the slow trainer");
    assert_eq!(w, vec![-12.0; 5], "and saw its push");
    slow_thread.join().unwrap();
}

/// A raw, authenticated connection to `uri`.
fn raw(uri: &str) -> TcpStream {
    let mut s = TcpStream::connect(uri).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&warren::wire::preamble()).unwrap();
    let mut challenge = [0u8; 8 + PROOF_LEN];
    s.read_exact(&mut challenge).unwrap();
    s.write_all(&prove(SECRET.as_bytes(), Purpose::ParamServer, &challenge[8..])).unwrap();
    let mut ok = [0u8];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(ok[0], 1);
    s
}

fn ask(s: &mut TcpStream, req: &Request) -> Reply {
    s.write_all(&warren::ps::proto::encode(req)).unwrap();
    let mut frame = vec![0u8; 4];
    s.read_exact(&mut frame).unwrap();
    frame.resize(4 + u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize, 0);
    s.read_exact(&mut frame[4..]).unwrap();
    warren::ps::proto::decode(&mut frame).unwrap()
}

fn error_text(r: Reply) -> String {
    match r {
        Reply::Error { message, .. } => message,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn bad_input_is_an_error_to_that_client_and_the_servers_keep_serving() {
    let (_servers, uris) = servers(2);
    let mut good = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    good.define(&job(2, Mode::Async)).unwrap();
    let on_1: u64 = (0..).find(|&k| sparse_server(k, 2) == 1).unwrap();

    // The client refuses what it can check before sending anything.
    let e = good.pull_sparse("nope", &[1]).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("nope")), "{e}");
    let e = good.pull_dense("w", 3..9).unwrap_err();
    assert!(e.to_string().contains("outside table \"w\" of 5"), "{e}");
    let e = good.push(&[Grad::Sparse { table: "emb".into(), keys: vec![1], values: vec![1.0; 2] }]).unwrap_err();
    assert!(e.to_string().contains("2 floats for 1 keys of width 3"), "{e}");
    assert_eq!(good.step(), 0, "nothing was pushed");

    // The server refuses what a client sends it anyway, naming what is wrong.
    // (As trainer 1: a hello as trainer 0 would supersede the good client's connection.)
    let mut s = raw(&uris[0]);
    assert!(matches!(ask(&mut s, &Request::Hello { trainer: Some(1) }), Reply::Hello { index: 0, .. }));
    let pull = |p: PullPiece| Request::Pull { pieces: vec![p] };
    let m = error_text(ask(&mut s, &pull(PullPiece::Sparse { table: "emb".into(), keys: vec![on_1] })));
    assert!(m.contains(&format!("key {on_1}")) && m.contains("belongs to server 1"), "{m}");
    let m = error_text(ask(&mut s, &pull(PullPiece::Dense { table: "w".into(), start: 0, end: 5 })));
    assert!(m.contains("not on server 0"), "{m}");
    let m = error_text(ask(&mut s, &pull(PullPiece::Dense { table: "missing".into(), start: 0, end: 1 })));
    assert!(m.contains("no table named \"missing\""), "{m}");
    let wrong_width = Grad::Sparse { table: "emb".into(), keys: vec![0], values: vec![1.0; 4] };
    let m = error_text(ask(&mut s, &Request::Push { step: 0, grads: vec![wrong_width].into() }));
    assert!(m.contains("4 floats for 1 keys of width 3"), "{m}");
    let m = error_text(ask(&mut s, &Request::Push { step: 3, grads: vec![].into() }));
    assert!(m.contains("next step here is 0"), "{m}");
    // The connection still works after those.
    assert!(matches!(ask(&mut s, &Request::Status), Reply::Status { .. }));

    // A garbage frame: an error reply, then that connection is closed.
    let mut g = raw(&uris[1]);
    g.write_all(&[9, 0, 0, 0]).unwrap();
    g.write_all(b"not json!").unwrap();
    let mut buf = Vec::new();
    let _ = g.read_to_end(&mut buf);
    assert!(String::from_utf8_lossy(&buf).contains("malformed"), "{buf:?}");

    // A wrong secret is refused, naming the server.
    let e = PsClient::connect(&uris, "wrong", Some(0), opts()).unwrap_err();
    assert!(matches!(&e, Error::Auth(m) if m.contains("ps server 0")), "{e}");
    // Servers given in the wrong order are noticed.
    let swapped = vec![uris[1].clone(), uris[0].clone()];
    let e = PsClient::connect(&swapped, SECRET, None, opts()).unwrap_err();
    assert!(e.to_string().contains("says it is server 1 of 2"), "{e}");

    // The good client was served throughout.
    good.push(&[Grad::Dense { table: "w".into(), offset: 0, values: vec![2.0; 5] }]).unwrap();
    assert_eq!(good.pull_dense("w", 0..5).unwrap(), vec![-2.0; 5]);
}

#[test]
fn a_server_without_a_thread_is_refused_saying_so() {
    let mut cfg = PsConfig::new(SECRET, 0, 1);
    cfg.threads = 0;
    let e = PsServer::start(cfg).unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("at least one thread")), "{e}");
}

#[test]
fn a_pull_that_waits_too_long_fails_naming_the_slow_trainers() {
    let mut cfg = PsConfig::new(SECRET, 0, 1);
    cfg.pull_timeout = Duration::from_millis(300);
    let server = PsServer::start(cfg).unwrap();
    let uris = vec![server.uri().to_string()];
    let mut c = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    c.define(&job(3, Mode::Sync)).unwrap();
    c.push(&[]).unwrap();
    let e = c.pull_dense("w", 0..1).unwrap_err();
    assert!(matches!(&e, Error::Timeout { what, .. } if what.contains("trainers [1, 2]")), "{e}");
}

fn dense(v: f32) -> Vec<Grad> {
    vec![Grad::Dense { table: "w".into(), offset: 0, values: vec![v; 5] }]
}

/// A fresh checkpoint directory (tagged `tag`) and a function starting server 0 of 1 on a
/// port (0: any) that checkpoints there every `every_steps` steps.
fn checkpointed(tag: &str, every_steps: u64) -> (std::path::PathBuf, impl Fn(u16) -> PsServer) {
    let dir = crate::common::temp_dir(&format!("ps-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let policy = CheckpointPolicy { dir: dir.clone(), every_steps, every: Duration::ZERO, log_sync: DEFAULT_LOG_SYNC };
    let start = move |port: u16| {
        let mut cfg = PsConfig::new(SECRET, 0, 1);
        cfg.port = port;
        cfg.checkpoint = Some(policy.clone());
        PsServer::start(cfg).unwrap()
    };
    (dir, start)
}

fn port_of(server: &PsServer) -> u16 {
    server.uri().rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn a_restarted_server_loads_its_checkpoint_and_sync_trainers_push_again_what_it_lost() {
    let (dir, start) = checkpointed("restart", 2);
    let server = start(0);
    let port = port_of(&server);
    let uris = vec![server.uri().to_string()];
    let mut a = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    a.define(&job(2, Mode::Sync)).unwrap();
    let mut b = PsClient::connect(&uris, SECRET, Some(1), opts()).unwrap();
    for _ in 0..5 {
        a.push(&dense(1.0)).unwrap();
        b.push(&dense(2.0)).unwrap();
    }
    server.stop();
    // Every step, the two pushes sum to 3 and SGD (lr 1) subtracts it: nothing may be lost
    // or applied twice across the restart.
    let server = start(port);
    let restored = server.status();
    assert!(restored.applied >= 2 && restored.applied <= 5, "a checkpoint was restored: {restored:?}");
    let trainers: Vec<_> = [(a, 1.0f32), (b, 2.0)]
        .into_iter()
        .map(|(mut c, g)| {
            thread::spawn(move || {
                assert_eq!(c.pull_dense("w", 0..5).unwrap(), vec![-15.0; 5]);
                c.push(&dense(g)).unwrap();
                assert_eq!(c.pull_dense("w", 0..5).unwrap(), vec![-18.0; 5]);
                c.leave().unwrap();
            })
        })
        .collect();
    for t in trainers {
        t.join().unwrap();
    }
    assert_eq!(server.status().clocks, vec![6, 6]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_async_trainer_loses_no_acknowledged_push_across_a_restart() {
    let (dir, start) = checkpointed("lost", 3);
    let server = start(0);
    let port = port_of(&server);
    let mut a = PsClient::connect(&[server.uri().to_string()], SECRET, Some(0), opts()).unwrap();
    a.define(&job(1, Mode::Async)).unwrap();
    for _ in 0..4 {
        a.push(&dense(1.0)).unwrap();
    }
    server.stop();
    let server = start(port);
    // The checkpoint at step 3 holds three updates and the log the fourth: none is lost.
    assert_eq!(a.pull_dense("w", 0..5).unwrap(), vec![-4.0; 5]);
    a.push(&dense(1.0)).unwrap();
    assert_eq!(a.lost_updates(), 0);
    assert_eq!(server.status().lost, 0);
    assert_eq!(a.pull_dense("w", 0..5).unwrap(), vec![-5.0; 5]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An async push counts at a server as it arrives (one round trip). A trainer that dies with
/// its push counted at one server only is replaced by one that finds the other server a step
/// behind: it skips that server's clock forward and counts the step's update there as lost,
/// as after a server's restart.
#[test]
fn an_async_replacement_skips_the_servers_its_predecessors_last_push_missed() {
    let (servers, uris) = servers(2);
    let mut dying: Vec<TcpStream> = uris.iter().map(|u| raw(u)).collect();
    for s in &mut dying {
        assert!(matches!(ask(s, &Request::Hello { trainer: Some(0) }), Reply::Hello { .. }));
        assert_eq!(ask(s, &Request::Define { job: job(1, Mode::Async) }), Reply::Done);
    }
    let push =
        Request::Push { step: 0, grads: vec![Grad::Dense { table: "w".into(), offset: 0, values: vec![1.0] }].into() };
    assert!(matches!(ask(&mut dying[0], &push), Reply::Pushed { .. }), "counted on arrival, no commit");
    assert_eq!(servers[0].status().clocks, vec![1]);
    assert_eq!(servers[1].status().clocks, vec![0]);
    drop(dying);

    let mut c = PsClient::connect(&uris, SECRET, Some(0), opts()).unwrap();
    assert_eq!(c.lost_updates(), 1);
    assert_eq!(c.step(), 1);
    assert_eq!(servers.iter().map(|s| s.status().clocks).collect::<Vec<_>>(), vec![vec![1], vec![1]]);
    assert_eq!(servers[1].status().lost, 1);
    c.push(&dense(1.0)).unwrap();
    assert_eq!(c.pull_dense("w", 0..5).unwrap(), vec![-2.0, -1.0, -1.0, -1.0, -1.0]);
}

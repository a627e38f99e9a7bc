//! `warren bench ps`: dense push + pull of a whole model through parameter servers (threads
//! of this process, real loopback TCP connections), `T` trainers x `S` servers, against the
//! loopback TCP stream limit measured in the same run. Prints one JSON line.
//!
//! A step of a trainer pulls the whole dense table and pushes a gradient of the whole table,
//! so it moves `2 x bytes`; the rate is the bytes all trainers moved per second of wall time.
//! The stream limit is one TCP connection over 127.0.0.1 writing and reading `bytes`-sized
//! buffers as fast as it can (the same kernel copies, no encoding, no server work).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::Args;
use warren::Error;
use warren::ps::{
    Grad, Init, JobSpec, Mode, Optimizer, PsClient, PsClientOptions, PsConfig, PsServer, TableKind, TableSpec,
};

/// Arguments of `warren bench ps`.
#[derive(Args, Clone)]
pub struct BenchPsArgs {
    /// Model size in bytes (one dense table of `f32`).
    #[arg(long, default_value_t = 64 << 20)]
    bytes: usize,
    /// Trainer threads.
    #[arg(long, default_value_t = 2)]
    trainers: u32,
    /// Parameter servers (threads of this process).
    #[arg(long, default_value_t = 2)]
    servers: usize,
    /// Timed steps per trainer (each a pull and a push of the whole model).
    #[arg(long, default_value_t = 5)]
    steps: u64,
    /// Untimed steps first.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// sync or async.
    #[arg(long, default_value = "async", value_parser = ["sync", "async"])]
    mode: String,
}

/// Runs the benchmark.
pub fn run(a: &BenchPsArgs) -> warren::Result<u8> {
    if a.bytes < 4 || a.trainers == 0 || a.servers == 0 || a.steps == 0 {
        return Err(Error::Config("--bytes must be at least 4, --trainers, --servers and --steps at least 1".into()));
    }
    let moved = 2.0 * a.bytes as f64 * a.steps as f64 * f64::from(a.trainers);
    let loopback = loopback_rate(a.bytes, (2 * a.steps * u64::from(a.trainers)) as usize)?;
    let elapsed = ps_elapsed(a)?;
    let rate = moved / elapsed;
    println!(
        "{{\"bench\":\"ps_dense\",\"bytes\":{},\"trainers\":{},\"servers\":{},\"mode\":\"{}\",\"steps\":{},\
         \"step_s\":{:.4},\"ps_bytes_per_s\":{:.0},\"loopback_bytes_per_s\":{:.0},\"ratio\":{:.3}}}",
        a.bytes,
        a.trainers,
        a.servers,
        a.mode,
        a.steps,
        elapsed / a.steps as f64,
        rate,
        loopback,
        rate / loopback
    );
    Ok(0)
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

/// Bytes per second of one TCP stream over 127.0.0.1 sending `rounds` buffers of `bytes`
/// (after one untimed).
fn loopback_rate(bytes: usize, rounds: usize) -> warren::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("binding a loopback socket"))?;
    let addr = listener.local_addr().map_err(io("reading the loopback address"))?;
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let buf = vec![1u8; bytes];
        for _ in 0..=rounds {
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let (mut r, _) = listener.accept().map_err(io("accepting the loopback connection"))?;
    let mut buf = vec![0u8; bytes];
    r.read_exact(&mut buf).map_err(io("reading the loopback stream"))?;
    let started = Instant::now();
    for _ in 0..rounds {
        r.read_exact(&mut buf).map_err(io("reading the loopback stream"))?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    sender
        .join()
        .map_err(|_| Error::Protocol("the loopback sender panicked".into()))?
        .map_err(io("writing the loopback stream"))?;
    Ok((bytes * rounds) as f64 / elapsed)
}

/// Seconds the timed steps of every trainer took (wall time, all trainers together).
fn ps_elapsed(a: &BenchPsArgs) -> warren::Result<f64> {
    let secret = "warren-bench-ps";
    let servers: Vec<PsServer> =
        (0..a.servers).map(|i| PsServer::start(PsConfig::new(secret, i, a.servers))).collect::<warren::Result<_>>()?;
    let uris: Vec<String> = servers.iter().map(|s| s.uri().to_string()).collect();
    let len = (a.bytes / 4) as u64;
    let job = JobSpec {
        trainers: a.trainers,
        mode: Mode::parse(&a.mode, 0)?,
        tables: vec![TableSpec {
            name: "w".into(),
            kind: TableKind::Dense { len },
            init: Init::Zeros,
            optimizer: Optimizer::sgd(0.001),
        }],
    };
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..a.trainers {
        let (uris, job, tx, a) = (uris.clone(), job.clone(), tx.clone(), a.clone());
        std::thread::spawn(move || {
            let _ = tx.send(trainer(t, &uris, secret, &job, &a));
        });
    }
    // Each trainer's calls have deadlines; this wait too.
    let mut spans = Vec::new();
    for _ in 0..a.trainers {
        let span = rx.recv_timeout(Duration::from_secs(1800)).map_err(|_| Error::Timeout {
            what: "the benchmark's trainers".into(),
            after: Duration::from_secs(1800),
        })??;
        spans.push(span);
    }
    let first = spans.iter().map(|s| s.0).min().expect("at least one trainer");
    let last = spans.iter().map(|s| s.1).max().expect("at least one trainer");
    let elapsed = (last - first).as_secs_f64();
    drop(servers);
    Ok(elapsed)
}

/// Trainer `t`: untimed steps, then the timed ones; returns when they started and ended.
fn trainer(
    t: u32,
    uris: &[String],
    secret: &str,
    job: &JobSpec,
    a: &BenchPsArgs,
) -> warren::Result<(Instant, Instant)> {
    let mut c = PsClient::connect(uris, secret, Some(t), PsClientOptions::default())?;
    c.define(job)?;
    let len = (a.bytes / 4) as u64;
    let grad = [Grad::Dense { table: "w".into(), offset: 0, values: vec![1e-3; len as usize] }];
    let mut model = vec![0f32; len as usize];
    let mut step = |c: &mut PsClient| -> warren::Result<()> {
        c.pull_dense_into("w", 0..len, &mut model)?;
        std::hint::black_box(&model);
        c.push(&grad)
    };
    for _ in 0..a.warmup {
        step(&mut c)?;
    }
    let started = Instant::now();
    for _ in 0..a.steps {
        step(&mut c)?;
    }
    let ended = Instant::now();
    c.leave()?;
    Ok((started, ended))
}

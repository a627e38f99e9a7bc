//! Loopback TCP references for `warren bench ps`, measured in the same run as the parameter
//! servers: what the kernel's copies alone cost, with no encoding and no server work.
//!
//! - [`stream_rate`]: one TCP stream over 127.0.0.1, as fast as it goes (the dense model's
//!   reference).
//! - [`exchange`]: the sparse model's traffic, byte for byte and connection for connection:
//!   every trainer thread connected to every server thread; a step sends each server its
//!   share of the pull request, reads the reply, sends the push, reads an acknowledgement.
//!   The servers echo fixed sizes and do nothing else. Its wall and CPU time per step are a
//!   floor for any design that moves these bytes between threads over loopback TCP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use warren::Error;

/// No read or write of a reference waits longer than this.
const DEADLINE: Duration = Duration::from_secs(60);

fn io(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

/// CPU seconds (user and system, all threads) this process has used so far.
pub fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Bytes per second of one TCP stream over 127.0.0.1 sending `rounds` buffers of `bytes`
/// (after one untimed).
pub fn stream_rate(bytes: usize, rounds: usize) -> warren::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("binding a loopback socket"))?;
    let addr = listener.local_addr().map_err(io("reading the loopback address"))?;
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_write_timeout(Some(DEADLINE))?;
        let buf = vec![1u8; bytes];
        for _ in 0..=rounds {
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut r = accept_by(&listener).map_err(io("accepting the loopback connection"))?;
    r.set_read_timeout(Some(DEADLINE)).map_err(io("setting a loopback deadline"))?;
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

/// The bytes one trainer sends to and gets from one server in a step.
#[derive(Clone, Copy, Debug)]
pub struct StepBytes {
    /// The pull request (the keys).
    pub request: usize,
    /// The pull reply (the rows).
    pub reply: usize,
    /// The push (keys and gradient rows).
    pub push: usize,
}

/// Wall and CPU seconds per step of an [`exchange`].
#[derive(Clone, Copy, Debug)]
pub struct PerStep {
    /// Wall time, from the first trainer's first timed step to the last trainer's end.
    pub wall_s: f64,
    /// CPU time of the whole process over the same span.
    pub cpu_s: f64,
}

/// `trainers` x `servers` loopback connections moving `bytes` per trainer and server each
/// step, `steps` timed steps after one untimed.
pub fn exchange(trainers: usize, servers: usize, bytes: StepBytes, steps: usize) -> warren::Result<PerStep> {
    let listeners: Vec<TcpListener> = (0..servers)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(io("binding a loopback socket")))
        .collect::<warren::Result<_>>()?;
    let addrs: Vec<_> = listeners
        .iter()
        .map(|l| l.local_addr().map_err(io("reading the loopback address")))
        .collect::<Result<_, _>>()?;
    let mut echoes = Vec::new();
    for listener in listeners {
        echoes.push(std::thread::spawn(move || -> std::io::Result<()> {
            let conns: Vec<TcpStream> = (0..trainers).map(|_| accept_by(&listener)).collect::<Result<_, _>>()?;
            let handlers: Vec<_> =
                conns.into_iter().map(|c| std::thread::spawn(move || echo(c, bytes, steps))).collect();
            handlers.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("panicked"))))
        }));
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(trainers + 1));
    let clients: Vec<_> = (0..trainers)
        .map(|_| {
            let (addrs, barrier) = (addrs.clone(), barrier.clone());
            std::thread::spawn(move || -> std::io::Result<Instant> {
                let request = vec![1u8; bytes.request];
                let push = vec![2u8; bytes.push];
                let mut reply = vec![0u8; bytes.reply.max(8)];
                let mut step = |conns: &mut [TcpStream]| -> std::io::Result<()> {
                    conns.iter_mut().try_for_each(|c| c.write_all(&request))?;
                    conns.iter_mut().try_for_each(|c| c.read_exact(&mut reply[..bytes.reply]))?;
                    conns.iter_mut().try_for_each(|c| c.write_all(&push))?;
                    conns.iter_mut().try_for_each(|c| c.read_exact(&mut reply[..8]))
                };
                let warmed = addrs
                    .iter()
                    .map(connect)
                    .collect::<std::io::Result<Vec<_>>>()
                    .and_then(|mut conns| step(&mut conns).map(|()| conns));
                // The main thread waits here for every trainer, failed or not.
                barrier.wait();
                let mut conns = warmed?;
                for _ in 0..steps {
                    step(&mut conns)?;
                }
                Ok(Instant::now())
            })
        })
        .collect();
    barrier.wait();
    let (started, cpu_started) = (Instant::now(), process_cpu_s());
    let mut ended = started;
    for c in clients {
        let end = c
            .join()
            .map_err(|_| Error::Protocol("a loopback trainer panicked".into()))?
            .map_err(io("exchanging over loopback"))?;
        ended = ended.max(end);
    }
    let cpu = process_cpu_s() - cpu_started;
    for e in echoes {
        e.join()
            .map_err(|_| Error::Protocol("a loopback server panicked".into()))?
            .map_err(io("echoing over loopback"))?;
    }
    let per = |s: f64| s / steps as f64;
    Ok(PerStep { wall_s: per((ended - started).as_secs_f64()), cpu_s: per(cpu) })
}

/// A connection accepted within [`DEADLINE`]: a peer that failed to connect fails the
/// wait, it does not hang it.
fn accept_by(listener: &TcpListener) -> std::io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + DEADLINE;
    loop {
        match listener.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false)?;
                return Ok(c);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

fn connect(addr: &std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(DEADLINE))?;
    c.set_write_timeout(Some(DEADLINE))?;
    Ok(c)
}

/// A server's side of one connection: the reply to each request, an acknowledgement of each push.
fn echo(mut c: TcpStream, bytes: StepBytes, steps: usize) -> std::io::Result<()> {
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(DEADLINE))?;
    c.set_write_timeout(Some(DEADLINE))?;
    let reply = vec![3u8; bytes.reply];
    let mut buf = vec![0u8; bytes.request.max(bytes.push)];
    for _ in 0..=steps {
        c.read_exact(&mut buf[..bytes.request])?;
        c.write_all(&reply)?;
        c.read_exact(&mut buf[..bytes.push])?;
        c.write_all(&[0u8; 8])?;
    }
    Ok(())
}

//! The in-memory transport (`WARREN_TRANSPORT=mem`): workers as threads of one process, linked
//! through queues instead of sockets, with the real tracker and the real robust protocol. The
//! same result bits as TCP; a worker whose communicator goes away (its thread ends without
//! finalizing, as a killed worker's process does) is a lost peer to the others, and its
//! replacement recovers from them to the failure-free model, under any schedule of losses.

use std::sync::mpsc;
use std::thread;

use proptest::prelude::*;

use crate::common::{HARD_LIMIT, Rng, run_world, start_tracker, worker_config};
use warren::config::TransportChoice;
use warren::transport::Transport;
use warren::{Communicator, Config, Error, Op};

/// Random floats (sums depend on order) through the tree and the ring, broadcast and
/// allgather, on `n` workers: each rank's link kinds and result bits.
fn run(n: usize, transport: TransportChoice, robust: bool) -> Vec<(Vec<Transport>, Vec<Vec<u32>>)> {
    run_world(
        n,
        move |_, c| {
            c.transport = transport;
            c.robust = robust;
            c.ring_threshold = 4096;
        },
        |c: &mut Communicator| {
            let kinds = c.link_transports().into_iter().map(|(_, t)| t).collect();
            let mut rng = Rng(11 + c.rank() as u64);
            let mut out = Vec::new();
            for len in [1, 3, 1000, 1025, 70_001, 1_200_000] {
                let mut buf: Vec<f32> = (0..len).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect();
                c.allreduce(&mut buf, Op::Sum)?;
                out.push(buf.iter().map(|x| x.to_bits()).collect());
                let mut b: Vec<u8> = if c.rank() == 1 { (0..len).map(|i| i as u8).collect() } else { Vec::new() };
                c.broadcast(&mut b, 1)?;
                out.push(b.iter().map(|&x| x as u32).collect());
            }
            let gathered = c.allgather(&vec![c.rank() as u8; 5000 + c.rank()])?;
            out.push(gathered.concat().iter().map(|&x| x as u32).collect());
            Ok((kinds, out))
        },
    )
    .into_iter()
    .map(|r| r.unwrap())
    .collect()
}

#[test]
fn in_memory_links_give_the_tcp_bits() {
    for n in [2, 5] {
        let tcp = run(n, TransportChoice::Tcp, false);
        for robust in [false, true] {
            let mem = run(n, TransportChoice::Mem, robust);
            for (rank, (kinds, out)) in mem.iter().enumerate() {
                assert!(!kinds.is_empty() && kinds.iter().all(|&t| t == Transport::Mem), "rank {rank}: {kinds:?}");
                assert_eq!(out, &tcp[rank].1, "{n} workers, rank {rank} (robust {robust}): other bits than TCP");
            }
        }
    }
}

/// A worker that goes away without its call fails its peer's call with a lost peer at once,
/// not with the (long) call deadline.
#[test]
fn a_peer_gone_from_an_in_memory_link_is_a_lost_peer() {
    let results = run_world(
        2,
        |_, c| {
            c.transport = TransportChoice::Mem;
            c.robust = false;
            c.timeout = std::time::Duration::from_secs(600);
        },
        |c: &mut Communicator| {
            let mut v = vec![1.0f32; 300_000];
            c.allreduce(&mut v, Op::Sum)?;
            if c.rank() == 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                return Ok(None);
            }
            Ok(Some(c.allreduce(&mut v, Op::Sum)))
        },
    );
    match &results[0] {
        Ok(Some(Err(Error::PeerLost { rank: 1, .. }))) => {}
        other => panic!("rank 0 should have lost rank 1, got {other:?}"),
    }
}

const ITERATIONS: u32 = 12;
const MODEL: usize = 50_000;

/// One worker of a small training job: a model of `MODEL` floats moved by the sum of every
/// worker's deterministic gradient each iteration, checkpointed after each. With `die_at`,
/// the worker goes away (its communicator dropped, unfinalized) after that iteration's
/// allreduce, before its checkpoint. Returns the bits of the final model, or `None` if it died.
fn train(cfg: Config, die_at: Option<u32>) -> warren::Result<Option<Vec<u32>>> {
    let mut c = Communicator::init(cfg)?;
    let ck = c.load_checkpoint()?;
    let mut model: Vec<f32> = if ck.version == 0 {
        vec![0.0; MODEL]
    } else {
        ck.global.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    for it in ck.version..ITERATIONS {
        let mut rng = Rng(1 + u64::from(it) * 1000 + c.rank() as u64);
        let mut grad: Vec<f32> = model.iter().map(|m| (rng.next() as f32 / u64::MAX as f32 - 0.5) - 0.01 * m).collect();
        c.allreduce(&mut grad, Op::Sum)?;
        if die_at == Some(it) {
            drop(c);
            return Ok(None);
        }
        for (m, g) in model.iter_mut().zip(&grad) {
            *m += 0.1 * g;
        }
        let bytes: Vec<u8> = model.iter().flat_map(|m| m.to_le_bytes()).collect();
        c.checkpoint(&bytes, None)?;
    }
    c.finalize()?;
    Ok(Some(model.iter().map(|m| m.to_bits()).collect()))
}

/// Runs the job on `n` workers; `deaths[task]` lists, attempt by attempt, the iteration at
/// which that attempt of the task goes away (a replacement thread with the next attempt
/// number takes its place). The final models by task.
fn job(n: usize, deaths: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let tracker = start_tracker(n);
    let (tx, rx) = mpsc::channel();
    for task in 0..n {
        let cfgs: Vec<Config> = (0..=deaths.get(task).map_or(0, Vec::len) as u32)
            .map(|attempt| {
                let mut cfg = worker_config(&tracker, task);
                cfg.transport = TransportChoice::Mem;
                cfg.robust = true;
                cfg.attempt = attempt;
                cfg
            })
            .collect();
        let dies: Vec<u32> = deaths.get(task).cloned().unwrap_or_default();
        let tx = tx.clone();
        thread::spawn(move || {
            let mut r = Ok(None);
            for (attempt, cfg) in cfgs.into_iter().enumerate() {
                r = train(cfg, dies.get(attempt).copied());
                if !matches!(r, Ok(None)) {
                    break;
                }
            }
            let _ = tx.send((task, r));
        });
    }
    drop(tx);
    let mut out = vec![Vec::new(); n];
    for _ in 0..n {
        let (task, r) = rx.recv_timeout(HARD_LIMIT).expect("a worker hung past the hard limit");
        out[task] = r.unwrap_or_else(|e| panic!("task {task} failed: {e}")).expect("the last attempt finishes");
    }
    out
}

#[test]
fn a_worker_lost_on_in_memory_links_is_replaced_and_recovers_the_failure_free_model() {
    let clean = job(4, &[]);
    assert!(clean.iter().all(|m| m == &clean[0]), "the workers disagree");
    for (victim, at) in [(2, 5), (0, 0), (3, ITERATIONS - 1)] {
        let mut deaths = vec![Vec::new(); 4];
        deaths[victim] = vec![at];
        let recovered = job(4, &deaths);
        for (task, m) in recovered.iter().enumerate() {
            assert!(m == &clean[0], "task {task}, task {victim} lost at iteration {at}: not the failure-free model");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any schedule of losses (several workers, at the same or different iterations, and
    /// replacements lost again) ends with the failure-free model on every worker.
    #[test]
    fn any_kill_schedule_ends_with_the_failure_free_model(
        n in 2usize..6,
        deaths in proptest::collection::vec(proptest::collection::vec(0..ITERATIONS, 0..3), 6),
    ) {
        let deaths = &deaths[..n];
        let clean = job(n, &[]);
        let recovered = job(n, deaths);
        for (task, m) in recovered.iter().enumerate() {
            prop_assert!(m == &clean[0], "task {} ends with another model under the losses {:?}", task, deaths);
        }
    }
}

/// Many workers in one process: 64 threads join, allreduce and finish on in-memory links.
#[test]
fn sixty_four_workers_run_as_threads_of_one_process() {
    let results = run_world(
        64,
        |_, c| {
            c.transport = TransportChoice::Mem;
        },
        |c: &mut Communicator| {
            let mut v = vec![c.rank() as f64; 10_000];
            c.allreduce(&mut v, Op::Sum)?;
            Ok(v[9_999])
        },
    );
    for r in results {
        assert_eq!(r.unwrap(), (0..64).sum::<usize>() as f64);
    }
}

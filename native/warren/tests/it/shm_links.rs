//! Shared-memory links between workers on one host: chosen by host id, forced off by
//! `WARREN_TRANSPORT=tcp`, the same result bits as TCP, and a peer that goes away noticed
//! through its socket (not the call deadline). SIGKILLs of worker processes on shared-memory
//! links: `warren-cli/tests/it/recovery.rs`.

use crate::common::{Rng, run_world};
use warren::config::{ReductionOrder, TransportChoice};
use warren::transport::Transport;
use warren::{Communicator, Error, Op};

/// Random floats (sums depend on order) through the tree and the ring, robust and plain, at
/// sizes that do not divide evenly; with 4 KiB rings every transfer wraps and waits for room.
fn run(transport: TransportChoice, robust: bool) -> Vec<(Vec<Transport>, Vec<Vec<u32>>)> {
    run_world(
        4,
        move |_, c| {
            c.transport = transport;
            c.robust = robust;
            c.shm_ring = 4096;
            c.ring_threshold = 4096;
        },
        |c: &mut Communicator| {
            let kinds = c.link_transports().into_iter().map(|(_, t)| t).collect();
            let mut rng = Rng(7 + c.rank() as u64);
            let mut out = Vec::new();
            for len in [1, 3, 1000, 1025, 70_001] {
                let mut buf: Vec<f32> = (0..len).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect();
                c.allreduce(&mut buf, Op::Sum)?;
                out.push(buf.iter().map(|x| x.to_bits()).collect());
                let mut b: Vec<u8> = if c.rank() == 2 { (0..len).map(|i| i as u8).collect() } else { Vec::new() };
                c.broadcast(&mut b, 2)?;
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
fn same_host_links_are_shared_memory_and_give_the_tcp_bits() {
    let tcp = run(TransportChoice::Tcp, false);
    for (kinds, _) in &tcp {
        assert!(kinds.iter().all(|&t| t == Transport::Tcp), "WARREN_TRANSPORT=tcp: {kinds:?}");
    }
    for robust in [false, true] {
        let shm = run(TransportChoice::Auto, robust);
        for (rank, (kinds, out)) in shm.iter().enumerate() {
            assert!(!kinds.is_empty() && kinds.iter().all(|&t| t == Transport::Shm), "rank {rank}: {kinds:?}");
            assert_eq!(out, &tcp[rank].1, "rank {rank} (robust {robust}): shared memory changed the result bits");
            assert_eq!(out, &shm[0].1, "ranks disagree");
        }
    }
}

/// Workers on distinct loopback addresses are distinct hosts (the default host id includes
/// the advertised address): shared memory between 127.0.0.2's workers, TCP to 127.0.0.3's;
/// an explicit host id puts them back on one host.
#[test]
fn host_ids_pick_shared_memory_per_pair_of_workers() {
    let kinds = |same_id: bool| {
        run_world(
            4,
            move |task, c| {
                c.host = Some(if task < 2 { "127.0.0.2" } else { "127.0.0.3" }.into());
                if same_id {
                    c.host_id = Some("one-box".into());
                }
            },
            |c: &mut Communicator| {
                let mut v = vec![c.rank() as f64; 100_000];
                c.allreduce(&mut v, Op::Sum)?;
                Ok((v[99_999], c.link_transports()))
            },
        )
        .into_iter()
        .map(|r| {
            let (sum, links) = r.unwrap();
            assert_eq!(sum, 6.0, "0 + 1 + 2 + 3");
            links
        })
        .collect::<Vec<_>>()
    };
    for (rank, links) in kinds(false).iter().enumerate() {
        for &(peer, t) in links {
            let same_host = (rank < 2) == (peer < 2);
            let want = if same_host { Transport::Shm } else { Transport::Tcp };
            assert_eq!(t, want, "rank {rank} to rank {peer}");
        }
    }
    for links in kinds(true) {
        assert!(links.iter().all(|&(_, t)| t == Transport::Shm), "{links:?}");
    }
}

/// A worker that goes away (its links closed, as a killed process's are) fails its peer's
/// call on a shared-memory link with a lost peer, not with the (long) call deadline.
#[test]
fn a_peer_gone_from_a_shared_memory_link_is_a_lost_peer() {
    let results = run_world(
        2,
        |_, c| {
            c.robust = false;
            c.timeout = std::time::Duration::from_secs(600);
        },
        |c: &mut Communicator| {
            let mut v = vec![1.0f32; 300_000];
            c.allreduce(&mut v, Op::Sum)?;
            if c.link_transports()[0].1 != Transport::Shm {
                return Err(Error::Protocol("the link should be over shared memory".into()));
            }
            if c.rank() == 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                return Ok(None);
            }
            // Rank 1 leaves without this call: rank 0 waits, then learns it is gone.
            Ok(Some(c.allreduce(&mut v, Op::Sum)))
        },
    );
    match &results[0] {
        Ok(Some(Err(Error::PeerLost { rank: 1, .. }))) => {}
        other => panic!("rank 0 should have lost rank 1, got {other:?}"),
    }
}

/// Five workers' large allreduce of random floats (sums depend on order) with each rank on the
/// host `host(task)` names (a loopback address), in `order`: the result bits on every rank
/// and how many calls went through the hierarchy.
fn placed(order: ReductionOrder, robust: bool, host: fn(usize) -> &'static str) -> Vec<(u64, Vec<u32>)> {
    const LEN: usize = 100_003;
    let input = |rank: usize| -> Vec<f32> {
        let mut rng = Rng(7 + rank as u64);
        (0..LEN).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect()
    };
    run_world(
        5,
        move |task, c| {
            c.host = Some(host(task).into());
            c.ring_threshold = 4096;
            c.robust = robust;
            c.reduction_order = order;
        },
        move |c: &mut Communicator| {
            let mut buf = input(c.rank());
            c.allreduce(&mut buf, Op::Sum)?;
            let hier = c.stats().get("allreduce(hier)").map(|h| h.len()).unwrap_or(0);
            Ok((hier, buf.iter().map(|v| v.to_bits()).collect()))
        },
    )
    .into_iter()
    .map(|r| r.unwrap())
    .collect()
}

/// Under the ranks order the bits do not depend on where the ranks run: one host, two hosts
/// (two and three workers, over shared memory and TCP) and workers alternating between two
/// hosts all give the bits of the flat ring, with no call through the hierarchy. Under the
/// hosts order, two hosts give other bits (the hierarchy adds in another order).
#[test]
fn under_the_ranks_order_every_placement_gives_the_same_bits() {
    let one: fn(usize) -> &'static str = |_| "127.0.0.2";
    let split: fn(usize) -> &'static str = |t| if t < 2 { "127.0.0.2" } else { "127.0.0.3" };
    let alternate: fn(usize) -> &'static str = |t| if t % 2 == 0 { "127.0.0.2" } else { "127.0.0.3" };
    let want = placed(ReductionOrder::Ranks, false, one)[0].1.clone();
    for robust in [false, true] {
        for (name, host) in [("one host", one), ("two hosts", split), ("alternating hosts", alternate)] {
            for (rank, (hier, bits)) in placed(ReductionOrder::Ranks, robust, host).into_iter().enumerate() {
                assert_eq!(hier, 0, "{name}, rank {rank}: no hierarchy under the ranks order");
                assert!(bits == want, "{name}, rank {rank} (robust {robust}): other bits than on one host");
            }
        }
    }
    let hosts = placed(ReductionOrder::Hosts, false, split);
    assert_eq!(hosts[0].0, 1, "the hosts order uses the hierarchy on two hosts");
    assert!(hosts[0].1 != want, "the hierarchy adds in another order: these inputs give other bits");
    let same_host = placed(ReductionOrder::Hosts, false, one);
    assert!(same_host[0].0 == 0 && same_host[0].1 == want, "on one host the hosts order is the ring's");
}

/// Tasks 0-1 on 127.0.0.2 and 2-4 on 127.0.0.3 under the hosts reduction order: two hosts of
/// several workers, so large allreduces go through the hierarchy (`allreduce(hier)` in the
/// stats). The bits are those of
/// the documented order, computed here: each host's chain from its last rank to its leader,
/// `x0 + x1` and `x2 + (x3 + x4)`, then the two leaders' sums added (commutative for two); the
/// same in robust and plain mode and on every rank.
#[test]
fn two_hosts_reduce_through_the_hierarchy_in_its_documented_order() {
    const LEN: usize = 100_003;
    let input = |rank: usize| -> Vec<f32> {
        let mut rng = Rng(99 + rank as u64);
        (0..LEN).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect()
    };
    let x: Vec<Vec<f32>> = (0..5).map(input).collect();
    let want: Vec<u32> = (0..LEN).map(|i| ((x[0][i] + x[1][i]) + (x[2][i] + (x[3][i] + x[4][i]))).to_bits()).collect();
    for robust in [false, true] {
        let results = run_world(
            5,
            move |task, c| {
                c.host = Some(if task < 2 { "127.0.0.2" } else { "127.0.0.3" }.into());
                c.ring_threshold = 4096;
                c.robust = robust;
                c.reduction_order = ReductionOrder::Hosts;
            },
            move |c: &mut Communicator| {
                let mut buf = input(c.rank());
                c.allreduce(&mut buf, Op::Sum)?;
                let hier = c.stats().get("allreduce(hier)").map(|h| h.len()).unwrap_or(0);
                Ok((hier, buf.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()))
            },
        );
        for (rank, r) in results.into_iter().enumerate() {
            let (hier, bits) = r.unwrap();
            assert_eq!(hier, 1, "rank {rank}: the call went through the hierarchy");
            assert!(bits == want, "rank {rank} (robust {robust}): not the documented order's bits");
        }
    }
}

//! Collectives through real sockets: every dtype and op, tree and ring, sizes that do not
//! divide evenly, results checked against a serial computation and for bit-identity.

use crate::common::{Rng, run_world};
use warren::{CallOptions, Communicator, Element, Op};

/// Input of rank `r` for element `i`: small integers, so that float sums and products are
/// exact in any order and a serial reduction is the exact expected value.
fn input<T: FromI64>(r: usize, i: usize, op: Op) -> T {
    let v = ((r * 7 + i * 3) % 5) as i64 + 1; // 1..=5
    match op {
        Op::Prod => T::from_i64(if (r + i) % 3 == 0 { 2 } else { 1 }),
        Op::Sum => T::from_i64(v - 2),
        _ => T::from_i64(v * 13 + r as i64),
    }
}

trait FromI64: Element + PartialEq + std::fmt::Debug {
    fn from_i64(v: i64) -> Self;
}
macro_rules! from_i64 { ($($t:ty),*) => {$(impl FromI64 for $t { fn from_i64(v: i64) -> Self { v as $t } })*}; }
from_i64!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

fn serial<T: FromI64>(world: usize, len: usize, op: Op) -> Vec<T> {
    let mut acc: Vec<T> = (0..len).map(|i| input(0, i, op)).collect();
    for r in 1..world {
        let other: Vec<T> = (0..len).map(|i| input(r, i, op)).collect();
        T::reduce(&mut acc, &other, op);
    }
    acc
}

fn check_type<T: FromI64>(world: usize, len: usize, ring_threshold: usize) {
    let ops: Vec<Op> = Op::ALL.iter().copied().filter(|o| o.supports(T::DTYPE)).collect();
    let ops2 = ops.clone();
    let results = run_world(
        world,
        move |_, c| c.ring_threshold = ring_threshold,
        move |c: &mut Communicator| {
            let mut outs = Vec::new();
            for &op in &ops2 {
                let mut buf: Vec<T> = (0..len).map(|i| input(c.rank(), i, op)).collect();
                c.allreduce(&mut buf, op)?;
                outs.push(buf);
            }
            Ok(outs)
        },
    );
    for (rank, r) in results.into_iter().enumerate() {
        let outs = r.unwrap_or_else(|e| panic!("rank {rank} failed: {e}"));
        for (op, got) in ops.iter().zip(outs) {
            assert_eq!(got, serial::<T>(world, len, *op), "{} {} world={world} len={len}", T::DTYPE.name(), op.name());
        }
    }
}

#[test]
fn every_type_and_op_tree_and_ring() {
    for (world, len) in [(1, 5), (2, 0), (2, 1), (3, 17), (4, 1000), (5, 3), (7, 4099)] {
        for threshold in [usize::MAX, 1] {
            check_type::<i8>(world, len, threshold);
            check_type::<i16>(world, len, threshold);
            check_type::<i32>(world, len, threshold);
            check_type::<i64>(world, len, threshold);
            check_type::<u8>(world, len, threshold);
            check_type::<u16>(world, len, threshold);
            check_type::<u32>(world, len, threshold);
            check_type::<u64>(world, len, threshold);
            check_type::<f32>(world, len, threshold);
            check_type::<f64>(world, len, threshold);
        }
    }
}

#[test]
fn random_sizes_worlds_one_to_eight() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for world in 1..=8 {
        let len = rng.below(70_000) as usize;
        let threshold = [1usize, 4096, usize::MAX][rng.below(3) as usize];
        check_type::<f32>(world, len, threshold);
        check_type::<u64>(world, len, threshold);
    }
}

/// Random floats: sums depend on order, so this checks that every rank gets the same bits,
/// that a second run gives the same bits again, and that robust mode (which reduces out of
/// place, into the buffer it keeps) gives the bits of plain mode.
#[test]
fn float_results_are_bit_identical_across_ranks_runs_and_modes() {
    for threshold in [usize::MAX, 1024] {
        let run = |robust: bool| {
            run_world(
                5,
                move |_, c| {
                    c.ring_threshold = threshold;
                    c.robust = robust;
                },
                |c: &mut Communicator| {
                    let mut rng = Rng(1 + c.rank() as u64);
                    let mut buf: Vec<f32> =
                        (0..10_001).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect();
                    c.allreduce(&mut buf, Op::Sum)?;
                    Ok(buf.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
                },
            )
            .into_iter()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>()
        };
        let first = run(true);
        for r in &first[1..] {
            assert_eq!(r, &first[0], "ranks disagree");
        }
        assert_eq!(run(true), first, "a second run gave different bits");
        assert_eq!(run(false), first, "plain mode gave different bits (threshold {threshold})");
    }
}

/// `allreduce_lent` gives the bits `allreduce` gives (tree and ring, plain and robust mode),
/// leaves its input as it was, and a lent result stays the same while later calls and a
/// checkpoint reuse buffers around it.
#[test]
fn a_lent_allreduce_gives_the_in_place_bits_and_keeps_its_input_and_leases() {
    for (world, threshold) in [(3, usize::MAX), (3, 1024), (4, 1024)] {
        for robust in [false, true] {
            let results = run_world(
                world,
                move |_, c| {
                    c.ring_threshold = threshold;
                    c.robust = robust;
                },
                move |c: &mut Communicator| {
                    let mut rng = Rng(7 + c.rank() as u64);
                    let input: Vec<f32> =
                        (0..10_001).map(|_| (rng.next() as f32 / u64::MAX as f32 - 0.5) * 1e3).collect();
                    let lent = c.allreduce_lent(&input, Op::Sum)?;
                    let first: Vec<u32> = lent.iter().map(|x| x.to_bits()).collect();
                    let mut in_place = input.clone();
                    c.allreduce(&mut in_place, Op::Sum)?;
                    assert_eq!(in_place.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), first, "lent != in place");
                    let mut held = vec![lent];
                    for round in 0..6 {
                        if robust && round % 2 == 0 {
                            c.checkpoint(&[], None)?;
                        }
                        let other: Vec<f32> = input.iter().map(|x| x * (round + 2) as f32).collect();
                        held.push(c.allreduce_lent(&other, Op::Sum)?);
                        if held.len() > 2 {
                            held.remove(1);
                        }
                    }
                    assert_eq!(held[0].iter().map(|x| x.to_bits()).collect::<Vec<_>>(), first, "a lease changed");
                    Ok(first)
                },
            );
            let results: Vec<Vec<u32>> = results.into_iter().map(|r| r.unwrap()).collect();
            for r in &results[1..] {
                assert_eq!(r, &results[0], "ranks disagree (world {world}, threshold {threshold}, robust {robust})");
            }
        }
    }
}

/// A reducer that is neither commutative nor associative (`acc = acc * 31 + other`): the ring
/// and the tree apply it in one fixed order, the same in robust mode (out of place, the input
/// read from the caller's buffer) as in plain mode (in place), and the same again on a second
/// call with the same input.
#[test]
fn order_sensitive_reducer_gives_the_same_bits_in_both_modes() {
    for threshold in [usize::MAX, 64] {
        let run = |robust: bool| {
            run_world(
                4,
                move |_, c| {
                    c.ring_threshold = threshold;
                    c.robust = robust;
                },
                |c: &mut Communicator| {
                    let input: Vec<u32> = (0..3001).map(|i| (c.rank() as u32 + 1) * 7919 + i).collect();
                    let mut buf = input.clone();
                    let reducer = |acc: &mut [u8], other: &[u8]| {
                        let acc: &mut [u32] = bytemuck::cast_slice_mut(acc);
                        for (a, &b) in acc.iter_mut().zip(bytemuck::cast_slice::<u8, u32>(other)) {
                            *a = a.wrapping_mul(31).wrapping_add(b);
                        }
                    };
                    let opts = CallOptions::new().tag(31);
                    c.allreduce_custom(bytemuck::cast_slice_mut(&mut buf), 4, &opts, reducer)?;
                    let mut again = input.clone();
                    c.allreduce_custom(bytemuck::cast_slice_mut(&mut again), 4, &opts, reducer)?;
                    assert_eq!(again, buf, "the same input gave another result");
                    Ok(buf)
                },
            )
            .into_iter()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>()
        };
        let robust = run(true);
        for r in &robust[1..] {
            assert_eq!(r, &robust[0], "ranks disagree");
        }
        assert_eq!(run(false), robust, "plain mode gave different bits (threshold {threshold})");
    }
}

/// A small allreduce among 4 workers runs on the flat tree: rank 0 applies the reducer in
/// rank order, `((x0 op x1) op x2) op x3`, and every rank gets those bits, in both modes.
#[test]
fn a_small_allreduce_of_four_reduces_in_rank_order() {
    let x = |r: u32, i: u32| (r + 1) * 7919 + i;
    // Computed here from the documented order, with an order-sensitive reducer.
    let want: Vec<u32> =
        (0..5).map(|i| (1..4).fold(x(0, i), |acc, r| acc.wrapping_mul(31).wrapping_add(x(r, i)))).collect();
    for robust in [false, true] {
        let results = run_world(
            4,
            move |_, c| c.robust = robust,
            move |c: &mut Communicator| {
                let mut buf: Vec<u32> = (0..5).map(|i| x(c.rank() as u32, i)).collect();
                c.allreduce_custom(
                    bytemuck::cast_slice_mut(&mut buf),
                    4,
                    &CallOptions::new().tag(31),
                    |acc, other| {
                        let acc: &mut [u32] = bytemuck::cast_slice_mut(acc);
                        for (a, &b) in acc.iter_mut().zip(bytemuck::cast_slice::<u8, u32>(other)) {
                            *a = a.wrapping_mul(31).wrapping_add(b);
                        }
                    },
                )?;
                Ok(buf)
            },
        );
        for (rank, r) in results.into_iter().enumerate() {
            assert_eq!(r.unwrap(), want, "rank {rank} (robust {robust})");
        }
    }
}

#[test]
fn user_reducer_over_raw_bytes() {
    // Element = (u32 count, u32 max) pairs, reduced as (sum, max).
    let results = run_world(
        4,
        |_, _| {},
        |c: &mut Communicator| {
            let r = c.rank() as u32;
            let mut buf: Vec<u8> =
                (0..3u32).flat_map(|i| [(r + i).to_le_bytes(), (r * 10 + i).to_le_bytes()].concat()).collect();
            c.allreduce_custom(&mut buf, 8, &CallOptions::new().tag(42), |acc, other| {
                for (a, b) in acc.chunks_exact_mut(8).zip(other.chunks_exact(8)) {
                    let s =
                        u32::from_le_bytes(a[..4].try_into().unwrap()) + u32::from_le_bytes(b[..4].try_into().unwrap());
                    let m = u32::from_le_bytes(a[4..].try_into().unwrap())
                        .max(u32::from_le_bytes(b[4..].try_into().unwrap()));
                    a[..4].copy_from_slice(&s.to_le_bytes());
                    a[4..].copy_from_slice(&m.to_le_bytes());
                }
            })?;
            Ok(buf)
        },
    );
    let expected: Vec<u8> =
        (0..3u32).flat_map(|i| [(6 + 4 * i).to_le_bytes(), (30 + i).to_le_bytes()].concat()).collect();
    for r in results {
        assert_eq!(r.unwrap(), expected);
    }
}

#[test]
fn broadcast_from_every_root_resizes_receivers() {
    for world in [1, 2, 3, 6, 8] {
        for root in 0..world {
            let results = run_world(
                world,
                |_, _| {},
                move |c: &mut Communicator| {
                    let mut data = if c.rank() == root {
                        (0..(root * 1000 + 77)).map(|i| (i * 31 % 251) as u8).collect()
                    } else {
                        vec![9u8; 3]
                    };
                    c.broadcast(&mut data, root)?;
                    let mut empty = if c.rank() == root { vec![] } else { vec![1u8; 5] };
                    c.broadcast(&mut empty, root)?;
                    Ok((data, empty))
                },
            );
            let expected: Vec<u8> = (0..(root * 1000 + 77)).map(|i| (i * 31 % 251) as u8).collect();
            for r in results {
                let (d, e) = r.unwrap();
                assert_eq!(d, expected, "world {world} root {root}");
                assert!(e.is_empty());
            }
        }
    }
}

#[test]
fn large_broadcast_and_fixed_size_broadcast() {
    let results = run_world(
        4,
        |_, _| {},
        |c: &mut Communicator| {
            let mut data = vec![0u8; 3 << 20];
            if c.rank() == 2 {
                data.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 253) as u8);
            }
            c.broadcast(&mut data[..], 2)?;
            Ok(data)
        },
    );
    for r in results {
        assert!(r.unwrap().iter().enumerate().all(|(i, &b)| b == (i % 253) as u8));
    }
}

#[test]
fn allgather_with_different_sizes() {
    for world in [1, 2, 3, 5, 8] {
        let results = run_world(
            world,
            |_, _| {},
            |c: &mut Communicator| {
                let mine: Vec<u8> = vec![c.rank() as u8; c.rank() * 3 + (c.rank() % 2) * 1000];
                c.allgather(&mine)
            },
        );
        for r in results {
            let blocks = r.unwrap();
            assert_eq!(blocks.len(), world);
            for (k, b) in blocks.iter().enumerate() {
                assert_eq!(b, &vec![k as u8; k * 3 + (k % 2) * 1000], "world {world} block {k}");
            }
        }
    }
}

#[test]
fn barrier_and_mixed_sequence() {
    let results = run_world(
        6,
        |_, c| c.ring_threshold = 4096,
        |c: &mut Communicator| {
            let mut total = 0i64;
            for i in 0..50 {
                c.barrier()?;
                let mut v = vec![c.rank() as i64 + i; (i as usize * 97) % 3000];
                c.allreduce(&mut v, Op::Sum)?;
                total += v.first().copied().unwrap_or(0);
                let mut b = vec![i as u8; 10];
                c.broadcast(&mut b, (i as usize) % 6)?;
            }
            Ok(total)
        },
    );
    let expected: i64 = (0..50i64).filter(|i| (i * 97) % 3000 > 0).map(|i| 15 + 6 * i).sum();
    for r in results {
        assert_eq!(r.unwrap(), expected);
    }
}

#[test]
fn tiny_socket_buffers_force_partial_io() {
    let results = run_world(
        3,
        |_, c| {
            c.socket_buffer = Some(16 << 10);
            c.ring_threshold = 64 << 10;
        },
        |c: &mut Communicator| {
            let mut a = vec![1.0f64; 200_000];
            c.allreduce(&mut a, Op::Sum)?;
            let mut b = vec![2u32; 5000];
            c.allreduce(&mut b, Op::Sum)?;
            Ok((a[12345], b[4999]))
        },
    );
    let shown: Vec<String> = results.iter().map(|r| format!("{r:?}")).collect();
    for r in results {
        assert_eq!(r.unwrap_or_else(|e| panic!("{e}: all ranks: {shown:#?}")), (3.0, 6));
    }
}

/// Task ids may be sparse: tasks 5, 0 and 2 form a world of 3 whose ranks follow task-id
/// order, and every worker holds the same view.
#[test]
fn sparse_task_ids_form_a_world_in_task_order() {
    let ids = ["5", "0", "2"];
    let results = run_world(
        3,
        move |thread, c| c.task_id = ids[thread].to_string(),
        |c: &mut Communicator| {
            let mut v = vec![c.rank() as u32 + 1];
            c.allreduce(&mut v, Op::Sum)?;
            Ok((c.rank(), c.view().members().to_vec(), v[0]))
        },
    );
    let ranks: Vec<usize> = results.iter().map(|r| r.as_ref().unwrap().0).collect();
    assert_eq!(ranks, vec![2, 0, 1]);
    for r in results {
        let (_, members, sum) = r.unwrap();
        assert_eq!(members, ["0", "2", "5"]);
        assert_eq!(sum, 6);
    }
}

#[test]
fn calls_with_options_give_the_plain_results() {
    // Bootstrap calls (by call site and by key) and tagged calls, of every shape, compute
    // what the plain calls compute; a site called in a loop gets one key per call.
    let results = run_world(
        3,
        |_, _| {},
        |c: &mut Communicator| {
            let r = c.rank() as u64;
            let mut out = Vec::new();
            for i in 0..2u64 {
                let mut v = [r + i, 10 * r];
                c.allreduce_with(&mut v, Op::Max, &CallOptions::new().bootstrap())?;
                out.extend(v);
            }
            let mut f = [1.5f32 + r as f32; 3];
            c.allreduce_with(&mut f, Op::Sum, &CallOptions::new().tag(3))?;
            out.push(f[0] as u64);
            let mut bytes = 7u32.to_le_bytes();
            let keyed = CallOptions::new().bootstrap_key("bytes").tag(1);
            c.allreduce_bytes(&mut bytes, warren::DataType::U32, Op::Sum, &keyed)?;
            out.push(u32::from_le_bytes(bytes) as u64);
            let mut seed = if r == 1 { vec![4u8, 2] } else { Vec::new() };
            c.broadcast_with(&mut seed, 1, &CallOptions::new().bootstrap())?;
            out.extend(seed.iter().map(|b| *b as u64));
            let mut fixed = [r as u8; 2];
            c.broadcast_with(&mut fixed[..], 2, &CallOptions::new().bootstrap_key("fixed"))?;
            out.extend(fixed.iter().map(|b| *b as u64));
            let mut raw = (r as u16).to_le_bytes();
            c.allreduce_custom(&mut raw, 2, &CallOptions::new().bootstrap_key("raw").tag(9), |a, b| {
                a[0] = a[0].max(b[0]);
            })?;
            out.push(raw[0] as u64);
            Ok(out)
        },
    );
    for r in results {
        assert_eq!(r.unwrap(), vec![2, 20, 3, 20, 7, 21, 4, 2, 2, 2, 2]);
    }
}

/// A ring allreduce in slices (`Config::ring_slice`, including one that is not a multiple of
/// the element size and leaves a short last slice) gives the bits of whole chunks, in place,
/// lent, plain and robust: every element is still reduced along its chunk's chain. The floats
/// are random, so a different order of additions would show in the bits. Small socket buffers
/// split each slice's bytes, so a step may be sent while the one before it is half received.
#[test]
fn ring_slices_give_the_bits_of_whole_chunks() {
    let len = 100_003;
    let run = |world: usize, slice: usize, robust: bool| {
        let results = run_world(
            world,
            move |_, c| {
                c.ring_threshold = 4096;
                c.ring_slice = slice;
                c.robust = robust;
                // Partial reads and writes, so a slice's bytes arrive in several pieces.
                c.socket_buffer = Some(16 << 10);
            },
            move |c: &mut Communicator| {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (c.rank() as u64 + 1));
                let input: Vec<f32> = (0..len).map(|_| (rng.below(1 << 24) as f32 - 8_388_608.0) * 1.37e-3).collect();
                let mut buf = input.clone();
                c.allreduce(&mut buf, Op::Sum)?;
                let lent = c.allreduce_lent(&input, Op::Sum)?.to_vec();
                for _ in 0..3 {
                    let again = c.allreduce_lent(&input, Op::Sum)?;
                    assert!(*again == *lent, "rank {}: a repeated call gave other bits", c.rank());
                }
                Ok((buf, lent))
            },
        );
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        let outs: Vec<(Vec<u32>, Vec<u32>)> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| panic!("world {world} slice {slice} robust {robust}: {e}")))
            .map(|(a, b)| (bits(&a), bits(&b)))
            .collect();
        for (rank, (buf, lent)) in outs.iter().enumerate() {
            assert_eq!(buf, &outs[0].0, "world {world} slice {slice}: rank {rank} differs from rank 0");
            assert_eq!(lent, buf, "world {world} slice {slice}: rank {rank}'s lent result differs");
        }
        outs[0].0.clone()
    };
    for world in [3, 4] {
        let whole = run(world, 0, false);
        for (slice, robust) in [(4096, false), (40_002, true), (40_002, false), (131_072, true), (12_000, true)] {
            assert!(
                run(world, slice, robust) == whole,
                "world {world}: slices of {slice} bytes (robust {robust}) changed the bits"
            );
        }
    }
}

//! The sparse rows of one parameter server, on one thread, without the network: what a step
//! of `bench/ps_sparse.sh` costs a server in row work (finding rows, copying them into a pull
//! reply, summing two trainers' gradients, applying SGD). Prints one JSON line.
//!
//!   cargo bench -p warren --bench ps_rows [-- KEYS STEPS TRAINERS PULL WIDTH]
//!                                         (defaults: 524288 200 2 16384 16)
//!
//! KEYS is the server's share of the table (half of the 1M keys of `bench/ps_sparse.sh`, with
//! two servers); a step pulls and pushes TRAINERS x PULL uniformly drawn keys (by default
//! batches of 4096 examples of 8 features, split over two servers), WIDTH floats each.

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use warren::ps::{Grad, Init, Optimizer, PullPiece, Shard, TableKind, TableSpec};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let keys = args.first().copied().unwrap_or(1 << 19);
    let steps = args.get(1).copied().unwrap_or(200) as usize;
    let trainers = args.get(2).copied().unwrap_or(2) as usize;
    let keys_per_pull = args.get(3).copied().unwrap_or(16384) as usize;
    let width = args.get(4).copied().unwrap_or(16) as usize;
    let spec = TableSpec {
        name: "emb".into(),
        kind: TableKind::Sparse { width: width as u32, expected_rows: 0 },
        init: Init::Uniform { scale: 0.01, seed: 7 },
        optimizer: Optimizer::sgd(0.1),
    };
    let mut shard = Shard::new(0, 1, &[spec]).expect("a valid table");
    // Every row exists before the timed steps, as after the first steps of a long job.
    let all: Vec<u64> = (0..keys).collect();
    drop(shard.pull_sparse("emb", &all).expect("known table"));
    let mut rng = SmallRng::seed_from_u64(1);
    let grads = vec![0.001f32; keys_per_pull * width];
    let (mut pull_s, mut push_s) = (0.0, 0.0);
    for _ in 0..steps {
        let pulls: Vec<[PullPiece; 1]> = (0..trainers)
            .map(|_| {
                let keys = (0..keys_per_pull).map(|_| rng.gen_range(0..keys)).collect();
                [PullPiece::Sparse { table: "emb".into(), keys }]
            })
            .collect();
        let t = Instant::now();
        for pull in &pulls {
            std::hint::black_box(shard.pull_frame(pull).expect("known table"));
        }
        pull_s += t.elapsed().as_secs_f64();
        let pushes: Vec<Vec<Grad>> = pulls
            .into_iter()
            .map(|[p]| {
                let PullPiece::Sparse { keys, .. } = p else { unreachable!("sparse pulls") };
                vec![Grad::Sparse { table: "emb".into(), keys, values: grads.clone() }]
            })
            .collect();
        let t = Instant::now();
        shard.apply(pushes.iter().map(Vec::as_slice));
        push_s += t.elapsed().as_secs_f64();
    }
    let per = |s: f64| (s / steps as f64 * 1e6).round() / 1e3;
    println!(
        "{{\"bench\":\"ps_rows\",\"keys\":{keys},\"steps\":{steps},\"trainers\":{trainers},\"pull\":{keys_per_pull},\"width\":{width},\"pull_ms\":{},\"push_ms\":{},\"step_ms\":{}}}",
        per(pull_s),
        per(push_s),
        per(pull_s + push_s)
    );
}

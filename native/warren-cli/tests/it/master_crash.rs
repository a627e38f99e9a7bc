//! Crash tests of the data master: a real `warren master` process is killed with SIGKILL at
//! seeded random points while worker clients pull and finish tasks, and restarted on the same
//! store and port. Afterwards every task of the pass was reported finished by some client
//! (at-least-once), the master has moved on to the next pass, `warren master status` says
//! so, and the store reloads into a consistent queue. Each schedule has a time limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::crash::{CLIENTS, Dir, Master, Progress, check_pass_done, check_store, dataset, free_port, worker};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warren::store::FileStore;

const SCHEDULES: u64 = 20;
/// Time limit of one schedule, restarts included.
const SCHEDULE_LIMIT: Duration = Duration::from_secs(60);

fn run_schedule(seed: u64) -> (usize, u64) {
    let dir = Dir::new(&format!("crash-{seed}"));
    let pattern = dataset(&dir.0);
    let store = format!("file:{}", dir.0.join("store").display());
    let port = free_port();
    let uri = format!("127.0.0.1:{port}");
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut starts = 0;
    let mut master = Master::spawn(&dir.0, &store, &pattern, port, starts, &[]);
    master.wait_serving(port, Duration::from_secs(30));
    let progress = Arc::new(Progress::default());
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (uri, progress, pattern) = (uri.clone(), progress.clone(), pattern.clone());
            std::thread::spawn(move || worker(uri, seed * 100 + i as u64, &progress, pattern))
        })
        .collect();
    let all_done = || workers.iter().all(|w| w.is_finished());

    let kills = rng.gen_range(1..=3);
    for _ in 0..kills {
        if !crate::support::crash::wait_kill_point(&mut rng, &progress, &all_done, started + SCHEDULE_LIMIT) {
            break;
        }
        master.kill(); // SIGKILL
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
        starts += 1;
        master = Master::spawn(&dir.0, &store, &pattern, port, starts, &[]);
        master.wait_serving(port, Duration::from_secs(30));
    }
    while !all_done() {
        if started.elapsed() > SCHEDULE_LIMIT {
            progress.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            panic!("seed {seed}: the pass did not finish within {SCHEDULE_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for w in workers {
        w.join().unwrap().unwrap_or_else(|e| panic!("seed {seed}: worker failed: {e}"));
    }
    check_pass_done(seed, &uri, &progress);
    master.kill();
    check_store(seed, &FileStore::open(dir.0.join("store")).unwrap());
    (starts, progress.reports.load(std::sync::atomic::Ordering::Relaxed))
}

#[test]
fn master_killed_at_random_points_loses_no_task() {
    let mut restarts = 0;
    for seed in 0..SCHEDULES {
        let started = Instant::now();
        let (starts, reports) = run_schedule(seed);
        assert!(starts >= 1, "seed {seed}: the pass ended before the first kill; slow the workers down");
        eprintln!("seed {seed}: {starts} kill(s), {reports} finish reports, {:?}", started.elapsed());
        restarts += starts;
    }
    assert!(restarts >= SCHEDULES as usize, "the schedules must actually kill the master ({restarts} kills)");
}

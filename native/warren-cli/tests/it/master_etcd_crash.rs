//! Crash sweep of the data master on the etcd store: real `warren master` processes on a
//! real etcd (the `etcd` binary from `apt-get install -y etcd-server`; the test fails with
//! that advice when it is missing) are killed with SIGKILL at seeded random points while
//! worker clients pull and finish tasks. After each kill the master that carries on is either
//! a new process started on the same store, or (a *takeover*) a second master that was
//! already running and waiting on the leader lock while the first served. Afterwards every
//! task of the pass was reported finished by some client (at-least-once), the last master has
//! moved on to the next pass, and the queue reloaded from etcd is consistent.
//!
//! One etcd serves every schedule, each under its own key prefix; schedules run four at a
//! time, since most of their time is spent waiting for a killed master's lease (2 s, set with
//! `--etcd-lease-ttl-s`) to expire.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::crash::{CLIENTS, Dir, Master, Progress, check_pass_done, check_store, dataset, free_port, worker};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use warren::store::{EtcdOptions, EtcdStore};

const SCHEDULES: u64 = 20;
/// Schedules run at the same time.
const PARALLEL: u64 = 4;
const LEASE_TTL_S: i64 = 2;
/// Time limit of one schedule, restarts and takeovers included.
const SCHEDULE_LIMIT: Duration = Duration::from_secs(60);
/// How long a master may take to start serving (a lease to expire included).
const START_LIMIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Tally {
    restarts: u64,
    takeovers: u64,
}

fn run_schedule(endpoint: &str, seed: u64) -> Tally {
    let dir = Dir::new(&format!("etcd-crash-{seed}"));
    let pattern = dataset(&dir.0);
    let prefix = format!("/warren/sweep/{}/{seed}", std::process::id());
    let store = format!("etcd:{endpoint}{prefix}");
    let ttl = LEASE_TTL_S.to_string();
    let extra = ["--etcd-lease-ttl-s", ttl.as_str()];
    let port = free_port();
    let uri = format!("127.0.0.1:{port}");
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let deadline = started + SCHEDULE_LIMIT;
    let mut n = 0;
    let mut master = Master::spawn(&dir.0, &store, &pattern, port, n, &extra);
    master.wait_serving(port, START_LIMIT);
    let progress = Arc::new(Progress::default());
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (uri, progress, pattern) = (uri.clone(), progress.clone(), pattern.clone());
            std::thread::spawn(move || worker(uri, seed * 100 + i as u64, &progress, pattern))
        })
        .collect();
    let all_done = || workers.iter().all(|w| w.is_finished());

    let mut tally = Tally::default();
    let kills = rng.gen_range(1..=2);
    for _ in 0..kills {
        let takeover = rng.gen_bool(0.5);
        let standby = takeover.then(|| {
            // A second master, started while the first serves: it must wait on the lock.
            n += 1;
            let standby = Master::spawn(&dir.0, &store, &pattern, port, n, &extra);
            while !standby.log_text().contains("held by another writer") {
                assert!(
                    Instant::now() < deadline,
                    "seed {seed}: the standby master never waited:\n{}",
                    standby.log_text()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            standby
        });
        if !crate::support::crash::wait_kill_point(&mut rng, &progress, &all_done, deadline) {
            break;
        }
        master.kill(); // SIGKILL: its lock goes only when its lease expires
        master = match standby {
            Some(mut standby) => {
                assert!(!standby.is_serving(), "seed {seed}: the standby served while the leader held the lock");
                standby.wait_serving(port, START_LIMIT);
                tally.takeovers += 1;
                standby
            }
            None => {
                std::thread::sleep(Duration::from_millis(rng.gen_range(0..100)));
                n += 1;
                let mut m = Master::spawn(&dir.0, &store, &pattern, port, n, &extra);
                m.wait_serving(port, START_LIMIT);
                tally.restarts += 1;
                m
            }
        };
    }
    while !all_done() {
        if Instant::now() > deadline {
            progress.stop.store(true, Ordering::Relaxed);
            panic!("seed {seed}: the pass did not finish within {SCHEDULE_LIMIT:?}:\n{}", master.log_text());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for w in workers {
        w.join().unwrap().unwrap_or_else(|e| panic!("seed {seed}: worker failed: {e}"));
    }
    check_pass_done(seed, &uri, &progress);
    master.kill();

    // Reload what the killed master left in etcd (taking the lock once its lease expired).
    let mut opts = EtcdOptions::new(vec![endpoint.to_string()], prefix);
    opts.lease_ttl_s = LEASE_TTL_S;
    opts.lock_timeout = START_LIMIT;
    check_store(seed, &EtcdStore::open(opts).unwrap());
    eprintln!(
        "seed {seed}: {} restart(s), {} takeover(s), {} finish reports, {:?}",
        tally.restarts,
        tally.takeovers,
        progress.reports.load(Ordering::Relaxed),
        started.elapsed()
    );
    tally
}

#[test]
fn etcd_master_killed_at_random_points_loses_no_task_with_restarts_and_takeovers() {
    let etcd = crate::support::etcd::Etcd::start("crash-sweep");
    let next = AtomicU64::new(0);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let runners: Vec<_> = (0..PARALLEL)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= SCHEDULES {
                            return mine;
                        }
                        mine.push(run_schedule(&etcd.endpoint, seed));
                    }
                })
            })
            .collect();
        runners.into_iter().flat_map(|r| r.join().expect("a schedule failed (see its panic above)")).collect()
    });
    assert_eq!(tallies.len(), SCHEDULES as usize);
    let restarts: u64 = tallies.iter().map(|t| t.restarts).sum();
    let takeovers: u64 = tallies.iter().map(|t| t.takeovers).sum();
    eprintln!("{SCHEDULES} schedules: {restarts} restarts, {takeovers} takeovers");
    assert!(tallies.iter().all(|t| t.restarts + t.takeovers >= 1), "every schedule must kill the master at least once");
    assert!(restarts >= 5 && takeovers >= 5, "both ways of carrying on must be exercised ({restarts} / {takeovers})");
}

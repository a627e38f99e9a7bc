//! Retry-one recovery with real processes killed for real: every run must end with exactly the
//! model of the failure-free run (the same `MODEL_HASH`), or, when the failures exceed what can
//! be recovered, fail on every worker with a clear error. Every run has a hard time limit.

use std::process::Command;
use std::time::Duration;

use crate::support::procs::{Proc, wait_for, worker_env};
use crate::support::training::{Rng, Run, WARREN, assert_recovered, clean, launch, launch_killing, mocked, train};

/// The seed's scenario: 10 workers; ranks 0, 4 and 9 die at the same point, then rank 1 right
/// after; all recover and the model equals the failure-free run's.
#[test]
fn seed_scenario_ten_workers_four_failures() {
    let args = ["--iters", "16"];
    let want = clean(10, &args);
    let r = mocked(10, "0,9,2,0;4,9,2,0;9,9,2,0;1,9,3,0", &args);
    assert_recovered(&r, &want, 4, "seed scenario");
}

/// Per iteration the example makes: #0 gradient allreduce, #1 loss allreduce, #2 broadcast,
/// #3 checkpoint (prepare), #4 checkpoint ack; `bootstrap:n` is the n-th bootstrap call and
/// `linking` is "joined the tracker, not yet linked to the peers".
#[test]
fn failures_at_every_kind_of_point() {
    for local in [true, false] {
        let args: Vec<&str> = if local { vec!["--iters", "12"] } else { vec!["--iters", "12", "--no-local"] };
        let want = clean(4, &args);
        let cases = [
            ("1,5,0,0", 1, "during an allreduce"),
            ("2,5,1,0", 1, "during a small allreduce"),
            ("3,5,2,0", 1, "during a broadcast"),
            ("0,5,3,0", 1, "during a checkpoint"),
            ("1,5,4,0", 1, "during a checkpoint ack"),
            ("2,bootstrap:0,0", 1, "during the first bootstrap call"),
            ("2,bootstrap:1,0", 1, "during the second bootstrap call"),
            ("3,0,0,0", 1, "before the first checkpoint"),
            ("1,5,2,0;1,5,3,1", 2, "again during its own recovery"),
            ("1,5,2,0;2,5,3,0", 2, "another worker during a recovery"),
            ("1,7,0,0;2,7,0,0", 2, "two at once"),
            ("0,11,4,0", 1, "at the last call"),
            // Before finalize was a barrier, the others finished and the replacement was
            // refused ("re-linking is impossible"); rank 0's replacement prints the hash again.
            ("1,finalize,0", 1, "at finalize, every call made"),
            ("0,finalize,0;3,finalize,0", 2, "two at finalize"),
            ("1,5,2,0;1,linking,1", 2, "the replacement, while the others link to it"),
            ("3,6,1,0;2,6,3,0", 2, "the predecessor of a replacement, before the next checkpoint"),
        ];
        for (mock, restarts, what) in cases {
            let r = mocked(4, mock, &args);
            assert_recovered(&r, &want, restarts, &format!("{what} (local model: {local}, WARREN_MOCK={mock})"));
        }
    }
}

/// A worker lost past the final barrier of `finalize`, before the tracker heard it finish
/// (`WARREN_MOCK=rank,shutdown,attempt`), is replaced like any other: the members that
/// finished let go of nothing until every member has, re-link when the replacement
/// registers, serve it the checkpoint, the results it replays and the final barrier's, and
/// finish again; the job ends with the failure-free model (rank 0's replacement prints it
/// again). Before they waited, they were gone and the replacement was refused ("re-linking
/// is impossible: rank R (task T) has already finished the job").
#[test]
fn a_worker_lost_after_the_final_barrier_is_replaced_like_any_other() {
    let args = ["--iters", "12"];
    let want = clean(4, &args);
    let cases = [
        ("1,shutdown,0", 1, "past the final barrier"),
        ("0,shutdown,0", 1, "rank 0, which printed the model, past the final barrier"),
        ("0,shutdown,0;3,shutdown,0", 2, "two past the final barrier"),
        ("2,shutdown,0;2,shutdown,1", 2, "the replacement again, past its own final barrier"),
        ("1,shutdown,0;1,linking,1", 2, "the replacement, while the finished members link to it"),
        ("1,finalize,0;2,shutdown,0", 2, "one before the final barrier, another past it"),
    ];
    for (mock, restarts, what) in cases {
        let r = mocked(4, mock, &args);
        assert_recovered(&r, &want, restarts, &format!("{what} (WARREN_MOCK={mock})"));
    }
}

/// Replication is whole again right after a recovery, so losing up to
/// `WARREN_LOCAL_REPLICAS` (here 2) workers at any moment is survivable, also right after a
/// recovery. Rank 3 dies at the ack of checkpoint 5, so its replacement is served that
/// checkpoint's prepare phase instead of running it (it must still get the replicas of its
/// predecessors' local models); or two neighbours restart together (the later one's replica of
/// the earlier one's model must come from another holder). Then the workers that, with the
/// replacement, held the replicas are lost. (Before replication was restored, the first and
/// last cases failed with "no live worker holds the local model of rank 1 (replicated on ranks
/// [2, 3])" and "... of rank 4 (replicated on ranks [5, 6])".)
#[test]
fn replication_is_whole_again_right_after_a_recovery() {
    let args = ["--iters", "12"];
    let want = clean(8, &args);
    let cases = [
        ("3,4,4,0;2,5,1,0;1,5,1,0", 3, "a worker served a checkpoint's prepare phase, then its two ring predecessors"),
        ("3,4,4,0;4,5,1,0;5,5,3,0", 3, "a worker, then its two ring successors one after another"),
        (
            "4,5,0,0;5,5,0,0;4,5,2,1;6,5,2,0",
            4,
            "two neighbours together, then the first again with the second's successor",
        ),
    ];
    for (mock, restarts, what) in cases {
        let r = train(8, &[], &args, &[("WARREN_MOCK", mock), ("WARREN_LOCAL_REPLICAS", "2")], |_| {});
        assert_recovered(&r, &want, restarts, &format!("{what} (WARREN_MOCK={mock})"));
    }
}

/// Without local models there is nothing to replicate: `WARREN_LOCAL_REPLICAS=0` still
/// recovers a lost worker (every worker knows its model was empty).
#[test]
fn without_local_models_no_replicas_are_needed() {
    let args = ["--iters", "12", "--no-local"];
    let want = clean(4, &args);
    for mock in ["1,5,2,0", "0,5,3,0", "3,5,4,0;2,6,1,0"] {
        let r = train(4, &[], &args, &[("WARREN_MOCK", mock), ("WARREN_LOCAL_REPLICAS", "0")], |_| {});
        let restarts = mock.split(';').count() as u64;
        assert_recovered(&r, &want, restarts, &format!("no local models, no replicas (WARREN_MOCK={mock})"));
    }
}

/// With the gradient allreduced by `allreduce_lent` (the sum lent from the buffer every
/// worker keeps, not copied back), the model is the in-place run's, bit for bit, and a worker
/// lost during that call, during the next ones or killed with SIGKILL is recovered to the same
/// model: the kept results a replacement is served are the buffers lent to the callers.
#[test]
fn a_lent_gradient_allreduce_recovers_the_in_place_model() {
    // The 40 kB gradient of the small-model job goes through the ring.
    let ring = [("WARREN_RING_THRESHOLD", "4096")];
    let run = |args: &[&str], mock: Option<&str>| {
        let env: Vec<(&str, &str)> = ring.iter().copied().chain(mock.map(|m| ("WARREN_MOCK", m))).collect();
        train(4, &[], args, &env, |_| {})
    };
    let in_place = ["--iters", "12"];
    let lent = ["--iters", "12", "--lent"];
    let want = run(&in_place, None).hash().expect("the in-place run's model");
    assert_eq!(run(&lent, None).hash(), Some(want.clone()), "lent: the in-place model");
    for (mock, restarts, what) in [
        ("1,5,0,0", 1, "during a lent allreduce"),
        ("2,5,2,0", 1, "after a lent allreduce, during the broadcast"),
        ("3,5,4,0;0,6,0,0", 2, "at a checkpoint ack, then another during the next lent allreduce"),
    ] {
        let r = run(&lent, Some(mock));
        assert_recovered(&r, &want, restarts, &format!("{what} (WARREN_MOCK={mock})"));
    }
    let args = ["--iters", "100", "--model-bytes", "400000", "--compute-ms", "4"];
    let clean_run = launch(4, &[], &args, &[], |_| {});
    assert!(clean_run.ok(), "{}", clean_run.stderr);
    let lent_args: Vec<&str> = args.iter().copied().chain(["--lent"]).collect();
    let killed = launch_killing(4, &lent_args, &[], 2);
    assert!(killed.ok(), "{}", killed.stderr);
    assert!(killed.restarts() >= 1, "the killed worker was restarted");
    assert_eq!(killed.hash(), clean_run.hash(), "SIGKILL during lent allreduces: the in-place model");
}

/// Rank 0's `LINKS shm=<n> tcp=<m> ... lending=<k>` line: how many of its links were shared
/// memory, TCP, and shared memory lending large transfers (single copy).
fn links(r: &Run) -> (usize, usize, usize) {
    let line = r.stdout.lines().find_map(|l| l.strip_prefix("LINKS ")).expect("a LINKS line");
    let count = |k: &str| {
        let v = line.split_whitespace().find_map(|w| w.strip_prefix(k)).expect("a count");
        v.parse::<usize>().expect("a number")
    };
    (count("shm="), count("tcp="), count("lending="))
}

/// Workers on one host link over shared memory by default (rank 0 lists its links after the
/// last call, so after the re-links too): one SIGKILLed amid ring allreduces (a 1 MB model) is
/// replaced and the job ends with the model of a failure-free run over TCP
/// (`WARREN_TRANSPORT=tcp`), bit for bit. With 2 workers on this host (a core each) the
/// links lend their 500 KB allgather transfers, which the peer copies out of the sender's
/// memory (`process_vm_readv`): killed while lent or while borrowing, the same bits; with
/// 4 (more workers than cores here) they use the rings only.
#[test]
fn sigkill_on_shared_memory_links_recovers_the_tcp_model() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for n in [2, 4] {
        let args = ["--model-bytes", "1000000", "--iters", "100", "--compute-ms", "4"];
        let tcp = launch(n, &[], &args, &[("WARREN_TRANSPORT", "tcp")], |_| {});
        assert!(tcp.ok(), "over TCP: {}", tcp.stderr);
        assert_eq!(links(&tcp), (0, n - 1, 0), "WARREN_TRANSPORT=tcp: every link over TCP");
        let shm = launch_killing(n, &args, &[], 1);
        assert!(shm.ok(), "n={n} over shared memory: {}", shm.stderr);
        let lending = if n <= cores { n - 1 } else { 0 };
        assert_eq!(links(&shm), (n - 1, 0, lending), "n={n}, one host of {cores} cores: every link over shared memory");
        assert!(shm.restarts() >= 1, "the killed worker was restarted");
        assert_eq!(shm.hash(), tcp.hash(), "n={n}: the same model bits over shared memory, after a SIGKILL");
    }
    let args = ["--model-bytes", "1000000", "--iters", "5"];
    let rings = launch(2, &[], &args, &[("WARREN_SHM_CMA", "0")], |_| {});
    assert!(rings.ok(), "{}", rings.stderr);
    assert_eq!(links(&rings), (1, 0, 0), "WARREN_SHM_CMA=0: the rings only");
}

/// A worker dies in the middle of a ring allreduce, once it has gathered half of its final
/// values (`WARREN_MOCK=rank,version,seq,attempt,ring`): the survivors have written part of
/// the result over their input by then. The retry resumes from those parts (the worker that
/// completed most of each chunk serves it, the ring reduces the rest) and the job ends with
/// the model of a failure-free run, bit for bit, over TCP and over shared memory, in worlds of
/// 2 and 4, also when two workers die so in the same call.
#[test]
fn a_worker_lost_in_the_middle_of_a_ring_allreduce_is_resumed_from_the_completed_parts() {
    let args = ["--model-bytes", "1000000", "--iters", "8"];
    for transport in ["tcp", "auto"] {
        let env = [("WARREN_TRANSPORT", transport)];
        for (n, mocks) in [(2, vec!["1,3,0,0,ring"]), (4, vec!["2,3,0,0,ring", "1,3,0,0,ring;3,3,0,0,ring"])] {
            let clean = launch(n, &[], &args, &env, |_| {});
            assert!(clean.ok(), "{transport} n={n}: {}", clean.stderr);
            let want = clean.hash().expect("hash");
            for mock in mocks {
                let env = [("WARREN_TRANSPORT", transport), ("WARREN_MOCK", mock)];
                let r = launch(n, &[], &args, &env, |_| {});
                let what = format!("{transport} n={n} WARREN_MOCK={mock}");
                assert_recovered(&r, &want, mock.split(';').count() as u64, &what);
                assert!(r.stderr.contains("exits in a ring allreduce"), "{what}: no exit in a ring:\n{}", r.stderr);
                assert!(r.stderr.contains("resumed; rank"), "{what}: no part of the result served:\n{}", r.stderr);
            }
        }
    }
}

/// Worker `task` (attempt `attempt`) of a job of 4 run by hand against `warren tracker`:
/// tasks 0-1 listen on 127.0.0.2, tasks 2-3 on 127.0.0.3, so these are two hosts of two
/// workers and, under the hosts reduction order, the 1 MB gradient allreduces go through the
/// hierarchy of hosts.
fn two_host_worker(uri: &str, task: usize, attempt: u32) -> Proc {
    Proc::start(
        Command::new(WARREN)
            .args(["example", "train", "--model-bytes", "1000000", "--iters", "100", "--compute-ms", "4"])
            .envs(worker_env(uri, 4, "hier-test", task, attempt))
            .env("WARREN_HOST", if task < 2 { "127.0.0.2" } else { "127.0.0.3" })
            .env("WARREN_REDUCTION_ORDER", "hosts"),
    )
}

/// Runs the two-host job; `kill` (if any) SIGKILLs that task 300 ms after the ranks are
/// assigned and starts its replacement. Returns the model hash.
fn two_host_job(kill: Option<usize>) -> String {
    let (tracker, uri) =
        Proc::tracker(Command::new(WARREN).args(["tracker", "-n", "4"]).env("WARREN_JOB_SECRET", "hier-test"));
    let mut workers: Vec<Proc> = (0..4).map(|t| two_host_worker(&uri, t, 0)).collect();
    wait_for(&tracker.log, "ranks assigned", Duration::from_secs(30));
    if let Some(victim) = kill {
        std::thread::sleep(Duration::from_millis(300));
        workers[victim].signal("KILL");
        let _ = std::mem::replace(&mut workers[victim], two_host_worker(&uri, victim, 1));
        wait_for(&tracker.log, "re-link round 1 complete", Duration::from_secs(30));
    }
    let ended: Vec<_> = workers.into_iter().map(|w| w.finish(Duration::from_secs(120))).collect();
    for (t, e) in ended.iter().enumerate() {
        assert!(e.status.success(), "task {t} failed:\n{}", e.stderr);
    }
    let tracker = tracker.finish(Duration::from_secs(20));
    assert!(tracker.stdout.contains("WARREN_JOB_DONE"), "{}", tracker.stderr);
    let rank0 = &ended[0];
    assert!(rank0.stderr.contains("allreduce(hier): n="), "no hierarchical allreduce:\n{}", rank0.stderr);
    rank0.stdout.lines().find_map(|l| l.strip_prefix("MODEL_HASH ")).expect("a hash").to_string()
}

/// Two hosts of two workers (distinct loopback addresses): the job is the same model bits
/// with no failure and after a host's leader (rank 2) is SIGKILLed amid hierarchical
/// allreduces and replaced.
#[test]
fn sigkill_of_a_host_leader_during_hierarchical_allreduces_recovers_the_model() {
    let want = two_host_job(None);
    assert_eq!(two_host_job(Some(2)), want, "the model after the SIGKILL differs");
}

/// `kill -9` from outside at seeded random times and victims.
#[test]
fn twenty_seeded_random_kill_schedules() {
    let args = ["--iters", "60", "--compute-ms", "4"];
    let want = clean(4, &args);
    for seed in 0..20u64 {
        let mut rnd = Rng::new(seed);
        let kills = 1 + rnd.below(2);
        let plan: Vec<(u64, u64)> = (0..kills).map(|_| (60 + rnd.below(90), rnd.below(4))).collect();
        let r = train(4, &[], &args, &[], |job| {
            for (delay_ms, victim) in &plan {
                std::thread::sleep(Duration::from_millis(*delay_ms));
                let out = Command::new("pgrep").args(["-P", &job.launcher.to_string()]).output().unwrap();
                let pids: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
                if let Some(pid) = pids.get(*victim as usize % pids.len().max(1)) {
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                }
            }
        });
        assert!(r.ok(), "seed {seed} plan {plan:?}: job failed:\n{}", r.stderr);
        assert_eq!(r.hash().as_deref(), Some(want.as_str()), "seed {seed} plan {plan:?}");
    }
}

/// The latency histograms time a call from its start to its return on the calling worker, so
/// a survivor's call that waited for a slow replacement shows the wait (its max), not only the
/// final transfer after the re-link.
#[test]
fn latency_histograms_include_the_wait_for_a_replacement() {
    let args = ["--iters", "8", "--rejoin-delay-ms", "1500"];
    let r = mocked(3, "1,4,0,0", &args);
    assert!(r.ok(), "job failed:\n{}", r.stderr);
    // Rank 0's summary: "... on 3 workers: allreduce(tree): n=17 p50=..us p99=..us max=..us; ..."
    let line =
        r.stderr.lines().find(|l| l.contains("iterations of") && l.contains("allreduce(")).expect("summary line");
    let max_us = |kind: &str| -> u64 {
        let part = line.split("; ").find(|p| p.contains(kind)).unwrap_or_else(|| panic!("no {kind} in {line}"));
        part.rsplit("max=").next().unwrap().trim_end_matches(|c: char| !c.is_ascii_digit()).parse().unwrap()
    };
    let slowest = max_us("allreduce(");
    assert!(slowest >= 1_500_000, "the allreduce that waited for the replacement took {slowest} us: {line}");
}

#[test]
fn fail_all_resumes_from_the_durable_checkpoint() {
    let args = ["--iters", "12"];
    let want = clean(4, &args);
    let r = train(4, &["--recovery", "fail-all"], &args, &[("WARREN_MOCK", "1,6,2,0")], |_| {});
    assert_recovered(&r, &want, 1, "fail-all");
    assert!(r.stderr.contains("loaded durable checkpoint version 6"), "{}", r.stderr);
}

#[test]
fn unrecoverable_losses_fail_every_worker_clearly() {
    // Rank 9's local model lives only on rank 0; both die at once.
    let r = train(
        10,
        &[],
        &["--iters", "12"],
        &[("WARREN_MOCK", "0,5,2,0;9,5,2,0"), ("WARREN_LOCAL_REPLICAS", "1")],
        |_| {},
    );
    assert!(!r.ok());
    assert_eq!(r.restarts(), 2, "the launcher stops at the first report instead of restarting everyone");
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warren: error:")).collect();
    assert!(!errors.is_empty(), "{}", r.stderr);
    for e in &errors {
        // Whether rank 0 came back before rank 9 died decides which of the two causes is named.
        assert!(e.contains("recovery impossible") && e.contains("local model of rank 9"), "{e}");
    }
    // Without the bootstrap cache, a worker restarted after the first checkpoint cannot replay
    // the calls made before it.
    let r = train(4, &[], &["--iters", "12"], &[("WARREN_MOCK", "2,5,1,0"), ("WARREN_BOOTSTRAP_CACHE", "0")], |_| {});
    assert!(!r.ok());
    assert!(r.stderr.contains("recovery impossible") && r.stderr.contains("bootstrap"), "{}", r.stderr);
    assert!(
        r.stderr.lines().filter(|l| l.contains("warren: error:")).all(|l| l.contains("recovery impossible")),
        "{}",
        r.stderr
    );
}

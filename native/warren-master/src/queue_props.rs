//! Property tests of the task queue: random interleavings of trainers getting, finishing
//! and failing tasks, deadlines passing, and the master restarting from a JSON snapshot
//! plus JSON change log. A model of what the trainers were told checks every answer.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::queue::tests::chunks;
use super::*;

#[derive(Clone, Debug)]
enum Op {
    /// A trainer asks for a task of the model's pass plus `pass_offset` (-1, 0 or 1).
    Get { pass_offset: i8 },
    /// A trainer reports a hand-out it once received as finished, `after_ms` later; with
    /// `bump` it reports an epoch that was never handed out.
    Finish { pick: usize, after_ms: u64, bump: bool },
    /// A trainer reports a hand-out it once received as failed.
    Fail { pick: usize },
    /// Time passes and the master expires overdue tasks.
    Tick { advance_ms: u64 },
    /// A trainer reports the dataset again.
    SetDatasetAgain,
    /// The master stores a snapshot and cuts its log.
    Compact,
    /// The master dies and restarts from snapshot + log (both through JSON), optionally
    /// extending deadlines as a service does after a restart.
    Restart { resume: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop_oneof![Just(0i8), Just(0), Just(0), Just(-1), Just(1)]
            .prop_map(|pass_offset| Op::Get { pass_offset }),
        6 => (any::<usize>(), 0u64..150, prop::bool::weighted(0.1))
            .prop_map(|(pick, after_ms, bump)| Op::Finish { pick, after_ms, bump }),
        2 => any::<usize>().prop_map(|pick| Op::Fail { pick }),
        2 => (0u64..300).prop_map(|advance_ms| Op::Tick { advance_ms }),
        1 => Just(Op::SetDatasetAgain),
        1 => Just(Op::Compact),
        1 => any::<bool>().prop_map(|resume| Op::Restart { resume }),
    ]
}

fn settings() -> impl Strategy<Value = QueueSettings> {
    (0u32..4, any::<bool>(), 1u32..5, any::<u64>()).prop_map(|(max_failures, retry, window, seed)| QueueSettings {
        max_failures,
        initial_timeout_ms: 100,
        timeout_factor: 2.0,
        min_timeout_ms: 10,
        max_timeout_ms: 200,
        average_window: window,
        seed,
        retry_failed_next_pass: retry,
    })
}

/// The queue under test, its durable image, and a model of what trainers were told.
struct Harness {
    settings: QueueSettings,
    q: Queue,
    dataset: (Vec<ChunkRef>, u32),
    now: Millis,
    /// JSON of the last compacted snapshot.
    snapshot_json: Option<String>,
    /// Changes since that snapshot.
    log: Vec<Change>,
    /// Every change ever made.
    full_log: Vec<Change>,
    /// Every hand-out ever received: (task, epoch).
    held: Vec<(TaskId, u64)>,
    /// The hand-outs the model believes live: task -> epoch.
    live: BTreeMap<TaskId, u64>,
    /// The model's pass.
    pass: u64,
    /// Tasks finished (accepted) in the model's pass.
    finished: BTreeSet<TaskId>,
    /// Failures per task in the model's pass.
    failures: BTreeMap<TaskId, u32>,
    /// Tasks the model believes given up on.
    discarded: BTreeSet<TaskId>,
    passes_seen: u64,
}

impl Harness {
    fn new(settings: QueueSettings, n_chunks: u64, per_task: u32) -> Harness {
        let mut q = Queue::new(settings.clone()).unwrap();
        let out = q.set_dataset(chunks(n_chunks), per_task).unwrap();
        let mut h = Harness {
            settings,
            q,
            dataset: (chunks(n_chunks), per_task),
            now: 0,
            snapshot_json: None,
            log: Vec::new(),
            full_log: Vec::new(),
            held: Vec::new(),
            live: BTreeMap::new(),
            pass: 0,
            finished: BTreeSet::new(),
            failures: BTreeMap::new(),
            discarded: BTreeSet::new(),
            passes_seen: 0,
        };
        h.record(out.changes);
        h
    }

    fn n(&self) -> usize {
        self.q.task_count()
    }

    /// Keeps changes and checks that they are numbered on from the last one.
    fn record(&mut self, changes: Vec<Change>) {
        let first = self.full_log.last().map_or(1, |c| c.seq + 1);
        for (i, c) in changes.iter().enumerate() {
            assert_eq!(c.seq, first + i as u64, "changes are numbered without gaps");
        }
        assert_eq!(self.q.seq(), first + changes.len() as u64 - 1);
        self.log.extend(changes.iter().cloned());
        self.full_log.extend(changes);
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Get { pass_offset } => self.get(pass_offset),
            Op::Finish { pick, after_ms, bump } => self.report(pick, bump, Some(after_ms)),
            Op::Fail { pick } => self.report(pick, false, None),
            Op::Tick { advance_ms } => self.tick(advance_ms),
            Op::SetDatasetAgain => {
                let before = self.q.snapshot();
                let out = self.q.set_dataset(self.dataset.0.clone(), self.dataset.1).unwrap();
                assert!(out.changes.is_empty());
                assert_eq!(self.q.snapshot(), before);
            }
            Op::Compact => {
                self.snapshot_json = Some(serde_json::to_string(&self.q.snapshot()).unwrap());
                self.log.clear();
            }
            Op::Restart { resume } => self.restart(resume),
        }
        self.check();
    }

    fn get(&mut self, pass_offset: i8) {
        let asked = self.pass.saturating_add_signed(i64::from(pass_offset));
        let before = self.q.snapshot();
        let out = self.q.get_task(asked, self.now).unwrap();
        let no_change = out.changes.is_empty();
        self.record(out.changes);
        match out.reply {
            GetTask::Task(t) => {
                assert_eq!(asked, self.pass);
                assert_eq!(t.pass, self.pass);
                assert!(!self.live.contains_key(&t.id), "task {} handed out twice", t.id);
                assert!(!self.finished.contains(&t.id), "task {} handed out after done", t.id);
                assert!(!self.discarded.contains(&t.id), "failed task {} handed out", t.id);
                let older = self.held.iter().filter(|(id, _)| *id == t.id).map(|(_, e)| *e).max();
                assert!(older.is_none_or(|e| e < t.epoch), "epochs grow");
                assert_eq!(t.chunks, self.q.task_chunks(t.id).unwrap());
                self.live.insert(t.id, t.epoch);
                self.held.push((t.id, t.epoch));
            }
            reply => {
                assert!(no_change, "{reply:?} changes nothing");
                assert_eq!(self.q.snapshot(), before);
                match reply {
                    GetTask::PassFinished { current_pass } => {
                        assert!(asked < self.pass);
                        assert_eq!(current_pass, self.pass);
                    }
                    GetTask::WrongPass { current_pass } => {
                        assert!(asked > self.pass);
                        assert_eq!(current_pass, self.pass);
                    }
                    GetTask::NoMoreTasksNow => {
                        assert_eq!(asked, self.pass);
                        assert!(!self.live.is_empty(), "nothing pending, yet 'try later'");
                    }
                    GetTask::AllTasksFailed => {
                        assert_eq!(asked, self.pass);
                        assert!(self.live.is_empty() && self.finished.is_empty());
                        assert!(!self.discarded.is_empty());
                    }
                    GetTask::Task(_) => unreachable!(),
                }
            }
        }
    }

    /// Finishes (`finish_after = Some`) or fails a hand-out the trainers once received.
    fn report(&mut self, pick: usize, bump: bool, finish_after: Option<Millis>) {
        let Some(&(id, epoch)) = self.held.get(pick % self.held.len().max(1)) else {
            return;
        };
        let epoch = epoch + u64::from(bump);
        let expect_live = self.live.get(&id) == Some(&epoch);
        let before = self.q.snapshot();
        let out = match finish_after {
            Some(after) => {
                self.now += after;
                self.q.task_finished(id, epoch, self.now).unwrap()
            }
            None => self.q.task_failed(id, epoch, "trainer crashed").unwrap(),
        };
        match out.reply {
            Ack::Stale => {
                assert!(!expect_live, "live hand-out {id}/{epoch} reported stale");
                assert!(out.changes.is_empty(), "a stale report made changes");
                assert_eq!(self.q.snapshot(), before, "a stale report changed the state");
            }
            Ack::Accepted => {
                assert!(expect_live, "dead hand-out {id}/{epoch} accepted");
                self.live.remove(&id);
                if finish_after.is_some() {
                    assert!(self.finished.insert(id), "task {id} done twice in a pass");
                } else {
                    self.count_failure(id);
                }
            }
        }
        self.record(out.changes);
        self.after_progress();
    }

    fn tick(&mut self, advance_ms: Millis) {
        self.now += advance_ms;
        let overdue: BTreeSet<TaskId> =
            self.q.pending_tasks().filter(|(_, p)| p.deadline_ms <= self.now).map(|(id, _)| id).collect();
        let out = self.q.tick(self.now);
        let expired: BTreeSet<TaskId> = out.reply.iter().copied().collect();
        assert_eq!(expired, overdue, "tick expires exactly the overdue tasks");
        for id in &out.reply {
            assert!(self.live.remove(id).is_some(), "expired task {id} was not live");
            self.count_failure(*id);
        }
        assert!(self.q.pending_tasks().all(|(_, p)| p.deadline_ms > self.now));
        self.record(out.changes);
        self.after_progress();
    }

    fn count_failure(&mut self, id: TaskId) {
        let f = self.failures.entry(id).or_insert(0);
        *f += 1;
        if *f > self.settings.max_failures {
            self.discarded.insert(id);
        }
    }

    fn restart(&mut self, resume: bool) {
        let snapshot = self.snapshot_json.as_deref().map(|j| serde_json::from_str(j).unwrap());
        let log: Vec<Change> = serde_json::from_str(&serde_json::to_string(&self.log).unwrap()).unwrap();
        let rebuilt = Queue::restore(self.settings.clone(), snapshot, log).unwrap();
        assert_eq!(rebuilt.snapshot(), self.q.snapshot(), "restart rebuilt another state");
        assert_eq!(rebuilt.next_deadline(), self.q.next_deadline());
        self.q = rebuilt;
        if resume {
            let out = self.q.resume(self.now);
            self.record(out.changes);
        }
    }

    /// After a finish, failure or timeout: did the pass advance exactly when it should?
    fn after_progress(&mut self) {
        let all: BTreeSet<TaskId> = (0..self.n() as u64).map(TaskId).collect();
        let accounted: BTreeSet<TaskId> = self.finished.union(&self.discarded).copied().collect();
        let should_end = accounted == all && !self.finished.is_empty();
        if self.q.pass() == self.pass {
            assert!(!should_end, "pass {} is complete but did not end", self.pass);
            return;
        }
        assert_eq!(self.q.pass(), self.pass + 1, "passes advance one at a time");
        assert!(should_end, "pass {} ended early: done {:?}, failed {:?}", self.pass, self.finished, self.discarded);
        assert!(self.live.is_empty());
        let c = self.q.counts();
        if self.settings.retry_failed_next_pass {
            assert_eq!((c.todo, c.failed), (self.n(), 0));
            self.discarded.clear();
        } else {
            assert_eq!((c.todo, c.failed), (self.finished.len(), self.discarded.len()));
        }
        self.pass += 1;
        self.passes_seen += 1;
        self.finished.clear();
        self.failures.clear();
    }

    fn check(&self) {
        self.q.check_settled().unwrap();
        assert_eq!(self.q.pass(), self.pass);
        let c = self.q.counts();
        assert_eq!(c.pending, self.live.len());
        assert_eq!(c.done, self.finished.len());
        assert_eq!(c.todo + c.pending + c.done + c.failed, self.n(), "no task lost");
        let failed: BTreeSet<TaskId> = self.q.failed_tasks().map(|(id, _)| id).collect();
        assert_eq!(failed, self.discarded);
        for (_, f) in self.q.failed_tasks() {
            assert_eq!(f.failures, self.settings.max_failures + 1, "failure counts are bounded");
        }
        for (id, n) in &self.failures {
            assert!(*n <= self.settings.max_failures + 1);
            assert_eq!(*n > self.settings.max_failures, self.discarded.contains(id));
        }
        for (id, p) in self.q.pending_tasks() {
            assert_eq!(self.live.get(&id), Some(&p.epoch));
        }
    }

    /// Trainers finish what they hold, then work until the pass ends (or cannot).
    fn drive_to_end_of_pass(&mut self) {
        let start = self.pass;
        for (id, epoch) in self.live.clone() {
            let out = self.q.task_finished(id, epoch, self.now).unwrap();
            assert_eq!(out.reply, Ack::Accepted);
            self.live.remove(&id);
            assert!(self.finished.insert(id));
            self.record(out.changes);
            self.after_progress();
            self.check();
        }
        for _ in 0..=self.n() {
            if self.pass > start {
                return;
            }
            let out = self.q.get_task(self.pass, self.now).unwrap();
            self.record(out.changes);
            match out.reply {
                GetTask::Task(t) => {
                    self.held.push((t.id, t.epoch));
                    let out = self.q.task_finished(t.id, t.epoch, self.now + 1).unwrap();
                    assert_eq!(out.reply, Ack::Accepted);
                    assert!(self.finished.insert(t.id));
                    self.record(out.changes);
                    self.after_progress();
                    self.check();
                }
                GetTask::AllTasksFailed => {
                    assert_eq!(self.discarded.len(), self.n(), "all failed, but not all are failed");
                    return;
                }
                other => panic!("unexpected {other:?} while draining pass {}", self.pass),
            }
        }
        assert!(self.pass > start, "pass {start} never ended");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_interleavings_keep_every_promise(
        settings in settings(),
        n_chunks in 1u64..16,
        per_task in 1u32..4,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut h = Harness::new(settings.clone(), n_chunks, per_task);
        h.check();
        for op in &ops {
            h.step(op);
        }
        h.drive_to_end_of_pass();
        // The whole history replays to the same state, from nothing or from any snapshot.
        let replayed = Queue::restore(settings.clone(), None, h.full_log.clone()).unwrap();
        prop_assert_eq!(replayed.snapshot(), h.q.snapshot());
        let mid = h.full_log.len() / 2;
        let mut prefix = Queue::restore(settings.clone(), None, h.full_log[..mid].to_vec()).unwrap();
        let snap = prefix.snapshot();
        for c in &h.full_log[mid..] {
            prefix.apply(c).unwrap();
        }
        prop_assert_eq!(prefix.snapshot(), h.q.snapshot());
        let from_snap = Queue::restore(settings, Some(snap), h.full_log.clone()).unwrap();
        prop_assert_eq!(from_snap.snapshot(), h.q.snapshot());
    }
}

#[test]
fn many_passes_with_failures_and_restarts() {
    // A long deterministic run: every pass completes, with timeouts and restarts mixed in.
    let settings = QueueSettings {
        max_failures: 2,
        initial_timeout_ms: 100,
        timeout_factor: 2.0,
        min_timeout_ms: 10,
        max_timeout_ms: 200,
        average_window: 4,
        seed: 3,
        retry_failed_next_pass: true,
    };
    let mut h = Harness::new(settings, 25, 2);
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..5000 {
        let r = next();
        let op = match r % 20 {
            0..=7 => Op::Get { pass_offset: 0 },
            8..=14 => Op::Finish { pick: (r >> 8) as usize, after_ms: (r >> 20) % 60, bump: false },
            15 => Op::Fail { pick: (r >> 8) as usize },
            16 | 17 => Op::Tick { advance_ms: (r >> 8) % 100 },
            18 => Op::Compact,
            _ => Op::Restart { resume: r & 1 == 0 },
        };
        h.step(&op);
    }
    h.drive_to_end_of_pass();
    assert!(h.passes_seen >= 5, "only {} passes in 5000 steps", h.passes_seen);
}

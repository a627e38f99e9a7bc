//! The task queue of the data master, as a pure state machine (no I/O, no clock).
//!
//! A dataset is a list of [`ChunkRef`]s. It is cut into tasks of `chunks_per_task`
//! consecutive chunks (a task may span two files); task ids are `0..n` in dataset order.
//! Every task is in exactly one of four places:
//!
//! - **todo**: waiting to be handed out, in a per-pass shuffled order;
//! - **pending**: handed out, with an epoch and a deadline;
//! - **done**: finished in the current pass;
//! - **failed**: failed or timed out more than
//!   [`max_failures`](QueueSettings::max_failures) times.
//!
//! Each call that changes the state returns the [`Change`]s it made in an [`Output`]; the
//! caller makes them durable (see [`warren_store`]) *before* it answers the trainer. The
//! same changes fed to [`Queue::apply`] on a [`Snapshot`] rebuild exactly the same state:
//! the live calls themselves go through `apply`, so there is one code path for both.
//! (The network service makes one exception by default: a plain hand-out is answered
//! before it is durable. A crash that forgets it puts the task back in todo, and its epoch
//! may be handed out again; a report under that epoch then stands for the new hand-out,
//! which is right either way, since both hold the same data: delivery stays at-least-once.
//! See `MasterConfig::durable_hand_outs`.)
//!
//! Time is whatever the caller passes as `now` in milliseconds ([`Millis`]). Deadlines are
//! stored as absolute times on that clock, so a service that wants deadlines to survive a
//! restart should pass wall-clock milliseconds, and call [`Queue::resume`] after a restart.
//!
//! Rules, in the words of the seed design where it has them:
//!
//! - The first `set_dataset` wins; the same dataset again is a no-op; another is an error.
//! - Each hand-out of a task increments its *epoch*. `task_finished` / `task_failed` act
//!   only on the live hand-out (task pending with that epoch); anything else is *stale*
//!   and changes nothing. Epochs never restart, not even at a new pass, so a late report
//!   from an earlier pass is always stale. A task that timed out is requeued and its old
//!   epoch is dead, even if the trainer finishes it a moment later.
//! - A failure or a timeout requeues the task at the back of todo; the failure that makes
//!   a task's count exceed `max_failures` moves it to failed and logs why.
//! - When todo and pending are both empty and at least one task is done, the pass is over:
//!   the pass number increments, the done tasks go back to todo in a new shuffled order,
//!   and their failure counts reset to zero (the seed: "reset the timeout counter of all
//!   tasks to zero").
//! - Failed tasks stay failed for the rest of the job by default (the seed: such a task "is
//!   likely to cause a trainer to crash, so it will be discarded"). With
//!   [`QueueSettings::retry_failed_next_pass`] they get a fresh start at every new pass.
//! - If every task of a pass failed, nothing is done, so no new pass can start:
//!   [`GetTask::AllTasksFailed`] is final.
//! - The timeout of a hand-out is the moving average of completion durations times
//!   [`timeout_factor`](QueueSettings::timeout_factor), clamped to
//!   [`min_timeout_ms`, `max_timeout_ms`](QueueSettings); before the first completion it
//!   is [`initial_timeout_ms`](QueueSettings::initial_timeout_ms) (clamped the same way).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::change::{Change, ChangeKind, FailReason};
use super::shuffle::shuffle;
use warren_base::error::{Error, Result};

pub use super::task::{ChunkRef, Millis, TaskId};

/// A task handed out to a trainer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Which task.
    pub id: TaskId,
    /// The epoch of this hand-out; report it back with the outcome.
    pub epoch: u64,
    /// The pass the task belongs to.
    pub pass: u64,
    /// The chunks to process, in dataset order.
    pub chunks: Vec<ChunkRef>,
}

/// Answer to [`Queue::get_task`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GetTask {
    /// Work on this task.
    Task(Task),
    /// The pass the trainer asked about is over; the master is at `current_pass` now.
    PassFinished {
        /// The master's current pass.
        current_pass: u64,
    },
    /// Nothing to hand out now, but tasks are pending: one may fail or time out and come
    /// back. Ask again later.
    NoMoreTasksNow,
    /// Every remaining task of the pass failed too often; the job cannot make progress.
    AllTasksFailed,
    /// The trainer asked for a pass the master has not reached.
    WrongPass {
        /// The master's current pass.
        current_pass: u64,
    },
}

/// Answer to [`Queue::task_finished`] and [`Queue::task_failed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ack {
    /// The report was about the live hand-out of the task and was recorded.
    Accepted,
    /// The report was about an older hand-out (or the task is not pending): ignored.
    Stale,
}

/// What a state-changing call returns: the answer for the trainer and the changes to make
/// durable before sending it.
#[must_use = "the changes must be made durable before the reply is sent"]
#[derive(Clone, Debug, PartialEq)]
pub struct Output<R> {
    /// The answer for the caller.
    pub reply: R,
    /// The changes made, in order (empty when nothing changed).
    pub changes: Vec<Change>,
}

/// Tunables of the queue. None of them is persisted: changes record decisions, so a
/// master restarted with other settings replays its log unchanged and applies the new
/// settings from then on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSettings {
    /// A task whose failures and timeouts in one pass exceed this count is moved to
    /// failed. Default 3 (a task gets 4 attempts per pass).
    pub max_failures: u32,
    /// Timeout of a hand-out before any task has completed. Default 10 minutes.
    pub initial_timeout_ms: Millis,
    /// Timeout = moving average of completion durations × this factor. Default 3.0.
    pub timeout_factor: f64,
    /// Lower bound of a timeout. Default 30 seconds.
    pub min_timeout_ms: Millis,
    /// Upper bound of a timeout. Default 1 hour.
    pub max_timeout_ms: Millis,
    /// The moving average weighs each new completion duration by `1 / average_window`
    /// (an exponential moving average, like TCP's round-trip estimate). Default 8.
    pub average_window: u32,
    /// Seed of the per-pass shuffle of the todo queue. Default 0.
    pub seed: u64,
    /// Whether failed tasks are retried at the next pass (with a fresh failure count)
    /// instead of staying failed for the rest of the job. Default false.
    pub retry_failed_next_pass: bool,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            max_failures: 3,
            initial_timeout_ms: 10 * 60 * 1000,
            timeout_factor: 3.0,
            min_timeout_ms: 30 * 1000,
            max_timeout_ms: 60 * 60 * 1000,
            average_window: 8,
            seed: 0,
            retry_failed_next_pass: false,
        }
    }
}

impl QueueSettings {
    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<()> {
        if self.min_timeout_ms > self.max_timeout_ms {
            return Err(Error::Config(format!(
                "master min_timeout_ms {} exceeds max_timeout_ms {}",
                self.min_timeout_ms, self.max_timeout_ms
            )));
        }
        if !(self.timeout_factor.is_finite() && self.timeout_factor > 0.0) {
            return Err(Error::Config(format!(
                "master timeout_factor must be a positive number, got {}",
                self.timeout_factor
            )));
        }
        if self.average_window == 0 {
            return Err(Error::Config("master average_window must be at least 1".into()));
        }
        Ok(())
    }
}

/// How many tasks are in each place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounts {
    /// Waiting to be handed out.
    pub todo: usize,
    /// Handed out, not yet finished.
    pub pending: usize,
    /// Finished in the current pass.
    pub done: usize,
    /// Given up on.
    pub failed: usize,
}

/// A handed-out task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTask {
    /// Epoch of the live hand-out.
    pub epoch: u64,
    /// When it was handed out.
    pub dispatched_ms: Millis,
    /// When it times out.
    pub deadline_ms: Millis,
}

/// A task given up on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedTask {
    /// The pass in which it failed for the last time.
    pub pass: u64,
    /// Failures in that pass, the last one included.
    pub failures: u32,
    /// Why the last attempt failed.
    pub reason: FailReason,
}

/// The complete state of a queue at one point of its history, to be stored and restored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    format: u32,
    state: State,
}

impl Snapshot {
    /// The version of the snapshot layout this build reads and writes.
    pub const FORMAT: u32 = 1;

    /// Sequence number of the last change included in this snapshot (0: none).
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// The pass the queue was in.
    pub fn pass(&self) -> u64 {
        self.state.pass
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Dataset {
    chunks: Vec<ChunkRef>,
    chunks_per_task: u32,
}

impl Dataset {
    fn task_count(&self) -> usize {
        self.chunks.len().div_ceil(self.chunks_per_task as usize)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Status {
    Todo,
    Pending,
    Done,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct TaskMeta {
    /// Epoch of the latest hand-out (0: never handed out).
    epoch: u64,
    /// Failures and timeouts in the current pass.
    failures: u32,
    status: Status,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    seq: u64,
    dataset: Option<Dataset>,
    pass: u64,
    tasks: Vec<TaskMeta>,
    todo: VecDeque<TaskId>,
    pending: BTreeMap<TaskId, PendingTask>,
    done: Vec<TaskId>,
    failed: BTreeMap<TaskId, FailedTask>,
    avg_duration_ms: Option<Millis>,
}

impl State {
    fn empty() -> Self {
        State {
            seq: 0,
            dataset: None,
            pass: 0,
            tasks: Vec::new(),
            todo: VecDeque::new(),
            pending: BTreeMap::new(),
            done: Vec::new(),
            failed: BTreeMap::new(),
            avg_duration_ms: None,
        }
    }
}

/// The task queue. See the [module documentation](self) for its rules.
#[derive(Clone, Debug)]
pub struct Queue {
    settings: QueueSettings,
    state: State,
    /// Index of pending deadlines, derived from `state.pending` (not persisted).
    deadlines: BTreeSet<(Millis, TaskId)>,
}

fn invalid(seq: u64, reason: impl Into<String>) -> Error {
    Error::InvalidChange { seq, reason: reason.into() }
}

fn no_changes<R>(reply: R) -> Output<R> {
    Output { reply, changes: Vec::new() }
}

impl Queue {
    /// An empty queue, waiting for [`set_dataset`](Self::set_dataset).
    pub fn new(settings: QueueSettings) -> Result<Queue> {
        settings.validate()?;
        Ok(Queue { settings, state: State::empty(), deadlines: BTreeSet::new() })
    }

    /// The queue a snapshot describes.
    pub fn from_snapshot(settings: QueueSettings, snapshot: Snapshot) -> Result<Queue> {
        settings.validate()?;
        if snapshot.format != Snapshot::FORMAT {
            return Err(invalid(
                snapshot.state.seq,
                format!("snapshot format {} is not supported (this build reads {})", snapshot.format, Snapshot::FORMAT),
            ));
        }
        let deadlines = snapshot.state.pending.iter().map(|(id, p)| (p.deadline_ms, *id)).collect();
        let queue = Queue { settings, state: snapshot.state, deadlines };
        queue
            .check_invariants()
            .map_err(|reason| invalid(queue.state.seq, format!("inconsistent snapshot: {reason}")))?;
        Ok(queue)
    }

    /// Rebuilds a queue from an optional snapshot and the changes logged after it. Changes
    /// the snapshot already contains (`seq <= snapshot.seq()`) are skipped, so the whole
    /// log may be passed.
    pub fn restore(
        settings: QueueSettings,
        snapshot: Option<Snapshot>,
        changes: impl IntoIterator<Item = Change>,
    ) -> Result<Queue> {
        let mut queue = match snapshot {
            Some(s) => Queue::from_snapshot(settings, s)?,
            None => Queue::new(settings)?,
        };
        for change in changes {
            if change.seq > queue.state.seq {
                queue.apply(&change)?;
            }
        }
        Ok(queue)
    }

    /// The current state, to be stored.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { format: Snapshot::FORMAT, state: self.state.clone() }
    }

    /// The settings in force.
    pub fn settings(&self) -> &QueueSettings {
        &self.settings
    }

    /// Sequence number of the last change applied (0: none).
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// The current pass, from 0.
    pub fn pass(&self) -> u64 {
        self.state.pass
    }

    /// Whether a dataset has been set.
    pub fn has_dataset(&self) -> bool {
        self.state.dataset.is_some()
    }

    /// Number of tasks in the dataset (0 before it is set).
    pub fn task_count(&self) -> usize {
        self.state.tasks.len()
    }

    /// How many tasks are in each place.
    pub fn counts(&self) -> QueueCounts {
        QueueCounts {
            todo: self.state.todo.len(),
            pending: self.state.pending.len(),
            done: self.state.done.len(),
            failed: self.state.failed.len(),
        }
    }

    /// The tasks handed out and not yet finished, by id.
    pub fn pending_tasks(&self) -> impl Iterator<Item = (TaskId, &PendingTask)> {
        self.state.pending.iter().map(|(id, p)| (*id, p))
    }

    /// The tasks given up on, by id.
    pub fn failed_tasks(&self) -> impl Iterator<Item = (TaskId, &FailedTask)> {
        self.state.failed.iter().map(|(id, f)| (*id, f))
    }

    /// The chunks of a task, or `None` for an unknown id.
    pub fn task_chunks(&self, id: TaskId) -> Option<&[ChunkRef]> {
        let ds = self.state.dataset.as_ref()?;
        let per = ds.chunks_per_task as usize;
        let start = usize::try_from(id.0).ok()?.checked_mul(per)?;
        if start >= ds.chunks.len() {
            return None;
        }
        Some(&ds.chunks[start..(start + per).min(ds.chunks.len())])
    }

    /// The moving average of completion durations, once a task has completed.
    pub fn average_duration_ms(&self) -> Option<Millis> {
        self.state.avg_duration_ms
    }

    /// The timeout a task handed out now would get.
    pub fn timeout_ms(&self) -> Millis {
        let s = &self.settings;
        let base = match self.state.avg_duration_ms {
            None => s.initial_timeout_ms,
            // `as` saturates at u64::MAX; the product is only used to pick a deadline,
            // which the change records, so float rounding cannot affect a replay.
            Some(avg) => (avg as f64 * s.timeout_factor).round() as u64,
        };
        base.clamp(s.min_timeout_ms, s.max_timeout_ms)
    }

    /// The earliest deadline of a pending task: when [`tick`](Self::tick) next has work.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Sets the dataset: the first call splits `chunks` into tasks of `chunks_per_task`
    /// consecutive chunks and starts pass 0; a later call with the same arguments changes
    /// nothing; a later call with different ones is [`Error::DatasetMismatch`].
    pub fn set_dataset(&mut self, chunks: Vec<ChunkRef>, chunks_per_task: u32) -> Result<Output<()>> {
        if let Some(ds) = &self.state.dataset {
            if ds.chunks_per_task == chunks_per_task && ds.chunks == chunks {
                return Ok(no_changes(()));
            }
            return Err(Error::DatasetMismatch(format!(
                "the master holds {} chunks in tasks of {}; a trainer reported {} chunks in tasks \
                 of {}{}",
                ds.chunks.len(),
                ds.chunks_per_task,
                chunks.len(),
                chunks_per_task,
                first_difference(&ds.chunks, &chunks)
            )));
        }
        if chunks_per_task == 0 {
            return Err(Error::InvalidArgument("chunks_per_task must be at least 1".into()));
        }
        if chunks.is_empty() {
            return Err(Error::InvalidArgument("the dataset has no chunks".into()));
        }
        let n = chunks.len().div_ceil(chunks_per_task as usize) as u64;
        let mut todo: Vec<TaskId> = (0..n).map(TaskId).collect();
        shuffle(&mut todo, self.settings.seed, 0);
        log::info!("dataset set: {} chunks in {n} tasks of {chunks_per_task}", chunks.len());
        let mut changes = Vec::with_capacity(1);
        self.commit(ChangeKind::DatasetSet { chunks, chunks_per_task, todo }, &mut changes);
        Ok(Output { reply: (), changes })
    }

    /// Hands out the next task of pass `pass` at time `now`. See [`GetTask`] for the
    /// answers. Asking before a dataset is set is [`Error::InvalidArgument`].
    pub fn get_task(&mut self, pass: u64, now: Millis) -> Result<Output<GetTask>> {
        if self.state.dataset.is_none() {
            return Err(Error::InvalidArgument("no dataset has been set yet".into()));
        }
        let current_pass = self.state.pass;
        if pass < current_pass {
            return Ok(no_changes(GetTask::PassFinished { current_pass }));
        }
        if pass > current_pass {
            return Ok(no_changes(GetTask::WrongPass { current_pass }));
        }
        let Some(&id) = self.state.todo.front() else {
            let reply = if self.state.pending.is_empty() { GetTask::AllTasksFailed } else { GetTask::NoMoreTasksNow };
            return Ok(no_changes(reply));
        };
        let epoch = self.state.tasks[id.0 as usize].epoch + 1;
        let deadline_ms = now.saturating_add(self.timeout_ms());
        let mut changes = Vec::with_capacity(1);
        self.commit(ChangeKind::Dispatched { task: id, epoch, dispatched_ms: now, deadline_ms }, &mut changes);
        let chunks = self.task_chunks(id).expect("a queued task has chunks").to_vec();
        Ok(Output { reply: GetTask::Task(Task { id, epoch, pass: current_pass, chunks }), changes })
    }

    /// Records that hand-out `epoch` of task `id` finished at `now`. A report about
    /// anything but the live hand-out is [`Ack::Stale`] and changes nothing; an id outside
    /// the dataset is [`Error::InvalidArgument`].
    pub fn task_finished(&mut self, id: TaskId, epoch: u64, now: Millis) -> Result<Output<Ack>> {
        self.check_id(id)?;
        let Some(p) = self.state.pending.get(&id).filter(|p| p.epoch == epoch) else {
            return Ok(no_changes(Ack::Stale));
        };
        let sample = now.saturating_sub(p.dispatched_ms);
        let avg_duration_ms = match self.state.avg_duration_ms {
            None => sample,
            Some(avg) => {
                let w = u128::from(self.settings.average_window);
                ((u128::from(avg) * (w - 1) + u128::from(sample)) / w) as u64
            }
        };
        let mut changes = Vec::with_capacity(1);
        self.commit(ChangeKind::Finished { task: id, epoch, avg_duration_ms }, &mut changes);
        self.maybe_start_pass(&mut changes);
        Ok(Output { reply: Ack::Accepted, changes })
    }

    /// Records that hand-out `epoch` of task `id` failed, with the trainer's reason. Same
    /// staleness rules as [`task_finished`](Self::task_finished).
    pub fn task_failed(&mut self, id: TaskId, epoch: u64, reason: impl Into<String>) -> Result<Output<Ack>> {
        self.check_id(id)?;
        if self.state.pending.get(&id).is_none_or(|p| p.epoch != epoch) {
            return Ok(no_changes(Ack::Stale));
        }
        let mut changes = Vec::with_capacity(1);
        self.fail_pending(id, epoch, FailReason::Reported(reason.into()), &mut changes);
        Ok(Output { reply: Ack::Accepted, changes })
    }

    /// Expires every pending task whose deadline is at or before `now`; each counts as a
    /// failure. Returns the expired task ids. Call it periodically, or at
    /// [`next_deadline`](Self::next_deadline).
    pub fn tick(&mut self, now: Millis) -> Output<Vec<TaskId>> {
        let expired: Vec<(Millis, TaskId)> =
            self.deadlines.iter().take_while(|(deadline, _)| *deadline <= now).copied().collect();
        let mut changes = Vec::new();
        let mut ids = Vec::with_capacity(expired.len());
        for (deadline_ms, id) in expired {
            let epoch = self.state.pending[&id].epoch;
            log::info!("task {id} epoch {epoch} timed out (deadline {deadline_ms} ms, now {now} ms)");
            self.fail_pending(id, epoch, FailReason::TimedOut { deadline_ms }, &mut changes);
            ids.push(id);
        }
        Output { reply: ids, changes }
    }

    /// Gives every pending task at least a full timeout from `now`. Call it once after
    /// rebuilding the queue from a store, so that the time the master was down does not
    /// count against trainers that kept working.
    pub fn resume(&mut self, now: Millis) -> Output<()> {
        let min_deadline_ms = now.saturating_add(self.timeout_ms());
        let mut changes = Vec::new();
        if self.state.pending.values().any(|p| p.deadline_ms < min_deadline_ms) {
            self.commit(ChangeKind::DeadlinesExtended { min_deadline_ms }, &mut changes);
        }
        Output { reply: (), changes }
    }

    /// Applies a logged change. The change must be the next one (`seq == self.seq() + 1`)
    /// and fit the state; otherwise [`Error::InvalidChange`] is returned and the queue is
    /// left as it was.
    pub fn apply(&mut self, change: &Change) -> Result<()> {
        let seq = change.seq;
        if seq != self.state.seq + 1 {
            return Err(invalid(seq, format!("expected change {}", self.state.seq + 1)));
        }
        let st = &mut self.state;
        match &change.kind {
            ChangeKind::DatasetSet { chunks, chunks_per_task, todo } => {
                if st.dataset.is_some() {
                    return Err(invalid(seq, "the dataset is already set"));
                }
                if *chunks_per_task == 0 || chunks.is_empty() {
                    return Err(invalid(seq, "empty dataset or zero chunks per task"));
                }
                let ds = Dataset { chunks: chunks.clone(), chunks_per_task: *chunks_per_task };
                let n = ds.task_count();
                let mut seen = vec![false; n];
                for id in todo {
                    match seen.get_mut(id.0 as usize) {
                        Some(s) if !*s => *s = true,
                        _ => {
                            return Err(invalid(seq, format!("todo order repeats or exceeds task {id}")));
                        }
                    }
                }
                if todo.len() != n {
                    return Err(invalid(seq, format!("todo order has {} of {n} tasks", todo.len())));
                }
                st.tasks = vec![TaskMeta { epoch: 0, failures: 0, status: Status::Todo }; n];
                st.todo = todo.iter().copied().collect();
                st.dataset = Some(ds);
            }
            ChangeKind::Dispatched { task, epoch, dispatched_ms, deadline_ms } => {
                if st.todo.front() != Some(task) {
                    return Err(invalid(seq, format!("task {task} is not at the front of todo")));
                }
                let meta = &mut st.tasks[task.0 as usize];
                if *epoch != meta.epoch + 1 {
                    return Err(invalid(seq, format!("task {task} epoch {epoch} after {}", meta.epoch)));
                }
                st.todo.pop_front();
                meta.epoch = *epoch;
                meta.status = Status::Pending;
                let p = PendingTask { epoch: *epoch, dispatched_ms: *dispatched_ms, deadline_ms: *deadline_ms };
                st.pending.insert(*task, p);
                self.deadlines.insert((*deadline_ms, *task));
            }
            ChangeKind::Finished { task, epoch, avg_duration_ms } => {
                take_pending(st, &mut self.deadlines, seq, *task, *epoch)?;
                st.tasks[task.0 as usize].status = Status::Done;
                st.done.push(*task);
                st.avg_duration_ms = Some(*avg_duration_ms);
            }
            ChangeKind::Requeued { task, epoch, failures, .. } => {
                check_failures(st, seq, *task, *failures)?;
                take_pending(st, &mut self.deadlines, seq, *task, *epoch)?;
                let meta = &mut st.tasks[task.0 as usize];
                meta.failures = *failures;
                meta.status = Status::Todo;
                st.todo.push_back(*task);
            }
            ChangeKind::Discarded { task, epoch, failures, reason } => {
                check_failures(st, seq, *task, *failures)?;
                take_pending(st, &mut self.deadlines, seq, *task, *epoch)?;
                let meta = &mut st.tasks[task.0 as usize];
                meta.failures = *failures;
                meta.status = Status::Failed;
                let f = FailedTask { pass: st.pass, failures: *failures, reason: reason.clone() };
                st.failed.insert(*task, f);
            }
            ChangeKind::PassStarted { pass, todo } => {
                if *pass != st.pass + 1 {
                    return Err(invalid(seq, format!("pass {pass} cannot follow pass {}", st.pass)));
                }
                if !st.todo.is_empty() || !st.pending.is_empty() {
                    return Err(invalid(seq, "a pass can only start when todo and pending are empty"));
                }
                let mut seen = vec![false; st.tasks.len()];
                let mut done_seen = 0;
                for id in todo {
                    let fits = match (seen.get_mut(id.0 as usize), st.tasks.get(id.0 as usize)) {
                        (Some(s), Some(meta)) if !*s => {
                            *s = true;
                            done_seen += usize::from(meta.status == Status::Done);
                            matches!(meta.status, Status::Done | Status::Failed)
                        }
                        _ => false,
                    };
                    if !fits {
                        return Err(invalid(seq, format!("task {id} cannot start pass {pass}")));
                    }
                }
                if done_seen != st.done.len() {
                    return Err(invalid(seq, format!("pass {pass} leaves out done tasks")));
                }
                for id in todo {
                    let meta = &mut st.tasks[id.0 as usize];
                    meta.failures = 0;
                    meta.status = Status::Todo;
                    st.failed.remove(id);
                }
                st.done.clear();
                st.todo = todo.iter().copied().collect();
                st.pass = *pass;
            }
            ChangeKind::DeadlinesExtended { min_deadline_ms } => {
                for (id, p) in st.pending.iter_mut() {
                    if p.deadline_ms < *min_deadline_ms {
                        self.deadlines.remove(&(p.deadline_ms, *id));
                        p.deadline_ms = *min_deadline_ms;
                        self.deadlines.insert((p.deadline_ms, *id));
                    }
                }
            }
        }
        st.seq = seq;
        Ok(())
    }

    /// Makes a change of our own: numbers it, applies it, and appends it to `out`.
    fn commit(&mut self, kind: ChangeKind, out: &mut Vec<Change>) {
        let change = Change { seq: self.state.seq + 1, kind };
        if let Err(e) = self.apply(&change) {
            // Only a bug in this file can get here: the live calls check everything
            // `apply` checks before they build a change.
            panic!("the queue made a change it cannot apply: {e}");
        }
        out.push(change);
    }

    fn check_id(&self, id: TaskId) -> Result<()> {
        if self.state.dataset.is_none() {
            return Err(Error::InvalidArgument("no dataset has been set yet".into()));
        }
        if id.0 >= self.state.tasks.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "task {id} does not exist (the dataset has {} tasks)",
                self.state.tasks.len()
            )));
        }
        Ok(())
    }

    /// Counts a failure of the live hand-out `epoch` of pending task `id`.
    fn fail_pending(&mut self, id: TaskId, epoch: u64, reason: FailReason, out: &mut Vec<Change>) {
        let failures = self.state.tasks[id.0 as usize].failures + 1;
        if failures > self.settings.max_failures {
            let until = if self.settings.retry_failed_next_pass { "the next pass" } else { "the end of the job" };
            log::warn!(
                "task {id} failed {failures} times in pass {} (limit {}), giving up on it until {until}; \
                 last failure: {reason}",
                self.state.pass,
                self.settings.max_failures
            );
            self.commit(ChangeKind::Discarded { task: id, epoch, failures, reason }, out);
        } else {
            log::info!(
                "task {id} epoch {epoch} failed ({failures} of {} allowed): {reason}",
                self.settings.max_failures
            );
            self.commit(ChangeKind::Requeued { task: id, epoch, failures, reason }, out);
        }
        self.maybe_start_pass(out);
    }

    /// Starts the next pass if this one is over: nothing to do or running, something done.
    fn maybe_start_pass(&mut self, out: &mut Vec<Change>) {
        let st = &self.state;
        if !st.todo.is_empty() || !st.pending.is_empty() || st.done.is_empty() {
            return;
        }
        let mut todo = st.done.clone();
        if self.settings.retry_failed_next_pass {
            todo.extend(st.failed.keys().copied());
        }
        todo.sort_unstable();
        let pass = st.pass + 1;
        shuffle(&mut todo, self.settings.seed, pass);
        log::info!(
            "pass {} finished with {} tasks done and {} failed; pass {pass} starts with {} tasks",
            st.pass,
            st.done.len(),
            st.failed.len(),
            todo.len()
        );
        self.commit(ChangeKind::PassStarted { pass, todo }, out);
    }

    /// Checks the structural invariants: every task in exactly one place, statuses and the
    /// deadline index agree with the queues. `Err` names the first violation.
    pub(crate) fn check_invariants(&self) -> std::result::Result<(), String> {
        let st = &self.state;
        let n = st.dataset.as_ref().map_or(0, Dataset::task_count);
        if st.tasks.len() != n {
            return Err(format!("{} task entries for {n} tasks", st.tasks.len()));
        }
        let mut place: Vec<Option<Status>> = vec![None; n];
        let mut put = |id: TaskId, status: Status| -> std::result::Result<(), String> {
            let slot = place.get_mut(id.0 as usize).ok_or_else(|| format!("unknown task {id}"))?;
            if let Some(prev) = slot {
                return Err(format!("task {id} is both {prev:?} and {status:?}"));
            }
            *slot = Some(status);
            Ok(())
        };
        for id in &st.todo {
            put(*id, Status::Todo)?;
        }
        for id in st.pending.keys() {
            put(*id, Status::Pending)?;
        }
        for id in &st.done {
            put(*id, Status::Done)?;
        }
        for id in st.failed.keys() {
            put(*id, Status::Failed)?;
        }
        for (i, (meta, p)) in st.tasks.iter().zip(&place).enumerate() {
            match p {
                None => return Err(format!("task {i} is lost (in no queue)")),
                Some(s) if *s != meta.status => {
                    return Err(format!("task {i} is in {s:?} but marked {:?}", meta.status));
                }
                _ => {}
            }
        }
        for (id, p) in &st.pending {
            if p.epoch != st.tasks[id.0 as usize].epoch {
                return Err(format!(
                    "pending task {id} has epoch {} but the task {}",
                    p.epoch, st.tasks[id.0 as usize].epoch
                ));
            }
        }
        let index: BTreeSet<(Millis, TaskId)> = st.pending.iter().map(|(id, p)| (p.deadline_ms, *id)).collect();
        if index != self.deadlines {
            return Err("the deadline index disagrees with pending".into());
        }
        Ok(())
    }

    /// [`check_invariants`](Self::check_invariants), plus what holds between operations
    /// (not between the changes of one): a pass that is over has been followed by the next.
    #[cfg(test)]
    pub(crate) fn check_settled(&self) -> std::result::Result<(), String> {
        self.check_invariants()?;
        let st = &self.state;
        if st.todo.is_empty() && st.pending.is_empty() && !st.done.is_empty() {
            return Err(format!("pass {} is over but the next has not started", st.pass));
        }
        Ok(())
    }
}

/// Removes pending task `task` if its live epoch is `epoch`.
fn take_pending(
    st: &mut State,
    deadlines: &mut BTreeSet<(Millis, TaskId)>,
    seq: u64,
    task: TaskId,
    epoch: u64,
) -> Result<PendingTask> {
    match st.pending.get(&task) {
        Some(p) if p.epoch == epoch => {}
        Some(p) => {
            return Err(invalid(seq, format!("task {task} is pending with epoch {}, not {epoch}", p.epoch)));
        }
        None => return Err(invalid(seq, format!("task {task} is not pending"))),
    }
    let p = st.pending.remove(&task).expect("checked above");
    deadlines.remove(&(p.deadline_ms, task));
    Ok(p)
}

fn check_failures(st: &State, seq: u64, task: TaskId, failures: u32) -> Result<()> {
    let had = st.tasks.get(task.0 as usize).map_or(0, |m| m.failures);
    if failures != had + 1 {
        return Err(invalid(seq, format!("task {task} failure {failures} after {had}")));
    }
    Ok(())
}

/// Describes where two chunk lists first differ, for the dataset mismatch error.
fn first_difference(ours: &[ChunkRef], theirs: &[ChunkRef]) -> String {
    match ours.iter().zip(theirs).position(|(a, b)| a != b) {
        Some(i) => format!(
            "; chunk {i} differs: held {}#{} vs reported {}#{}",
            ours[i].path, ours[i].index, theirs[i].path, theirs[i].index
        ),
        None => String::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n` chunks, three per file, 100 records each.
    pub(crate) fn chunks(n: u64) -> Vec<ChunkRef> {
        (0..n)
            .map(|i| ChunkRef {
                path: format!("/data/part-{}.recordio", i / 3),
                index: i % 3,
                offset: (i % 3) * 1000,
                len: 1000,
                records: 100,
            })
            .collect()
    }

    fn settings() -> QueueSettings {
        QueueSettings {
            max_failures: 2,
            initial_timeout_ms: 1000,
            timeout_factor: 2.0,
            min_timeout_ms: 100,
            max_timeout_ms: 10_000,
            average_window: 4,
            seed: 7,
            retry_failed_next_pass: false,
        }
    }

    /// A queue over `n` chunks, one per task, and the changes made so far.
    fn queue(n: u64, s: QueueSettings) -> (Queue, Vec<Change>) {
        let mut q = Queue::new(s).unwrap();
        let out = q.set_dataset(chunks(n), 1).unwrap();
        (q, out.changes)
    }

    fn get(q: &mut Queue, log: &mut Vec<Change>, pass: u64, now: Millis) -> GetTask {
        let out = q.get_task(pass, now).unwrap();
        log.extend(out.changes);
        out.reply
    }

    fn task(q: &mut Queue, log: &mut Vec<Change>, now: Millis) -> Task {
        match get(q, log, q.pass(), now) {
            GetTask::Task(t) => t,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    fn finish(q: &mut Queue, log: &mut Vec<Change>, t: &Task, now: Millis) -> Ack {
        let out = q.task_finished(t.id, t.epoch, now).unwrap();
        log.extend(out.changes);
        out.reply
    }

    fn fail(q: &mut Queue, log: &mut Vec<Change>, t: &Task) -> Ack {
        let out = q.task_failed(t.id, t.epoch, "boom").unwrap();
        log.extend(out.changes);
        out.reply
    }

    fn replayed(s: QueueSettings, log: &[Change]) -> Queue {
        Queue::restore(s, None, log.iter().cloned()).unwrap()
    }

    #[test]
    fn tasks_group_consecutive_chunks_across_files() {
        let mut q = Queue::new(settings()).unwrap();
        let _ = q.set_dataset(chunks(8), 3).unwrap();
        assert_eq!(q.task_count(), 3);
        let t1 = q.task_chunks(TaskId(1)).unwrap();
        assert_eq!(t1.len(), 3);
        assert_eq!((t1[0].path.as_str(), t1[0].index), ("/data/part-1.recordio", 0));
        let t2 = q.task_chunks(TaskId(2)).unwrap();
        assert_eq!(t2.len(), 2, "the last task takes the remainder");
        assert_eq!((t2[0].path.as_str(), t2[0].index), ("/data/part-2.recordio", 0));
        assert_eq!(q.task_chunks(TaskId(3)), None);
        let mut log = Vec::new();
        let t = task(&mut q, &mut log, 0);
        assert_eq!(t.chunks, q.task_chunks(t.id).unwrap());
    }

    #[test]
    fn first_dataset_wins() {
        let (mut q, _) = queue(5, settings());
        let again = q.set_dataset(chunks(5), 1).unwrap();
        assert!(again.changes.is_empty(), "the same dataset again is a no-op");
        let err = q.set_dataset(chunks(6), 1).unwrap_err();
        assert!(matches!(err, Error::DatasetMismatch(_)), "{err}");
        let err = q.set_dataset(chunks(5), 2).unwrap_err();
        assert!(matches!(err, Error::DatasetMismatch(_)), "{err}");
        let mut other = chunks(5);
        other[3].path = "/elsewhere".into();
        let err = q.set_dataset(other, 1).unwrap_err().to_string();
        assert!(err.contains("chunk 3 differs"), "{err}");
    }

    #[test]
    fn bad_datasets_and_early_calls_are_rejected() {
        let mut q = Queue::new(settings()).unwrap();
        assert!(matches!(q.get_task(0, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(q.task_finished(TaskId(0), 1, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(q.set_dataset(Vec::new(), 1), Err(Error::InvalidArgument(_))));
        assert!(matches!(q.set_dataset(chunks(2), 0), Err(Error::InvalidArgument(_))));
        assert_eq!(q.seq(), 0);
        let _ = q.set_dataset(chunks(2), 1).unwrap();
        assert!(matches!(q.task_finished(TaskId(2), 1, 0), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn invalid_settings_are_rejected() {
        let mut s = settings();
        s.min_timeout_ms = s.max_timeout_ms + 1;
        assert!(matches!(Queue::new(s), Err(Error::Config(_))));
        let mut s = settings();
        s.timeout_factor = f64::NAN;
        assert!(matches!(Queue::new(s), Err(Error::Config(_))));
        let mut s = settings();
        s.average_window = 0;
        assert!(matches!(Queue::new(s), Err(Error::Config(_))));
    }

    #[test]
    fn a_pass_ends_when_every_task_is_done() {
        let (mut q, mut log) = queue(4, settings());
        let mut seen = Vec::new();
        let tasks: Vec<Task> = (0..4).map(|_| task(&mut q, &mut log, 0)).collect();
        assert_eq!(get(&mut q, &mut log, 0, 0), GetTask::NoMoreTasksNow);
        for t in &tasks {
            assert_eq!(t.pass, 0);
            assert_eq!(t.epoch, 1);
            seen.push(t.id);
            assert_eq!(q.pass(), 0);
            assert_eq!(finish(&mut q, &mut log, t, 10), Ack::Accepted);
        }
        seen.sort();
        assert_eq!(seen, (0..4).map(TaskId).collect::<Vec<_>>());
        assert_eq!(q.pass(), 1);
        assert_eq!(q.counts(), QueueCounts { todo: 4, pending: 0, done: 0, failed: 0 });
        assert_eq!(get(&mut q, &mut log, 0, 20), GetTask::PassFinished { current_pass: 1 });
        assert_eq!(get(&mut q, &mut log, 2, 20), GetTask::WrongPass { current_pass: 1 });
        let t = task(&mut q, &mut log, 20);
        assert_eq!((t.pass, t.epoch), (1, 2), "epochs keep growing across passes");
        // A late report from pass 0 is stale.
        assert_eq!(finish(&mut q, &mut log, &tasks[0], 30), Ack::Stale);
        assert_eq!(replayed(settings(), &log).snapshot(), q.snapshot());
        q.check_invariants().unwrap();
    }

    #[test]
    fn todo_order_is_shuffled_per_pass_and_reproducible() {
        let order = |seed: u64| {
            let mut s = settings();
            s.seed = seed;
            let (mut q, mut log) = queue(20, s);
            let mut passes = Vec::new();
            for _ in 0..2 {
                let tasks: Vec<Task> = (0..20).map(|_| task(&mut q, &mut log, 0)).collect();
                passes.push(tasks.iter().map(|t| t.id.0).collect::<Vec<_>>());
                for t in &tasks {
                    let _ = finish(&mut q, &mut log, t, 1);
                }
            }
            passes
        };
        let a = order(1);
        assert_eq!(a, order(1));
        assert_ne!(a[0], a[1], "each pass has its own order");
        assert_ne!(a[0], (0..20).collect::<Vec<_>>());
        assert_ne!(a, order(2));
    }

    #[test]
    fn stale_epochs_change_nothing() {
        let (mut q, mut log) = queue(2, settings());
        let first = task(&mut q, &mut log, 0);
        let expired = q.tick(first.epoch + 5_000);
        log.extend(expired.changes);
        assert_eq!(expired.reply.len(), 1);
        let before = q.snapshot();
        // The expired hand-out finishes late: ignored.
        assert_eq!(finish(&mut q, &mut log, &first, 6_000), Ack::Stale);
        assert_eq!(fail(&mut q, &mut log, &first), Ack::Stale);
        assert_eq!(q.snapshot(), before);
        let wrong = Task { epoch: 99, ..first.clone() };
        assert_eq!(finish(&mut q, &mut log, &wrong, 6_000), Ack::Stale);
        assert_eq!(q.snapshot(), before);
    }

    #[test]
    fn too_many_failures_discard_a_task_for_good() {
        let (mut q, mut log) = queue(1, settings()); // max_failures = 2
        for round in 1..=3 {
            let t = task(&mut q, &mut log, 0);
            assert_eq!(t.epoch, round);
            assert_eq!(fail(&mut q, &mut log, &t), Ack::Accepted);
        }
        assert_eq!(q.counts().failed, 1);
        let (id, f) = q.failed_tasks().next().unwrap();
        assert_eq!((id, f.failures, f.pass), (TaskId(0), 3, 0));
        assert_eq!(f.reason, FailReason::Reported("boom".into()));
        assert_eq!(get(&mut q, &mut log, 0, 0), GetTask::AllTasksFailed);
        assert_eq!(q.pass(), 0, "nothing done, so no new pass");
        assert_eq!(replayed(settings(), &log).snapshot(), q.snapshot());
    }

    fn one_failed_one_done(s: QueueSettings) -> (Queue, Vec<Change>) {
        let (mut q, mut log) = queue(2, s);
        let a = task(&mut q, &mut log, 0);
        let b = task(&mut q, &mut log, 0);
        let _ = finish(&mut q, &mut log, &b, 5);
        let mut t = a;
        loop {
            let _ = fail(&mut q, &mut log, &t);
            if q.pass() == 1 {
                break;
            }
            t = task(&mut q, &mut log, 0);
        }
        (q, log)
    }

    #[test]
    fn failed_tasks_stay_failed_at_a_new_pass_by_default() {
        let (q, _) = one_failed_one_done(settings());
        assert_eq!(q.pass(), 1);
        assert_eq!(q.counts(), QueueCounts { todo: 1, pending: 0, done: 0, failed: 1 });
    }

    #[test]
    fn failed_tasks_can_be_retried_at_the_next_pass() {
        let mut s = settings();
        s.retry_failed_next_pass = true;
        let (mut q, mut log) = one_failed_one_done(s.clone());
        assert_eq!(q.pass(), 1);
        assert_eq!(q.counts(), QueueCounts { todo: 2, pending: 0, done: 0, failed: 0 });
        // Counters were reset: the task gets max_failures + 1 fresh attempts.
        for _ in 0..2 {
            let t = task(&mut q, &mut log, 0);
            let t = if t.id == TaskId(0) {
                t
            } else {
                let _ = finish(&mut q, &mut log, &t, 1);
                task(&mut q, &mut log, 0)
            };
            let _ = fail(&mut q, &mut log, &t);
        }
        assert_eq!(q.counts().failed, 0);
        assert_eq!(replayed(s, &log).snapshot(), q.snapshot());
    }

    #[test]
    fn timeout_follows_the_moving_average_within_bounds() {
        let (mut q, mut log) = queue(10, settings());
        assert_eq!(q.timeout_ms(), 1000, "initial timeout before any completion");
        let t = task(&mut q, &mut log, 0);
        let _ = finish(&mut q, &mut log, &t, 400);
        assert_eq!(q.average_duration_ms(), Some(400));
        assert_eq!(q.timeout_ms(), 800, "average 400 x factor 2");
        let t = task(&mut q, &mut log, 1000);
        let _ = finish(&mut q, &mut log, &t, 1800); // 800 ms: (400*3 + 800) / 4 = 500
        assert_eq!(q.average_duration_ms(), Some(500));
        assert_eq!(q.timeout_ms(), 1000);
        let t = task(&mut q, &mut log, 2000);
        let _ = finish(&mut q, &mut log, &t, 2000); // 0 ms: (500*3 + 0) / 4 = 375
        for _ in 0..10 {
            let t = task(&mut q, &mut log, 3000);
            let _ = finish(&mut q, &mut log, &t, 3000);
        }
        assert_eq!(q.timeout_ms(), 100, "clamped to the floor");
        let t = task(&mut q, &mut log, 0);
        let _ = finish(&mut q, &mut log, &t, 1_000_000);
        assert_eq!(q.timeout_ms(), 10_000, "clamped to the cap");
    }

    #[test]
    fn tick_expires_exactly_at_the_deadline_and_counts_a_failure() {
        let (mut q, mut log) = queue(3, settings());
        let a = task(&mut q, &mut log, 0); // deadline 1000
        let b = task(&mut q, &mut log, 500); // deadline 1500
        assert_eq!(q.next_deadline(), Some(1000));
        assert!(q.tick(999).reply.is_empty());
        let out = q.tick(1000);
        assert_eq!(out.reply, vec![a.id]);
        assert!(matches!(
            out.changes[0].kind,
            ChangeKind::Requeued { failures: 1, reason: FailReason::TimedOut { deadline_ms: 1000 }, .. }
        ));
        log.extend(out.changes);
        assert_eq!(q.next_deadline(), Some(1500));
        assert_eq!(q.counts(), QueueCounts { todo: 2, pending: 1, done: 0, failed: 0 });
        let _ = b;
        assert_eq!(replayed(settings(), &log).snapshot(), q.snapshot());
    }

    #[test]
    fn resume_gives_pending_tasks_a_fresh_timeout() {
        let (mut q, mut log) = queue(2, settings());
        let _ = task(&mut q, &mut log, 0); // deadline 1000
        let out = q.resume(50_000);
        assert_eq!(out.changes.len(), 1);
        log.extend(out.changes);
        assert_eq!(q.next_deadline(), Some(51_000));
        assert!(q.tick(50_999).reply.is_empty());
        assert!(q.resume(50_000).changes.is_empty(), "nothing to extend");
        assert_eq!(replayed(settings(), &log).snapshot(), q.snapshot());
    }

    #[test]
    fn apply_refuses_changes_that_do_not_fit_and_leaves_the_state() {
        let (mut q, mut log) = queue(3, settings());
        let t = task(&mut q, &mut log, 0);
        let before = q.snapshot();
        let gap = Change { seq: q.seq() + 2, kind: ChangeKind::DeadlinesExtended { min_deadline_ms: 0 } };
        assert!(matches!(q.apply(&gap), Err(Error::InvalidChange { .. })));
        let not_pending = Change {
            seq: q.seq() + 1,
            kind: ChangeKind::Finished { task: TaskId((t.id.0 + 1) % 3), epoch: 1, avg_duration_ms: 1 },
        };
        assert!(matches!(q.apply(&not_pending), Err(Error::InvalidChange { .. })));
        let wrong_front = Change {
            seq: q.seq() + 1,
            kind: ChangeKind::Dispatched { task: t.id, epoch: 2, dispatched_ms: 0, deadline_ms: 1 },
        };
        assert!(matches!(q.apply(&wrong_front), Err(Error::InvalidChange { .. })));
        let early_pass = Change { seq: q.seq() + 1, kind: ChangeKind::PassStarted { pass: 1, todo: vec![] } };
        assert!(matches!(q.apply(&early_pass), Err(Error::InvalidChange { .. })));
        assert_eq!(q.snapshot(), before);
    }

    #[test]
    fn snapshot_and_log_survive_json_and_rebuild_the_same_queue() {
        let (mut q, mut log) = queue(6, settings());
        let a = task(&mut q, &mut log, 0);
        let b = task(&mut q, &mut log, 0);
        let _ = finish(&mut q, &mut log, &a, 300);
        let snap_json = serde_json::to_string(&q.snapshot()).unwrap();
        let cut = log.len();
        let _ = fail(&mut q, &mut log, &b);
        let c = task(&mut q, &mut log, 400);
        let _ = finish(&mut q, &mut log, &c, 900);
        let log_json = serde_json::to_string(&log[cut..]).unwrap();

        let snap: Snapshot = serde_json::from_str(&snap_json).unwrap();
        assert_eq!(snap.seq(), cut as u64);
        let tail: Vec<Change> = serde_json::from_str(&log_json).unwrap();
        let rebuilt = Queue::restore(settings(), Some(snap.clone()), tail).unwrap();
        assert_eq!(rebuilt.snapshot(), q.snapshot());
        assert_eq!(rebuilt.next_deadline(), q.next_deadline());
        // The whole log may be passed: what the snapshot covers is skipped.
        let rebuilt = Queue::restore(settings(), Some(snap), log.clone()).unwrap();
        assert_eq!(rebuilt.snapshot(), q.snapshot());
        rebuilt.check_invariants().unwrap();
    }

    #[test]
    fn replay_does_not_depend_on_settings() {
        let (mut q, mut log) = queue(3, settings());
        let t = task(&mut q, &mut log, 0);
        let _ = fail(&mut q, &mut log, &t);
        let mut other = settings();
        other.max_failures = 0;
        other.seed = 99;
        other.initial_timeout_ms = 5;
        assert_eq!(replayed(other, &log).snapshot(), q.snapshot());
    }
}

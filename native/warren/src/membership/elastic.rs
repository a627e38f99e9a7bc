//! Elastic membership, pure: how a view changes at a checkpoint boundary (see
//! `docs/elastic-design.md`).
//!
//! - [`Roster`] (the tracker's side): control requests (add, remove, restart, give up on a lost
//!   worker) change a *target* membership within [`Limits`]; [`Roster::decide`] says which
//!   view holds after checkpoint version `v`, and memoises it, so every worker asking about
//!   `v` (a restarted one replaying `v` too) gets the same answer.
//! - [`Transition`] (every worker's side): from the old view and the new one, each task's
//!   [`Role`], the joiners and leavers, and where the local-model replicas go in the new view
//!   (the recovery round after the change moves them there). Every member derives the same
//!   transition from the same two views.

use std::collections::{BTreeMap, BTreeSet};

use super::{Placed, Placement, View, task_order};

/// The number of workers an elastic job may have, and whether newcomers need an `add`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Never fewer (a remove or a give-up below it is refused).
    pub min: usize,
    /// Never more (an add or a restart above it is refused).
    pub max: usize,
    /// A task id that registers while the job runs, and was never a member, is added (at the
    /// next boundary) as if by [`Change::Add`], if the job has room; without it (the
    /// default) it must be added first. A removed task still needs a restart. For launchers
    /// whose own tasks are the only ones that hold the secret, e.g. a Spark job's partitions
    /// arriving as slots free up.
    pub admit_arrivals: bool,
    /// Task ids are numbers: an add or restart of any other id is refused. For launchers
    /// that start the workers of added tasks by number (`warren run`).
    pub numbered_tasks: bool,
}

impl Limits {
    /// `min` to `max` workers; newcomers need an `add`; any task id.
    pub fn new(min: usize, max: usize) -> Limits {
        Limits { min, max, admit_arrivals: false, numbered_tasks: false }
    }
}

/// A control request on one task id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Admit a new task id (it joins once it has registered).
    Add,
    /// Let a member finish the current checkpoint interval, then stop.
    Remove,
    /// Bring a stopped (or given-up) task back.
    Restart,
    /// Drop a lost member whose replacement did not come back in time.
    GiveUp,
}

/// A task's state, as [`Roster::list`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// A member of the current view, staying.
    Running,
    /// Admitted; joins at the next boundary once it has registered.
    Joining,
    /// A member of the current view that leaves at the next boundary.
    Leaving,
    /// Removed; `restart` brings it back.
    Stopped,
    /// Given up on; it rejoins when it registers again.
    Lost,
}

impl TaskState {
    /// Its name for displays (`warren ctl list`).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Running => "running",
            TaskState::Joining => "joining",
            TaskState::Leaving => "leaving",
            TaskState::Stopped => "stopped",
            TaskState::Lost => "lost",
        }
    }
}

/// The tracker's elastic membership: the current view, the target membership the control
/// requests asked for, and the decisions taken at each checkpoint version.
#[derive(Debug, Clone)]
pub struct Roster {
    limits: Limits,
    initial: View,
    /// The view decided last (the one that holds after the last decided version).
    view: View,
    target: BTreeSet<String>,
    stopped: BTreeSet<String>,
    lost: BTreeSet<String>,
    /// Admitted joiners that have registered and wait for the next boundary.
    ready: BTreeSet<String>,
    /// Requests not applied yet, in the order made.
    scheduled: Vec<Scheduled>,
    /// The highest version some worker asked about.
    last_decided: Option<u32>,
    /// Registered joiners dropped by a decision, not told yet ([`Roster::take_dismissed`]).
    dismissed: Vec<String>,
    /// The versions at which the view changed, and the view from then on.
    changes: BTreeMap<u32, View>,
}

/// A control request waiting for its checkpoint version.
#[derive(Debug, Clone)]
struct Scheduled {
    /// Applies at this version at the earliest.
    at: u32,
    task: String,
    /// Whether the task is a member after it.
    member: bool,
}

fn sorted(ids: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = ids.into_iter().collect();
    v.sort_by(|a, b| task_order(a, b));
    v
}

impl Roster {
    /// The roster of a job whose first view is `view`.
    pub fn new(view: View, limits: Limits) -> Result<Roster, String> {
        if limits.min == 0 || limits.min > limits.max {
            return Err(format!("bad worker limits: min {} max {} (need 1 <= min <= max)", limits.min, limits.max));
        }
        if view.world() < limits.min || view.world() > limits.max {
            return Err(format!("a view of {} workers is outside [{}, {}]", view.world(), limits.min, limits.max));
        }
        let target = view.members().iter().cloned().collect();
        Ok(Roster {
            limits,
            initial: view.clone(),
            view,
            target,
            stopped: BTreeSet::new(),
            lost: BTreeSet::new(),
            ready: BTreeSet::new(),
            scheduled: Vec::new(),
            last_decided: None,
            dismissed: Vec::new(),
            changes: BTreeMap::new(),
        })
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The view decided last.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The newest checkpoint version a decision was asked about (`None` before the first).
    pub fn decided_version(&self) -> Option<u32> {
        self.last_decided
    }

    /// Applies a control request on `task`, at checkpoint version `at` or later (`None`: at the
    /// next boundary). Refused, with the reason, if it would break the limits, names a task in
    /// the wrong state, or names a version already decided.
    pub fn request(&mut self, change: Change, task: &str, at: Option<u32>) -> Result<(), String> {
        if let (Some(v), Some(done)) = (at, self.last_decided) {
            if v <= done {
                return Err(format!("checkpoint version {v} is already decided (the workers are past version {done})"));
            }
        }
        let n = self.target.len();
        match change {
            Change::Add | Change::Restart if self.limits.numbered_tasks && task.parse::<u64>().is_err() => {
                return Err(format!(
                    "task id {task:?} is not a number: this job's launcher starts its workers by task number"
                ));
            }
            Change::Add | Change::Restart => {
                let known = self.stopped.contains(task) || self.lost.contains(task);
                if self.target.contains(task) {
                    return Err(format!("task {task} is already a member"));
                }
                if change == Change::Add && known {
                    return Err(format!("task {task} has been in the job and is stopped: restart it instead"));
                }
                if change == Change::Restart && !known {
                    return Err(format!("task {task} is not stopped (only a removed or lost task can be restarted)"));
                }
                if n >= self.limits.max {
                    return Err(format!(
                        "the job has its maximum of {} workers; task {task} cannot join",
                        self.limits.max
                    ));
                }
                self.stopped.remove(task);
                self.lost.remove(task);
                self.target.insert(task.to_string());
            }
            Change::Remove | Change::GiveUp => {
                if !self.target.contains(task) {
                    return Err(format!("task {task} is not a member"));
                }
                if change == Change::GiveUp && self.view.rank_of(task).is_none() {
                    return Err(format!("task {task} has not joined yet: remove it instead"));
                }
                if n <= self.limits.min {
                    let verb = if change == Change::Remove { "removing" } else { "going on without" };
                    return Err(format!(
                        "{verb} task {task} would leave {} workers, below the minimum of {}",
                        n - 1,
                        self.limits.min
                    ));
                }
                // A joiner that registered keeps its place: its join still applies first
                // (it is never dropped from under a waiting process), the leave after it.
                // One that has not registered is simply not joining any more.
                self.target.remove(task);
                let into = if change == Change::Remove { &mut self.stopped } else { &mut self.lost };
                into.insert(task.to_string());
            }
        }
        let member = matches!(change, Change::Add | Change::Restart);
        self.scheduled.push(Scheduled { at: at.unwrap_or(0), task: task.to_string(), member });
        self.cancel_moot(None);
        Ok(())
    }

    /// A task registered while the job runs: an admitted joiner now waits for the next
    /// boundary, and a lost task rejoins (restarted) if the limits allow. Refused otherwise.
    pub fn arrived(&mut self, task: &str) -> Result<(), String> {
        if self.view.rank_of(task).is_some() {
            return Err(format!("task {task} is a member already (it registers again to recover, not to join)"));
        }
        // A task scheduled to join registers as a joiner, even if a later request gives up
        // on it again (it joins, then leaves as asked); a lost task not scheduled to join
        // comes back, restarted.
        if self.lost.contains(task) && !self.expected(task) {
            self.request(Change::Restart, task, None)?;
        } else if self.limits.admit_arrivals && !self.stopped.contains(task) && !self.expected(task) {
            self.request(Change::Add, task, None)?;
        }
        if !self.expected(task) {
            return Err(format!("task {task} has not been admitted to the job (add it first)"));
        }
        self.ready.insert(task.to_string());
        Ok(())
    }

    /// Whether `task` is to be a member: in the target, or scheduled to join (maybe to leave
    /// again later).
    fn expected(&self, task: &str) -> bool {
        self.target.contains(task) || self.scheduled.iter().any(|s| s.member && s.task == task)
    }

    /// The joiners a decision at `version` would apply but cannot yet: scheduled to join at
    /// `version` or earlier and not registered (their process is still starting), in the
    /// order requested. Empty once `version` is decided. The tracker may hold the decision
    /// briefly for them, so an added task joins at the first boundary after its `add`.
    pub fn awaited_joiners(&self, version: u32) -> Vec<String> {
        if self.last_decided.is_some_and(|d| version <= d) {
            return Vec::new();
        }
        let due = |s: &&Scheduled| s.member && s.at <= version && !self.ready.contains(&s.task);
        let mut out: Vec<String> = Vec::new();
        for s in self.scheduled.iter().filter(due) {
            if !out.contains(&s.task) {
                out.push(s.task.clone());
            }
        }
        out
    }

    /// A registered joiner went away before joining: a join of it that a later request
    /// cancels out is dropped with that request, so nothing waits for it to come back.
    pub fn departed(&mut self, task: &str) {
        self.ready.remove(task);
        self.cancel_moot(None);
    }

    /// Drops each pair of a task's consecutive requests that cancel out before either has
    /// begun: a join of a task that has not registered and the leave after it, or a leave
    /// and the join (restart) after it. They cancel out when the second is due no later than
    /// the first (no checkpoint in between), or, deciding `due`, when both are due. A
    /// registered joiner's join is never dropped (its process waits for it): it joins, then
    /// leaves. Holding such pairs instead would keep room at a limit for a change that
    /// means nothing, maybe for good.
    fn cancel_moot(&mut self, due: Option<u32>) {
        while self
            .take_pair(|r, a, b| {
                let begun = a.member && (r.ready.contains(&a.task) || r.view.rank_of(&a.task).is_some());
                let no_gap = b.at <= a.at || due.is_some_and(|v| a.at <= v && b.at <= v);
                a.member != b.member && !begun && no_gap
            })
            .is_some()
        {}
    }

    /// Removes the first two consecutive requests of one task that `cancel` says cancel out
    /// (`a`, then the task's next request `b`), and returns that task.
    fn take_pair(&mut self, cancel: impl Fn(&Roster, &Scheduled, &Scheduled) -> bool) -> Option<String> {
        let (i, j) = self.scheduled.iter().enumerate().find_map(|(i, a)| {
            let (j, b) = self.scheduled.iter().enumerate().skip(i + 1).find(|(_, b)| b.task == a.task)?;
            cancel(self, a, b).then_some((i, j))
        })?;
        self.scheduled.remove(j);
        Some(self.scheduled.remove(i).task)
    }

    /// Drops the joins whose task's leave is due at `version` too, registered or not, with
    /// those leaves: when the job is at a limit, such a join could only wait for room it
    /// gives back at the next boundary, and the leave behind it would wait forever. A
    /// registered joiner among them is dismissed ([`Roster::take_dismissed`]).
    fn dismiss_moot_joiners(&mut self, version: u32) {
        while let Some(task) = self.take_pair(|r, a, b| {
            a.member && !b.member && r.view.rank_of(&a.task).is_none() && a.at <= version && b.at <= version
        }) {
            if self.ready.remove(&task) {
                self.dismissed.push(task);
            }
        }
    }

    /// The registered joiners that decisions dropped since the last call (their leave came
    /// due before there was room for them to join): their processes are to stop.
    pub fn take_dismissed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dismissed)
    }

    /// The view that holds after checkpoint version `version` commits. Memoised: asked again
    /// about a decided version, it answers the same view.
    pub fn decide(&mut self, version: u32) -> View {
        if self.last_decided.is_some_and(|d| version <= d) {
            return self.view_after(version);
        }
        self.last_decided = Some(version);
        self.cancel_moot(Some(version));
        // Every due request at once, if that stays within the limits; else each only if it
        // keeps the job within them (a join at the maximum, or a leave at the minimum, waits
        // for a later boundary), rather than all of them held back, maybe for good.
        let (members, applied) = match self.plan(version, false) {
            (m, a) if (self.limits.min..=self.limits.max).contains(&m.len()) => (m, a),
            _ => {
                self.dismiss_moot_joiners(version);
                self.plan(version, true)
            }
        };
        let mut done = applied.into_iter();
        self.scheduled.retain(|_| !done.next().unwrap_or(false));
        let members = sorted(members);
        if members.as_slice() == self.view.members() {
            return self.view.clone();
        }
        let next = View::new(self.view.epoch() + 1, members);
        self.ready.retain(|t| next.rank_of(t).is_none());
        self.changes.insert(version, next.clone());
        self.view = next.clone();
        next
    }

    /// The members after applying the requests due at `version` to the current view, and
    /// which requests that applies: the joins first, then the leaves, each task's requests in
    /// the order made (once one waits, its later ones wait too). A join waits while its task
    /// has not registered, a leave while its task joins at this boundary (so a registered
    /// joiner always joins, then leaves as asked, instead of waiting for a join that
    /// cancelled out). `within_limits`: a join that would pass the maximum, or a leave that
    /// would pass the minimum, waits too.
    fn plan(&self, version: u32, within_limits: bool) -> (BTreeSet<String>, Vec<bool>) {
        let mut members: BTreeSet<String> = self.view.members().iter().cloned().collect();
        let mut applied = vec![false; self.scheduled.len()];
        let mut joining: BTreeSet<&str> = BTreeSet::new();
        let mut held: BTreeSet<&str> = BTreeSet::new();
        for (i, s) in self.scheduled.iter().enumerate() {
            let task = s.task.as_str();
            let full = within_limits && members.len() >= self.limits.max;
            if held.contains(task) || s.at > version || !s.member || !self.ready.contains(task) || full {
                held.insert(task);
                continue;
            }
            if self.view.rank_of(task).is_none() {
                joining.insert(task);
            }
            members.insert(s.task.clone());
            applied[i] = true;
        }
        held.clear();
        for (i, s) in self.scheduled.iter().enumerate() {
            if applied[i] {
                continue;
            }
            let task = s.task.as_str();
            let low = within_limits && members.len() <= self.limits.min;
            if held.contains(task) || s.at > version || s.member || joining.contains(task) || low {
                held.insert(task);
                continue;
            }
            members.remove(task);
            applied[i] = true;
        }
        (members, applied)
    }

    /// Goes on without the lost members `tasks` at once, in the middle of a checkpoint
    /// interval: their replacements did not register within the rejoin timeout. The view
    /// changes now (one epoch more; the survivors roll back to their last checkpoint in it),
    /// and it is what the last decided version is answered with from now on. Each of them is
    /// `lost` and rejoins when it registers again. Refused, naming them, if fewer than the
    /// minimum would be left.
    pub fn drop_lost(&mut self, tasks: &[String]) -> Result<View, String> {
        let gone: BTreeSet<&String> = tasks.iter().filter(|t| self.view.rank_of(t).is_some()).collect();
        if gone.is_empty() {
            return Err(format!("none of tasks {tasks:?} is a member of the current view"));
        }
        let left = self.view.world() - gone.len();
        if left < self.limits.min {
            let names: Vec<&str> = gone.iter().map(|t| t.as_str()).collect();
            return Err(format!(
                "going on without task{} {} would leave {left} workers, below the minimum of {}",
                if names.len() == 1 { "" } else { "s" },
                names.join(", "),
                self.limits.min
            ));
        }
        for &t in &gone {
            self.target.remove(t);
            self.ready.remove(t);
            self.stopped.remove(t);
            self.lost.insert(t.clone());
            self.scheduled.retain(|s| &s.task != t);
        }
        let next = View::new(self.view.epoch() + 1, self.view.members().iter().filter(|t| !gone.contains(t)).cloned());
        self.changes.insert(self.last_decided.unwrap_or(0), next.clone());
        self.view = next.clone();
        Ok(next)
    }

    /// The view decided for an earlier version.
    fn view_after(&self, version: u32) -> View {
        self.changes.range(..=version).next_back().map_or(&self.initial, |(_, v)| v).clone()
    }

    /// The state of `task`, if the job knows it.
    pub fn state_of(&self, task: &str) -> Option<TaskState> {
        let member = self.view.rank_of(task).is_some();
        match (member, self.target.contains(task)) {
            (true, true) => Some(TaskState::Running),
            (true, false) => Some(TaskState::Leaving),
            (false, _) if self.expected(task) => Some(TaskState::Joining),
            (false, _) if self.stopped.contains(task) => Some(TaskState::Stopped),
            (false, _) if self.lost.contains(task) => Some(TaskState::Lost),
            (false, _) => None,
        }
    }

    /// Every task the job knows, in task order, with its state and its rank in the current
    /// view.
    pub fn list(&self) -> Vec<(String, TaskState, Option<usize>)> {
        let all = self.view.members().iter().chain(&self.target).chain(&self.stopped).chain(&self.lost);
        let ids: BTreeSet<String> = all.cloned().collect();
        sorted(ids)
            .into_iter()
            .filter_map(|t| {
                let state = self.state_of(&t)?;
                let rank = self.view.rank_of(&t);
                Some((t, state, rank))
            })
            .collect()
    }
}

/// What a task does in a [`Transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A member of both views.
    Stays {
        /// Its rank in the old view.
        old_rank: usize,
        /// Its rank in the new view.
        new_rank: usize,
    },
    /// A member of the new view only: it loads the global checkpoint from its peers.
    Joins {
        /// Its rank in the new view.
        new_rank: usize,
    },
    /// A member of the old view only: it stops after the boundary.
    Leaves {
        /// Its rank in the old view.
        old_rank: usize,
    },
    /// In neither view.
    Outside,
}

/// Where one stayer's local model goes in the new view (new ranks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaMove {
    /// The owner's new rank (it sends its own model).
    pub owner: usize,
    /// The new ranks that keep a replica of it, nearest ring successor first.
    pub to: Vec<usize>,
}

/// A change from one view to the next, as every member plans it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    from: View,
    to: View,
}

impl Transition {
    /// The transition from `from` to `to`. Refused if `to` is not a later epoch, is empty, or
    /// keeps no member of `from` (nobody would hold the checkpoint).
    pub fn new(from: View, to: View) -> Result<Transition, String> {
        if to.epoch() <= from.epoch() {
            return Err(format!("view epoch {} does not follow epoch {}", to.epoch(), from.epoch()));
        }
        if !to.members().iter().any(|t| from.rank_of(t).is_some()) {
            return Err(format!(
                "no member of epoch {} ({:?}) stays in epoch {} ({:?}): nobody holds the checkpoint",
                from.epoch(),
                from.members(),
                to.epoch(),
                to.members()
            ));
        }
        Ok(Transition { from, to })
    }

    /// The old view.
    pub fn from(&self) -> &View {
        &self.from
    }

    /// The new view.
    pub fn to(&self) -> &View {
        &self.to
    }

    /// What `task` does.
    pub fn role(&self, task: &str) -> Role {
        match (self.from.rank_of(task), self.to.rank_of(task)) {
            (Some(old_rank), Some(new_rank)) => Role::Stays { old_rank, new_rank },
            (None, Some(new_rank)) => Role::Joins { new_rank },
            (Some(old_rank), None) => Role::Leaves { old_rank },
            (None, None) => Role::Outside,
        }
    }

    /// Task ids of the new view that were not in the old one, in rank order.
    pub fn joiners(&self) -> Vec<String> {
        self.to.members().iter().filter(|t| self.from.rank_of(t).is_none()).cloned().collect()
    }

    /// Task ids of the old view that are not in the new one, in old rank order.
    pub fn leavers(&self) -> Vec<String> {
        self.from.members().iter().filter(|t| self.to.rank_of(t).is_none()).cloned().collect()
    }

    /// Where each stayer's local model goes under `placement` (made for the new view's world).
    /// Joiners have no local model yet; leavers' models are not placed.
    pub fn replica_moves(&self, placement: &Placement) -> Vec<ReplicaMove> {
        (0..self.to.world())
            .filter(|&r| self.from.rank_of(&self.to.members()[r]).is_some())
            .map(|owner| ReplicaMove { owner, to: placement.holders(Placed::LocalModel(owner)) })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster(ids: &[&str], min: usize, max: usize) -> Roster {
        Roster::new(View::new(0, ids.iter().copied()), Limits::new(min, max)).unwrap()
    }

    #[test]
    fn a_join_waits_for_registration_and_applies_at_the_next_boundary() {
        let mut r = roster(&["0", "1"], 2, 4);
        r.request(Change::Add, "2", None).unwrap();
        assert_eq!(r.state_of("2"), Some(TaskState::Joining));
        assert_eq!(r.decide(1).epoch(), 0, "not registered yet: no change");
        r.arrived("2").unwrap();
        let v = r.decide(2);
        assert_eq!((v.epoch(), v.members()), (1, &["0".to_string(), "1".into(), "2".into()][..]));
        assert_eq!(r.decide(2), v, "asked again about version 2: the same view");
        assert_eq!(r.decide(1).epoch(), 0, "version 1 was decided without the change");
        assert_eq!(r.state_of("2"), Some(TaskState::Running));
    }

    #[test]
    fn a_registered_joiner_removed_before_it_joined_joins_then_leaves() {
        let mut r = roster(&["0", "1"], 2, 4);
        r.request(Change::Add, "2", Some(10)).unwrap();
        r.arrived("2").unwrap();
        r.request(Change::Remove, "2", Some(20)).unwrap();
        assert_eq!(r.state_of("2"), Some(TaskState::Joining), "its join still comes first");
        assert!(r.awaited_joiners(10).is_empty(), "registered: nothing to wait for");
        assert_eq!(r.decide(10), View::new(1, ["0", "1", "2"]));
        assert_eq!(r.state_of("2"), Some(TaskState::Leaving));
        assert_eq!(r.decide(19).epoch(), 1);
        assert_eq!(r.decide(20), View::new(2, ["0", "1"]));
        assert_eq!(r.state_of("2"), Some(TaskState::Stopped));
    }

    #[test]
    fn a_join_and_a_leave_due_together_apply_one_boundary_apart() {
        let mut r = roster(&["0", "1"], 2, 4);
        r.request(Change::Add, "2", None).unwrap();
        r.arrived("2").unwrap();
        r.request(Change::Remove, "2", None).unwrap();
        assert_eq!(r.decide(1), View::new(1, ["0", "1", "2"]), "the registered joiner joins");
        assert_eq!(r.decide(2), View::new(2, ["0", "1"]), "and leaves at the next boundary");
        assert!(r.awaited_joiners(3).is_empty());
    }

    #[test]
    fn a_join_past_the_maximum_only_to_leave_again_is_dismissed_not_held() {
        let mut r = roster(&["0", "1"], 1, 3);
        r.request(Change::Add, "2", None).unwrap();
        r.arrived("2").unwrap();
        r.request(Change::Remove, "2", None).unwrap();
        r.request(Change::Add, "3", None).unwrap();
        r.arrived("3").unwrap();
        assert_eq!(r.decide(1), View::new(1, ["0", "1", "3"]), "task 2 would join only to leave");
        assert_eq!(r.take_dismissed(), ["2"]);
        assert_eq!(r.decide(2).epoch(), 1, "nothing left to apply");
    }

    #[test]
    fn awaited_joiners_are_the_due_adds_not_registered_yet() {
        let mut r = roster(&["0", "1"], 1, 5);
        assert!(r.awaited_joiners(1).is_empty());
        r.request(Change::Add, "3", None).unwrap();
        r.request(Change::Add, "2", Some(4)).unwrap();
        assert_eq!(r.awaited_joiners(1), ["3"], "task 2 is due at version 4 only");
        assert_eq!(r.awaited_joiners(4), ["3", "2"], "in the order requested");
        r.arrived("3").unwrap();
        assert!(r.awaited_joiners(1).is_empty(), "registered: nothing to wait for");
        assert_eq!(r.decide(1), View::new(1, ["0", "1", "3"]));
        assert!(r.awaited_joiners(1).is_empty(), "version 1 is decided");
        assert_eq!(r.awaited_joiners(5), ["2"]);
        r.request(Change::Remove, "1", None).unwrap();
        assert_eq!(r.awaited_joiners(5), ["2"], "a leave is never awaited");
    }

    #[test]
    fn with_admit_arrivals_a_newcomer_joins_without_an_add_within_the_limits() {
        let limits = Limits { admit_arrivals: true, ..Limits::new(1, 3) };
        let mut r = Roster::new(View::new(0, ["0", "1"]), limits).unwrap();
        r.arrived("2").unwrap();
        assert_eq!(r.state_of("2"), Some(TaskState::Joining));
        assert_eq!(r.decide(5), View::new(1, ["0", "1", "2"]));
        let e = r.arrived("3").unwrap_err();
        assert!(e.contains("maximum of 3"), "{e}");
        r.request(Change::Remove, "1", None).unwrap();
        assert_eq!(r.decide(6), View::new(2, ["0", "2"]));
        let e = r.arrived("1").unwrap_err();
        assert!(e.contains("not been admitted"), "a removed task still needs a restart: {e}");
        assert!(r.arrived("0").is_err(), "a member registering again is not a joiner");
    }

    #[test]
    fn a_job_of_numbered_tasks_refuses_other_task_ids() {
        let limits = Limits { numbered_tasks: true, ..Limits::new(1, 4) };
        let mut r = Roster::new(View::new(0, ["0", "1"]), limits).unwrap();
        let e = r.request(Change::Add, "abc", None).unwrap_err();
        assert!(e.contains("task id \"abc\" is not a number"), "{e}");
        assert_eq!(r.state_of("abc"), None, "nothing changed");
        r.request(Change::Add, "2", None).unwrap();
    }

    #[test]
    fn a_remove_below_the_minimum_is_a_clear_error() {
        let mut r = roster(&["0", "1", "2"], 2, 4);
        r.request(Change::Remove, "1", None).unwrap();
        let e = r.request(Change::Remove, "2", None).unwrap_err();
        assert_eq!(e, "removing task 2 would leave 1 workers, below the minimum of 2");
        let e = r.request(Change::GiveUp, "0", None).unwrap_err();
        assert!(e.contains("going on without task 0"), "{e}");
        assert_eq!(r.state_of("1"), Some(TaskState::Leaving));
        assert_eq!(r.decide(0).members(), ["0", "2"]);
        assert_eq!(r.state_of("1"), Some(TaskState::Stopped));
    }

    #[test]
    fn remove_then_restart_the_same_task_id_in_a_later_epoch() {
        let mut r = roster(&["0", "2", "5"], 1, 3);
        r.request(Change::Remove, "2", Some(3)).unwrap();
        assert_eq!(r.decide(2).epoch(), 0, "applies at version 3");
        assert_eq!(r.decide(3), View::new(1, ["0", "5"]));
        assert!(r.request(Change::Add, "2", None).unwrap_err().contains("restart it instead"));
        assert!(r.request(Change::Remove, "9", None).is_err());
        assert!(r.request(Change::Restart, "2", Some(3)).unwrap_err().contains("already decided"));
        r.request(Change::Restart, "2", None).unwrap();
        assert!(r.arrived("7").is_err(), "not admitted");
        r.arrived("2").unwrap();
        assert_eq!(r.decide(4), View::new(2, ["0", "2", "5"]));
        let listed: Vec<_> = r.list().into_iter().map(|(t, s, rank)| (t, s.name(), rank)).collect();
        assert_eq!(listed[1], ("2".to_string(), "running", Some(1)));
    }

    #[test]
    fn each_change_applies_at_its_own_version() {
        let mut r = roster(&["0", "1"], 2, 4);
        r.request(Change::Add, "3", Some(8)).unwrap();
        r.request(Change::Remove, "3", Some(16)).unwrap();
        assert_eq!(r.state_of("3"), Some(TaskState::Joining), "joins at 8 although it leaves at 16");
        r.arrived("3").unwrap();
        assert_eq!(r.decide(7).epoch(), 0);
        assert_eq!(r.decide(8), View::new(1, ["0", "1", "3"]), "the later remove does not hold the add back");
        assert_eq!(r.decide(16), View::new(2, ["0", "1"]));
        assert_eq!(r.state_of("3"), Some(TaskState::Stopped));
    }

    #[test]
    fn a_lost_task_given_up_on_rejoins_when_it_registers() {
        let mut r = roster(&["0", "1", "2"], 2, 3);
        r.request(Change::GiveUp, "1", None).unwrap();
        assert_eq!(r.decide(0).members(), ["0", "2"]);
        assert_eq!(r.state_of("1"), Some(TaskState::Lost));
        r.arrived("1").unwrap();
        assert_eq!(r.decide(1).members(), ["0", "1", "2"]);
    }

    #[test]
    fn a_joiner_removed_before_it_registered_is_not_awaited_and_leaves_room() {
        let mut r = roster(&["0"], 1, 2);
        r.request(Change::Add, "6", None).unwrap();
        r.request(Change::Remove, "6", None).unwrap();
        assert_eq!(r.state_of("6"), Some(TaskState::Stopped));
        assert!(r.awaited_joiners(1).is_empty());
        r.request(Change::Add, "5", None).unwrap();
        r.arrived("5").unwrap();
        assert!(r.arrived("6").unwrap_err().contains("not been admitted"));
        assert_eq!(r.decide(1).members(), ["0", "5"]);
        assert_eq!(r.decide(2).members(), ["0", "5"]);
    }

    #[test]
    fn a_registered_joiner_to_be_removed_that_goes_away_is_forgotten() {
        let mut r = roster(&["0"], 1, 2);
        r.request(Change::Add, "6", None).unwrap();
        r.arrived("6").unwrap();
        r.request(Change::Remove, "6", None).unwrap();
        r.departed("6");
        assert_eq!(r.state_of("6"), Some(TaskState::Stopped));
        r.request(Change::Add, "5", None).unwrap();
        r.arrived("5").unwrap();
        assert_eq!(r.decide(1).members(), ["0", "5"]);
    }

    #[test]
    fn a_registered_joiner_to_leave_when_the_job_is_full_is_dismissed() {
        let mut r = roster(&["0"], 1, 2);
        r.request(Change::Add, "6", Some(3)).unwrap();
        r.arrived("6").unwrap();
        r.request(Change::Remove, "6", Some(3)).unwrap();
        r.request(Change::Add, "5", None).unwrap();
        r.arrived("5").unwrap();
        assert_eq!(r.decide(1).members(), ["0", "5"]);
        assert!(r.take_dismissed().is_empty());
        assert_eq!(r.decide(3).members(), ["0", "5"]);
        assert_eq!(r.state_of("6"), Some(TaskState::Stopped));
        assert_eq!(r.take_dismissed(), ["6"]);
        assert!(r.take_dismissed().is_empty());
    }

    #[test]
    fn a_remove_and_restart_before_either_applied_cancel_out() {
        let mut r = roster(&["0", "1", "2"], 1, 3);
        r.request(Change::Remove, "2", None).unwrap();
        r.request(Change::Restart, "2", None).unwrap();
        assert_eq!(r.state_of("2"), Some(TaskState::Running));
        r.request(Change::GiveUp, "2", None).unwrap();
        assert_eq!(r.decide(1).members(), ["0", "1"]);
        assert_eq!(r.state_of("2"), Some(TaskState::Lost));
        r.arrived("2").unwrap();
        assert_eq!(r.decide(2).members(), ["0", "1", "2"], "a lost task registering comes back");
        assert!(r.awaited_joiners(3).is_empty());
    }

    #[test]
    fn a_lost_member_is_dropped_at_once_and_rejoins_later() {
        let mut r = roster(&["0", "1", "2"], 2, 3);
        assert_eq!(r.decide(4).epoch(), 0);
        r.request(Change::Remove, "1", Some(9)).unwrap();
        let v = r.drop_lost(&["1".into()]).unwrap();
        assert_eq!(v, View::new(1, ["0", "2"]));
        assert_eq!(r.decide(4), v, "the last decided version is answered with the view without it");
        assert_eq!(r.decide(9), v, "its scheduled remove went with it");
        assert_eq!(r.state_of("1"), Some(TaskState::Lost));
        let e = r.drop_lost(&["0".into(), "2".into()]).unwrap_err();
        assert_eq!(e, "going on without tasks 0, 2 would leave 0 workers, below the minimum of 2");
        assert!(r.drop_lost(&["2".into()]).unwrap_err().contains("without task 2 would leave 1 workers"));
        assert!(r.drop_lost(&["7".into()]).is_err());
        r.arrived("1").unwrap();
        assert_eq!(r.decide(10), View::new(2, ["0", "1", "2"]), "back at the next boundary");
    }

    #[test]
    fn a_swap_never_goes_below_the_minimum_while_the_joiner_is_away() {
        let mut r = roster(&["0", "1"], 2, 3);
        r.request(Change::Add, "2", None).unwrap();
        r.request(Change::Remove, "0", None).unwrap();
        assert_eq!(r.decide(0).members(), ["0", "1"], "task 2 is not there: 0 stays for now");
        r.arrived("2").unwrap();
        assert_eq!(r.decide(1), View::new(1, ["1", "2"]));
    }

    #[test]
    fn transitions_name_roles_and_replica_moves() {
        let t = Transition::new(View::new(0, ["0", "1", "2", "3"]), View::new(1, ["1", "3", "4"])).unwrap();
        assert_eq!(t.role("1"), Role::Stays { old_rank: 1, new_rank: 0 });
        assert_eq!(t.role("4"), Role::Joins { new_rank: 2 });
        assert_eq!(t.role("2"), Role::Leaves { old_rank: 2 });
        assert_eq!(t.role("9"), Role::Outside);
        assert_eq!((t.joiners(), t.leavers()), (vec!["4".to_string()], vec!["0".to_string(), "2".into()]));
        let moves = t.replica_moves(&Placement::new(3, 0, 1));
        assert_eq!(moves, vec![ReplicaMove { owner: 0, to: vec![1] }, ReplicaMove { owner: 1, to: vec![2] }]);
        assert!(Transition::new(View::new(1, ["0"]), View::new(1, ["0", "1"])).is_err());
        assert!(Transition::new(View::new(0, ["0"]), View::new(1, ["1"])).unwrap_err().contains("nobody holds"));
    }
}

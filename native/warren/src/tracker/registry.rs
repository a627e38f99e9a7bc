//! Who is in the job: task ids, their addresses, the membership [`View`] once everyone has
//! arrived, and who finished or was lost. A pure state machine, no I/O: the server feeds it
//! events and acts on what it returns.

use std::collections::BTreeMap;

use super::proto::PeerAddr;
use crate::membership::{Change, Limits, Roster, TaskState, View, task_order};

/// The state of one worker as the tracker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Registered and running.
    Running,
    /// Sent `shutdown`.
    Finished,
    /// Its connection dropped without `shutdown` (it may come back).
    Lost,
}

#[derive(Debug, Clone)]
struct Entry {
    host: String,
    port: u16,
    pid: u32,
    /// The attempt number its current worker registered with.
    attempt: u32,
    host_id: String,
    state: WorkerState,
    /// Finished, and its connection to the tracker ended before the job did: it did not
    /// wait to serve anyone (a worker whose call had failed, or a plain-mode one).
    left: bool,
}

impl Entry {
    /// A worker that just registered, listening at `host:port` (its pid, attempt and host id
    /// come with its later messages).
    fn running(host: &str, port: u16) -> Entry {
        Entry {
            host: host.to_string(),
            port,
            pid: 0,
            attempt: 0,
            host_id: String::new(),
            state: WorkerState::Running,
            left: false,
        }
    }
}

/// What a registration leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// Not everyone is here yet.
    Waiting {
        /// Distinct task ids registered so far.
        arrived: usize,
    },
    /// Everyone is here: the first view, to be told to every member now.
    Assigned(View),
    /// After the view was made, a member (re-)joined a re-link round: a restarted worker
    /// registering again, or a survivor asking to re-link. It keeps its rank.
    RoundJoined {
        /// Its rank.
        rank: usize,
        /// Whether this registration opened the round (the others should be told).
        opened: bool,
        /// Set when every member is now in the round: the view, to be told to all of them now.
        complete: Option<View>,
    },
    /// The registration is refused.
    Rejected(String),
    /// An elastic job's task that was removed and has left registers again (a re-run of
    /// it): it is not a member and will not be; it should end without a result.
    Left(String),
    /// The task id is held by a live worker (a duplicate attempt, e.g. Spark's speculative
    /// execution, or a restart that arrived before the tracker saw the old worker's
    /// connection close): try again shortly.
    Busy(String),
    /// An elastic job admitted the task: it joins the view decided at the next checkpoint
    /// boundary (its assignment comes when that view's link round completes).
    Admitted,
}

/// The view that holds after a checkpoint version, as [`Registry::decide`] answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The view.
    pub view: View,
    /// Whether this answer changed the view (its link round is now open, with the joiners).
    pub changed: bool,
    /// The joiners of the change (their assignment comes with the round's).
    pub joiners: Vec<String>,
    /// Registered joiners this decision dropped (their removal came due before there was
    /// room for them): their processes are to stop.
    pub dismissed: Vec<String>,
}

/// Membership and worker bookkeeping for a job of `world` workers.
#[derive(Debug, Clone)]
pub struct Registry {
    world: usize,
    workers: BTreeMap<String, Entry>,
    view: Option<View>,
    rounds: u64,
    recoveries: u64,
    round: Option<std::collections::BTreeSet<String>>,
    /// The last checkpoint version each member in the open round committed (as it said).
    versions: BTreeMap<String, u32>,
    /// The newest of them in the last completed round.
    round_version: u32,
    /// Elastic jobs: the worker limits, then (once the first view is made) the roster.
    limits: Option<Limits>,
    roster: Option<Roster>,
    /// Each member's host id when the current view was made, and that view's epoch: where
    /// the algorithms place it for the view's lifetime ([`PeerAddr::placed_on`]).
    placement: BTreeMap<String, String>,
    placement_epoch: Option<u64>,
}

impl Registry {
    /// A registry for `world` workers.
    pub fn new(world: usize) -> Registry {
        Registry {
            world,
            workers: BTreeMap::new(),
            view: None,
            rounds: 0,
            recoveries: 0,
            round: None,
            versions: BTreeMap::new(),
            round_version: 0,
            limits: None,
            roster: None,
            placement: BTreeMap::new(),
            placement_epoch: None,
        }
    }

    /// A registry for an elastic job: it starts once `world` workers are there and may then
    /// change size within `limits` at checkpoint boundaries.
    pub fn elastic(world: usize, limits: Limits) -> Registry {
        Registry { limits: Some(limits), ..Registry::new(world) }
    }

    /// Whether the job is elastic.
    pub fn is_elastic(&self) -> bool {
        self.limits.is_some()
    }

    /// The elastic roster (once the first view is made).
    pub fn roster(&self) -> Option<&Roster> {
        self.roster.as_ref()
    }

    /// Number of workers expected.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Whether the view has been made (every worker arrived once).
    pub fn assigned(&self) -> bool {
        self.view.is_some()
    }

    /// The current view, once every worker has arrived.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// Re-link rounds completed so far.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Number of recoveries so far.
    pub fn recoveries(&self) -> u64 {
        self.recoveries
    }

    /// A worker registers (or re-registers) with its task id and peer address.
    pub fn register(&mut self, task_id: &str, host: &str, port: u16) -> Registered {
        if task_id.is_empty() {
            return Registered::Rejected("empty task id".into());
        }
        let assigned = self.assigned();
        if assigned && self.workers.contains_key(task_id) {
            if let Some(refusal) = self.done_refusal().or_else(|| self.left_refusal()) {
                return refusal;
            }
        }
        if assigned && self.roster.is_some() && self.rank_of(task_id).is_none() {
            return self.admit(task_id, host, port);
        }
        if let Some(e) = self.workers.get_mut(task_id) {
            if e.state == WorkerState::Running {
                return Registered::Busy(format!(
                    "task {task_id} is already running (a duplicate attempt, e.g. speculative execution, is refused)"
                ));
            }
            e.host = host.to_string();
            e.port = port;
            e.state = WorkerState::Running;
            if !assigned {
                return Registered::Waiting { arrived: self.workers.len() };
            }
            self.recoveries += 1;
            // A new process: it has committed nothing.
            self.versions.remove(task_id);
            return self.join_round(task_id);
        }
        if assigned || self.workers.len() == self.world {
            let mut known: Vec<&String> = self.workers.keys().collect();
            known.sort_by(|a, b| task_order(a, b));
            return Registered::Rejected(format!(
                "the job has {} workers and task id {task_id:?} is not one of them ({known:?})",
                self.world
            ));
        }
        self.workers.insert(task_id.to_string(), Entry::running(host, port));
        if self.workers.len() < self.world {
            return Registered::Waiting { arrived: self.workers.len() };
        }
        let view = View::new(0, self.workers.keys().cloned());
        self.view = Some(view.clone());
        if let Some(limits) = self.limits {
            match Roster::new(view.clone(), limits) {
                Ok(r) => self.roster = Some(r),
                Err(e) => return Registered::Rejected(e),
            }
        }
        Registered::Assigned(view)
    }

    /// A task that is not a member registers with a running elastic job: admitted if the
    /// roster expects it (added, restarted, or a lost task coming back).
    fn admit(&mut self, task_id: &str, host: &str, port: u16) -> Registered {
        if self.workers.get(task_id).is_some_and(|e| e.state == WorkerState::Running) {
            return Registered::Busy(format!("task {task_id} is already waiting to join"));
        }
        let roster = self.roster.as_mut().expect("elastic");
        if roster.state_of(task_id) == Some(TaskState::Stopped) {
            return Registered::Left(format!(
                "task {task_id} was removed from the elastic job and has left it: a re-run of it has nothing to \
                 do (to bring it back, restart it: `warren ctl restart {task_id}` or Tracker.restart)"
            ));
        }
        if let Err(e) = roster.arrived(task_id) {
            return Registered::Rejected(e);
        }
        self.workers.insert(task_id.to_string(), Entry::running(host, port));
        Registered::Admitted
    }

    /// A control request (add, remove, restart, give up) on an elastic job, applied at
    /// checkpoint version `at` or later.
    pub fn control(&mut self, change: Change, task_id: &str, at: Option<u32>) -> Result<(), String> {
        match self.roster.as_mut() {
            Some(r) => r.request(change, task_id, at),
            None if self.limits.is_some() => Err("the job has not started yet (not every worker has arrived)".into()),
            None => Err("the job is not elastic (start it with --min-workers/--max-workers)".into()),
        }
    }

    /// The newest checkpoint version the members of an elastic job asked the view after.
    pub fn decided_version(&self) -> Option<u32> {
        self.roster.as_ref().and_then(|r| r.decided_version())
    }

    /// Tasks a decision at `version` would admit but that have not registered yet
    /// ([`Roster::awaited_joiners`]; empty for a fixed job or a decided version).
    pub fn awaited_joiners(&self, version: u32) -> Vec<String> {
        self.roster.as_ref().map(|r| r.awaited_joiners(version)).unwrap_or_default()
    }

    /// A member of an elastic job committed checkpoint `version` and asks which view holds
    /// from then on. A change opens the new view's link round with its joiners in it; the
    /// members that stay join it by re-linking, and those that leave stop.
    pub fn decide(&mut self, version: u32) -> Result<Decision, String> {
        let (Some(roster), Some(current)) = (self.roster.as_mut(), self.view.as_ref()) else {
            return Err("not an elastic job".into());
        };
        let view = roster.decide(version);
        let dismissed = roster.take_dismissed();
        for t in &dismissed {
            self.workers.remove(t);
        }
        if view.epoch() <= current.epoch() {
            return Ok(Decision { view, changed: false, joiners: Vec::new(), dismissed });
        }
        let joiners: Vec<String> = view.members().iter().filter(|t| current.rank_of(t).is_none()).cloned().collect();
        let round = self.round.get_or_insert_with(Default::default);
        round.extend(joiners.iter().cloned());
        self.view = Some(view.clone());
        Ok(Decision { view, changed: true, joiners, dismissed })
    }

    /// Members of the current view whose connection dropped and that have not registered
    /// again, in task order.
    pub fn lost_members(&self) -> Vec<String> {
        let Some(view) = &self.view else { return Vec::new() };
        let lost = |t: &&String| self.workers.get(*t).is_some_and(|e| e.state == WorkerState::Lost);
        view.members().iter().filter(lost).cloned().collect()
    }

    /// Goes on without lost members of an elastic job whose replacements did not register
    /// within the rejoin timeout: the view changes at once ([`Roster::drop_lost`]; the
    /// survivors roll back to their last checkpoint in it). Returns the new view if the
    /// re-link round waiting for them is now complete (to be told to every member now).
    /// Refused, naming the tasks, below the minimum.
    pub fn give_up(&mut self, tasks: &[String]) -> Result<Option<View>, String> {
        let roster = self.roster.as_mut().ok_or_else(|| "not an elastic job".to_string())?;
        let view = roster.drop_lost(tasks)?;
        self.view = Some(view.clone());
        let complete = self.round.as_ref().is_some_and(|r| view.members().iter().all(|m| r.contains(m)));
        if !complete {
            return Ok(None);
        }
        self.close_round();
        Ok(Some(view))
    }

    /// A member joining a re-link round says the last checkpoint version it committed (before
    /// [`Registry::rejoin`]).
    pub fn set_version(&mut self, task_id: &str, version: u32) {
        self.versions.insert(task_id.to_string(), version);
    }

    /// The newest checkpoint version a member of the last completed re-link round committed
    /// (0 if none said one): what the members go on from if the round rolls back.
    pub fn round_version(&self) -> u32 {
        self.round_version
    }

    /// The open round is complete: counted, and its members' newest version kept.
    fn close_round(&mut self) {
        self.round = None;
        self.rounds += 1;
        self.round_version = self.versions.values().copied().max().unwrap_or(0);
        self.versions.clear();
    }

    /// A surviving worker asks to re-link (its links broke) at a new or the same address. A
    /// member that finished may, until every member has: a member lost before it finished
    /// is being replaced, and the finished members serve the replacement (running again,
    /// they finish again afterwards).
    pub fn rejoin(&mut self, task_id: &str, host: &str, port: u16) -> Registered {
        let member = self.rank_of(task_id).is_some();
        if member {
            if let Some(refusal) = self.done_refusal().or_else(|| self.left_refusal()) {
                return refusal;
            }
        }
        match self.workers.get_mut(task_id) {
            Some(e) if member => {
                e.host = host.to_string();
                e.port = port;
                e.state = WorkerState::Running;
                self.join_round(task_id)
            }
            _ => Registered::Rejected(format!("task id {task_id:?} has no rank to re-link with")),
        }
    }

    /// The refusal of any re-link once every member has finished the job (they have been
    /// told the job is done and are gone; until then a finished member waits, and re-links
    /// to serve the replacement of a member lost before it finished).
    fn done_refusal(&self) -> Option<Registered> {
        self.job_finished().then(|| {
            Registered::Rejected(format!(
                "re-linking is impossible: every one of the {} members has finished the job",
                self.view.as_ref().map_or(self.world, View::world)
            ))
        })
    }

    /// The refusal of any re-link once a member finished and left without waiting for the
    /// others (it cannot serve a replacement or take part in a round).
    fn left_refusal(&self) -> Option<Registered> {
        let member = |t: &str| self.rank_of(t).is_some();
        self.workers.iter().find(|(t, e)| e.state == WorkerState::Finished && e.left && member(t)).map(|(gone, _)| {
            let rank = self.rank_of(gone).expect("a member");
            Registered::Rejected(format!(
                "re-linking is impossible: rank {rank} (task {gone}) has finished the job and left"
            ))
        })
    }

    fn join_round(&mut self, task_id: &str) -> Registered {
        let rank = self.rank_of(task_id).expect("only members join rounds");
        let opened = self.round.is_none();
        let round = self.round.get_or_insert_with(Default::default);
        round.insert(task_id.to_string());
        let world = self.view.as_ref().map_or(self.world, View::world);
        let complete = if round.len() == world {
            self.close_round();
            self.view.clone()
        } else {
            None
        };
        Registered::RoundJoined { rank, opened, complete }
    }

    /// Task ids waiting in the current re-link round.
    pub fn round_members(&self) -> Vec<String> {
        self.round.iter().flatten().cloned().collect()
    }

    /// Fixes where the algorithms place each member of the current view, once per view
    /// (epoch): its host id now. Called when a view's assignment goes out; a later re-link
    /// round of the same view keeps it, whatever host a replacement registered from.
    pub fn fix_placement(&mut self) {
        let Some(view) = &self.view else { return };
        if self.placement_epoch == Some(view.epoch()) {
            return;
        }
        self.placement = view
            .members()
            .iter()
            .map(|t| (t.clone(), self.workers.get(t).map(|e| e.host_id.clone()).unwrap_or_default()))
            .collect();
        self.placement_epoch = Some(view.epoch());
    }

    /// Every member's address, indexed by rank (empty until the view is made).
    pub fn peers(&self) -> Vec<PeerAddr> {
        let Some(view) = &self.view else { return Vec::new() };
        view.members()
            .iter()
            .enumerate()
            .map(|(rank, id)| {
                let e = &self.workers[id];
                PeerAddr {
                    rank,
                    task_id: id.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    pid: e.pid,
                    host_id: e.host_id.clone(),
                    placed_on: self.placement.get(id).cloned().unwrap_or_else(|| e.host_id.clone()),
                }
            })
            .collect()
    }

    /// Rank of a task id in the current view.
    pub fn rank_of(&self, task_id: &str) -> Option<usize> {
        self.view.as_ref().and_then(|v| v.rank_of(task_id))
    }

    /// Records the process id of `task`'s current worker.
    pub fn set_pid(&mut self, task_id: &str, pid: u32) {
        if let Some(e) = self.workers.get_mut(task_id) {
            e.pid = pid;
        }
    }

    /// Records the attempt number `task`'s current worker registered with.
    pub fn set_attempt(&mut self, task_id: &str, attempt: u32) {
        if let Some(e) = self.workers.get_mut(task_id) {
            e.attempt = attempt;
        }
    }

    /// The attempt number `task`'s current (or last) worker registered with.
    pub fn attempt_of(&self, task_id: &str) -> Option<u32> {
        self.workers.get(task_id).map(|e| e.attempt)
    }

    /// Records a worker's host id (from its registration), passed on to its peers.
    pub fn set_host_id(&mut self, task_id: &str, host_id: &str) {
        if let Some(e) = self.workers.get_mut(task_id) {
            e.host_id = host_id.to_string();
        }
    }

    /// `"rank 2 (task 2 on 10.0.0.3, pid 4242)"`: who a task's worker is, for the log.
    pub fn identity(&self, task_id: &str) -> String {
        let rank = self.rank_of(task_id).map(|r| format!("rank {r} ")).unwrap_or_default();
        match self.workers.get(task_id) {
            Some(e) => format!("{rank}(task {task_id} on {}, pid {})", e.host, e.pid),
            None => format!("{rank}(task {task_id})"),
        }
    }

    /// State of a task id.
    pub fn state_of(&self, task_id: &str) -> Option<WorkerState> {
        self.workers.get(task_id).map(|e| e.state)
    }

    /// The worker shut down cleanly. Returns whether the whole job has now finished.
    pub fn finished(&mut self, task_id: &str) -> bool {
        if let Some(e) = self.workers.get_mut(task_id) {
            e.state = WorkerState::Finished;
        }
        self.job_finished()
    }

    /// A finished worker's connection ended: if the job is not done, it left without waiting
    /// for the others.
    pub fn finished_connection_ended(&mut self, task_id: &str) {
        let done = self.job_finished();
        if let Some(e) = self.workers.get_mut(task_id).filter(|e| e.state == WorkerState::Finished) {
            e.left = !done;
        }
    }

    /// The worker's connection dropped without a shutdown.
    /// A lost worker also leaves the re-link round it may have joined, so that a round
    /// completes only with live addresses.
    pub fn lost(&mut self, task_id: &str) {
        if let Some(e) = self.workers.get_mut(task_id) {
            if e.state == WorkerState::Running {
                e.state = WorkerState::Lost;
            }
        }
        let member = self.rank_of(task_id).is_some();
        if let Some(roster) = self.roster.as_mut().filter(|_| !member) {
            roster.departed(task_id);
        }
        self.versions.remove(task_id);
        if let Some(r) = self.round.as_mut() {
            r.remove(task_id);
            if r.is_empty() {
                self.round = None;
            }
        }
    }

    /// Whether every worker has finished (in an elastic job: every member of the view).
    pub fn job_finished(&self) -> bool {
        let Some(view) = &self.view else { return false };
        let done = |t: &String| self.workers.get(t).is_some_and(|e| e.state == WorkerState::Finished);
        match self.roster {
            Some(_) => view.members().iter().all(done),
            None => self.workers.keys().all(done),
        }
    }

    /// Task ids in a given state, in rank (task id) order.
    pub fn task_ids(&self, state: Option<WorkerState>) -> Vec<String> {
        let mut v: Vec<String> =
            self.workers.iter().filter(|(_, e)| state.is_none_or(|s| e.state == s)).map(|(id, _)| id.clone()).collect();
        v.sort_by(|a, b| task_order(a, b));
        v
    }

    /// Describes who is missing at the rendezvous: the absent task ids when the ids are the
    /// numbers `0..world` (as `warren run` and Spark assign them), otherwise who did arrive.
    pub fn missing_description(&self) -> String {
        let arrived = self.task_ids(None);
        let numeric: Option<Vec<u64>> = arrived.iter().map(|id| id.parse().ok()).collect();
        match numeric {
            Some(nums) if nums.iter().all(|&n| (n as usize) < self.world) => {
                let missing: Vec<usize> = (0..self.world).filter(|i| !nums.contains(&(*i as u64))).collect();
                format!("{} of {} workers arrived; missing task ids {:?}", arrived.len(), self.world, missing)
            }
            _ => format!("{} of {} workers arrived (task ids {:?})", arrived.len(), self.world, arrived),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_numeric_task_order_once_all_arrive() {
        let mut r = Registry::new(3);
        assert_eq!(r.register("10", "h", 1), Registered::Waiting { arrived: 1 });
        assert_eq!(r.register("2", "h", 2), Registered::Waiting { arrived: 2 });
        let out = r.register("9", "h", 3);
        assert_eq!(out, Registered::Assigned(View::new(0, ["2", "9", "10"])));
        assert_eq!(r.view().unwrap().members(), ["2", "9", "10"]);
        assert_eq!(r.rank_of("10"), Some(2));
        assert_eq!(r.peers().iter().map(|p| p.port).collect::<Vec<_>>(), vec![2, 3, 1]);
        r.set_pid("9", 4242);
        assert_eq!(r.identity("9"), "rank 1 (task 9 on h, pid 4242)");
        assert_eq!(r.peers()[1].pid, 4242);
    }

    #[test]
    fn a_returning_task_keeps_its_rank_and_new_address() {
        let mut r = Registry::new(2);
        r.register("0", "a", 1);
        r.register("1", "b", 2);
        assert!(matches!(r.register("1", "c", 9), Registered::Busy(_)), "a live task id is not taken over");
        r.lost("1");
        assert_eq!(r.state_of("1"), Some(WorkerState::Lost));
        assert_eq!(r.register("1", "c", 9), Registered::RoundJoined { rank: 1, opened: true, complete: None });
        assert_eq!(r.round_members(), vec!["1".to_string()]);
        assert_eq!(r.recoveries(), 1);
        assert_eq!(r.peers()[1].host, "c");
        assert_eq!(r.state_of("1"), Some(WorkerState::Running));
        // The survivor re-links: the round is complete and everyone is told.
        let done = r.rejoin("0", "a", 3);
        let view = Some(View::new(0, ["0", "1"]));
        assert_eq!(done, Registered::RoundJoined { rank: 0, opened: false, complete: view });
        assert_eq!(r.rounds(), 1);
        assert!(r.round_members().is_empty());
        assert_eq!(r.peers()[0].port, 3);
    }

    #[test]
    fn a_replacement_on_another_host_keeps_its_place_for_the_view() {
        let mut r = Registry::new(3);
        for (t, h) in [("0", "hb"), ("1", "ha"), ("2", "ha")] {
            r.register(t, "127.0.0.1", 1);
            r.set_host_id(t, h);
        }
        r.fix_placement();
        r.lost("0");
        r.register("0", "127.0.0.1", 2);
        r.set_host_id("0", "ha");
        r.fix_placement();
        let p = &r.peers()[0];
        assert_eq!((p.host_id.as_str(), p.placed_on.as_str()), ("ha", "hb"), "runs on ha, placed on hb");
        assert!(r.peers().iter().skip(1).all(|p| p.placed_on == "ha"));
    }

    #[test]
    fn a_worker_lost_during_a_round_leaves_it() {
        let mut r = Registry::new(3);
        for t in ["0", "1", "2"] {
            r.register(t, "h", 1);
        }
        r.rejoin("0", "h", 1);
        r.rejoin("1", "h", 1);
        r.lost("1");
        assert_eq!(r.round_members(), vec!["0".to_string()]);
        r.lost("2");
        assert!(matches!(r.register("2", "h", 2), Registered::RoundJoined { complete: None, .. }));
        assert!(matches!(r.register("1", "h", 5), Registered::RoundJoined { complete: Some(_), .. }));
        assert!(matches!(Registry::new(1).rejoin("0", "h", 1), Registered::Rejected(_)));
    }

    #[test]
    fn a_member_lost_before_it_finished_is_replaced_until_every_member_has() {
        let mut r = Registry::new(3);
        for t in ["0", "1", "2"] {
            r.register(t, "h", 1);
        }
        assert!(!r.finished("1"));
        assert!(!r.finished("2"));
        // Task 0 is lost before it finished: its replacement opens a round, the finished
        // members re-link into it (running again) and finish again once they served it.
        r.lost("0");
        assert_eq!(r.register("0", "h", 5), Registered::RoundJoined { rank: 0, opened: true, complete: None });
        assert!(matches!(r.rejoin("1", "h", 2), Registered::RoundJoined { complete: None, .. }));
        assert_eq!(r.state_of("1"), Some(WorkerState::Running));
        assert!(matches!(r.rejoin("2", "h", 3), Registered::RoundJoined { complete: Some(_), .. }));
        assert!(!r.finished("1") && !r.finished("0"));
        assert!(r.finished("2"), "every member finished");
        // Then nothing re-links, and a finished worker lost is no loss: its task registering
        // again is refused.
        let done = |m: &Registered| matches!(m, Registered::Rejected(m) if m.contains("every one of the 3 members"));
        assert!(done(&r.rejoin("0", "h", 1)));
        r.lost("2");
        assert_eq!(r.state_of("2"), Some(WorkerState::Finished));
        assert!(done(&r.register("2", "h", 9)));
    }

    /// A worker that finished without waiting for the others (its call had failed) and whose
    /// connection then ended cannot serve anyone: a re-link is refused at once, naming it,
    /// instead of waiting for it.
    #[test]
    fn a_finished_worker_that_left_makes_a_re_link_fail_at_once() {
        let mut r = Registry::new(2);
        for t in ["0", "1"] {
            r.register(t, "h", 1);
        }
        assert!(!r.finished("0"));
        r.finished_connection_ended("0");
        let refused = r.rejoin("1", "h", 2);
        assert!(
            matches!(&refused, Registered::Rejected(m) if m.contains("rank 0 (task 0) has finished the job and left")),
            "{refused:?}"
        );
        // Once every member finished, a connection ending is no departure.
        let mut r = Registry::new(1);
        r.register("0", "h", 1);
        assert!(r.finished("0"));
        r.finished_connection_ended("0");
        assert!(!r.workers["0"].left);
    }

    #[test]
    fn re_registering_before_assignment_replaces_the_address() {
        let mut r = Registry::new(2);
        r.register("0", "a", 1);
        r.lost("0");
        assert_eq!(r.register("0", "a", 5), Registered::Waiting { arrived: 1 });
        assert!(matches!(r.register("1", "b", 2), Registered::Assigned(_)));
        assert_eq!(r.peers()[0].port, 5);
    }

    #[test]
    fn strangers_are_rejected() {
        let mut r = Registry::new(1);
        r.register("0", "a", 1);
        assert!(matches!(r.register("7", "a", 2), Registered::Rejected(m) if m.contains("\"7\"")));
        assert!(matches!(Registry::new(2).register("", "a", 1), Registered::Rejected(_)));
    }

    #[test]
    fn job_finishes_when_all_shut_down() {
        let mut r = Registry::new(2);
        r.register("0", "a", 1);
        r.register("1", "a", 2);
        assert!(!r.finished("0"));
        r.lost("0"); // a finished worker closing its connection is not lost
        assert_eq!(r.state_of("0"), Some(WorkerState::Finished));
        assert!(r.finished("1"));
    }

    #[test]
    fn an_elastic_job_grows_and_shrinks_through_link_rounds() {
        let mut r = Registry::elastic(2, Limits::new(2, 3));
        assert!(r.control(Change::Add, "2", None).unwrap_err().contains("not started"));
        r.register("0", "h", 1);
        assert!(matches!(r.register("1", "h", 2), Registered::Assigned(_)));
        assert!(matches!(r.register("2", "h", 3), Registered::Rejected(m) if m.contains("not been admitted")));
        r.control(Change::Add, "2", None).unwrap();
        assert_eq!(r.register("2", "h", 3), Registered::Admitted);
        assert!(matches!(r.register("2", "h", 3), Registered::Busy(_)), "one worker per task id");
        let d = r.decide(1).unwrap();
        assert_eq!((d.changed, d.joiners.clone()), (true, vec!["2".to_string()]));
        assert_eq!(r.decide(1).unwrap().view, d.view, "the same answer to every member");
        assert_eq!(r.rejoin("0", "h", 1), Registered::RoundJoined { rank: 0, opened: false, complete: None });
        let grown = Some(View::new(1, ["0", "1", "2"]));
        assert_eq!(r.rejoin("1", "h", 2), Registered::RoundJoined { rank: 1, opened: false, complete: grown });
        assert_eq!(r.peers().len(), 3);
        // Shrink: task 1 leaves (finishes) without stranding the others' round.
        r.control(Change::Remove, "1", None).unwrap();
        assert!(r.control(Change::Remove, "0", None).unwrap_err().contains("below the minimum"));
        assert_eq!(r.decide(2).unwrap().view, View::new(2, ["0", "2"]));
        assert!(!r.finished("1"));
        assert!(matches!(r.rejoin("0", "h", 1), Registered::RoundJoined { complete: None, .. }));
        assert!(matches!(r.rejoin("2", "h", 3), Registered::RoundJoined { complete: Some(_), .. }));
        assert!(!r.finished("0"));
        assert!(r.finished("2"), "every member of the view finished");
        assert!(Registry::new(1).control(Change::Add, "1", None).unwrap_err().contains("not elastic"));
    }

    #[test]
    fn a_lost_member_given_up_on_completes_the_round_without_it() {
        let mut r = Registry::elastic(3, Limits::new(2, 3));
        for t in ["0", "1", "2"] {
            r.register(t, "h", 1);
        }
        assert!(r.lost_members().is_empty());
        r.lost("1");
        assert_eq!(r.lost_members(), vec!["1".to_string()]);
        r.rejoin("0", "h", 1);
        r.rejoin("2", "h", 3);
        assert_eq!(r.round_members().len(), 2, "the round waits for task 1");
        assert_eq!(r.give_up(&["1".into()]).unwrap(), Some(View::new(1, ["0", "2"])));
        assert!(r.round_members().is_empty() && r.lost_members().is_empty());
        assert_eq!(r.peers().len(), 2);
        // It comes back: admitted, it joins at the next boundary.
        assert_eq!(r.register("1", "h", 5), Registered::Admitted);
        assert_eq!(r.decide(3).unwrap().view, View::new(2, ["0", "1", "2"]));
        r.lost("2");
        r.lost("0");
        let e = r.give_up(&["0".into(), "2".into()]).unwrap_err();
        assert!(e.contains("tasks 0, 2 would leave 1 workers, below the minimum of 2"), "{e}");
    }

    #[test]
    fn missing_ids_are_named() {
        let mut r = Registry::new(4);
        r.register("0", "a", 1);
        r.register("2", "a", 1);
        assert_eq!(r.missing_description(), "2 of 4 workers arrived; missing task ids [1, 3]");
        let mut s = Registry::new(3);
        s.register("x", "a", 1);
        assert!(s.missing_description().contains("[\"x\"]"));
    }
}

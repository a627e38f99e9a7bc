//! Elastic membership, the worker's side (see `docs/elastic-design.md`): after each committed
//! checkpoint a member of an elastic job asks the tracker which view holds from then on; if
//! it changed, the member leaves, or re-derives its rank, re-links in the new view's link
//! round and enters consensus mode, where the recovery planner ([`crate::robust::plan`])
//! serves the joiners the checkpoint and bootstrap results and re-places the local-model
//! replicas, as after a recovery. What changes is planned by [`Transition`] (pure).

use std::time::Instant;

use log::{info, warn};

use super::init::Assigned;
use super::recovery::Round;
use super::{Communicator, LOG, recoverable};
use crate::collective::header::CallKind;
use crate::error::{Error, Result};
use crate::membership::{Role, Transition, View};
use crate::mock::Point as MockPoint;
use crate::reduce::{DataType, Op};
use crate::robust::{Item, Want};
use crate::tracker::proto::{FromTracker, ToTracker};

/// A change of membership, as the user sees it ([`Communicator::take_view_change`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewChange {
    /// The view before.
    pub from: View,
    /// The view after.
    pub to: View,
    /// This worker's rank in the new view; `None` if it left the job (it should call
    /// `finalize`; its local model is not kept by the others).
    pub rank: Option<usize>,
}

impl Communicator {
    /// The last change of membership, once: `Some` after a [`Communicator::checkpoint`] at
    /// which the view changed (the world size and rank have changed with it: re-shard the
    /// data, rescale the learning rate), or after which this worker left the job.
    pub fn take_view_change(&mut self) -> Option<ViewChange> {
        self.view_change.take()
    }

    /// Whether this worker left an elastic job (removed): its calls fail from then on, and
    /// it should `finalize`.
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// After committing a checkpoint in an elastic job: asks the tracker which view holds now,
    /// and applies a change.
    pub(super) fn follow_view(&mut self) -> Result<()> {
        let version = self.version();
        let deadline = Instant::now() + self.cfg.connect_timeout;
        let tracker = self.tracker.as_mut().ok_or_else(|| Error::Tracker("no tracker to ask for the view".into()))?;
        let view = match tracker.request(&ToTracker::ViewAt { version }, deadline)? {
            FromTracker::Decided { view } => view,
            FromTracker::Error { message } => return Err(Error::Tracker(message)),
            other => return Err(Error::Protocol(format!("tracker answered a view request with {other:?}"))),
        };
        if view == self.view {
            return Ok(());
        }
        let t = Transition::new(self.view.clone(), view).map_err(Error::Protocol)?;
        self.maybe_mock(MockPoint::Resize);
        let task = self.cfg.task_id.clone();
        match t.role(&task) {
            Role::Leaves { old_rank } => {
                info!(target: LOG, "task {task} (rank {old_rank}) leaves the job after checkpoint version {version}");
                self.close_links();
                self.left = true;
                self.failed = Some(format!("task {task} left the job after checkpoint version {version}"));
                self.view_change = Some(ViewChange { from: t.from().clone(), to: t.to().clone(), rank: None });
                Ok(())
            }
            Role::Stays { .. } => self.enter(&t, deadline),
            role => Err(Error::Protocol(format!("task {task} is {role:?} in the change from {t:?}"))),
        }
    }

    /// Moves this worker into the new view of `t`: the new link round, the
    /// recovery state re-placed (joiners' local models are known to be empty), consensus mode.
    /// If a member was given up on meanwhile (the rejoin timeout), the round's view, which
    /// lacks it, is entered instead: nothing ran since the checkpoint, so nothing rolls back.
    fn enter(&mut self, t: &Transition, deadline: Instant) -> Result<()> {
        self.close_links();
        let a = self.rejoin(deadline)?;
        let t = if &a.view == t.to() {
            t.clone()
        } else {
            Transition::new(t.from().clone(), a.view.clone()).map_err(Error::Protocol)?
        };
        self.adopt(&t, &a, deadline)?;
        self.rs().consensus = true;
        if !t.joiners().is_empty() {
            self.serve_joiners()?;
        }
        Ok(())
    }

    /// Serves the joiners of a view change right away, in recovery rounds ([`Want::Serve`]),
    /// until they are at their first call: they load while the members wait, instead of once
    /// the members reach their next call (a joiner then competed for the CPU with the
    /// members' work in between, and started that work only after them). Releasing the
    /// members as soon as the checkpoint had moved measured slower on an oversubscribed host
    /// (their work then delayed the joiner's loading, which is on the critical path). The
    /// result is the same: the same items move from the same holders. A lost link (a joiner
    /// died while loading) re-links at once, as in any call, and serving goes on with the
    /// replacement: leaving the round with the links as they were let this member's next
    /// call reach a peer still serving, which read that call's data as a call header.
    fn serve_joiners(&mut self) -> Result<()> {
        let hdr = self.header(CallKind::Checkpoint, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        loop {
            match self.recovery_round(&hdr, Want::Serve, None) {
                Ok(Round::Released) => return Ok(()),
                Ok(_) => continue,
                Err(e) if recoverable(&e) => {
                    warn!(target: LOG, "task {}: serving the joiners: {e}", self.cfg.task_id);
                    self.relink(&e)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Re-derives everything rank-shaped for the view `a` assigned (the new view of `t`):
    /// topology, links, the recovery state rebased right after its last commit (replicas
    /// renumbered, joiners' local models known to be empty), and the change the user is told.
    fn adopt(&mut self, t: &Transition, a: &Assigned, deadline: Instant) -> Result<()> {
        let task = self.cfg.task_id.clone();
        let Role::Stays { new_rank: rank, .. } = t.role(&task) else {
            return Err(Error::Protocol(format!("task {task} is {:?} in the change from {t:?}", t.role(&task))));
        };
        let world = a.view.world();
        self.topo = a.view.topology(rank);
        self.links = (0..world).map(|_| None).collect();
        self.view = a.view.clone();
        self.cancel.set_rank(rank);
        let placement = super::init::placement(world, &super::init::placed_hosts(&a.peers), &self.cfg);
        let joiners: Vec<usize> = t.joiners().iter().filter_map(|j| t.to().rank_of(j)).collect();
        let state = &mut self.rs().state;
        let version = state.version();
        state.rebase(rank, placement, |old| t.to().rank_of(t.from().task_of(old)?));
        for owner in joiners {
            state.take(&Item::LocalModel { owner, version }, Vec::new())?;
        }
        self.view_change = Some(ViewChange { from: t.from().clone(), to: t.to().clone(), rank: Some(rank) });
        info!(
            target: LOG,
            "task {task}: rank {rank} of {world} in view epoch {} from checkpoint version {version} (joined: {:?}, left: {:?})",
            a.view.epoch(),
            t.joiners(),
            t.leavers()
        );
        self.watch.set_peers(a.peers.clone(), a.round);
        match self.install_links(&a.peers, a.round, deadline) {
            Err(e) if recoverable(&e) && !self.cancel.is_cancelled() => self.relink(&e)?,
            r => r?,
        }
        Ok(())
    }

    /// A re-link round was assigned a view other than this worker's: members lost in the
    /// middle of a checkpoint interval were given up on (the rejoin timeout). Rolls back to
    /// the last committed checkpoint in the new view: the results of the calls made since are
    /// dropped, the workers go on from the checkpoint version the round agreed (the newest
    /// one a member committed, as each told the tracker when it joined the round: a worker
    /// that had not committed it loads it from the others), and the call being made fails
    /// with [`Error::RolledBack`] (the communicator stays usable: the user loads the
    /// checkpoint and goes on from its version).
    ///
    /// The agreement is the round itself, so a replacement registering in it (a restarted
    /// worker, which comes up in consensus mode) takes part like in any recovery; a member
    /// lost while the others link is given up on (or replaced) in a further round, and the
    /// roll-back goes on from there ([`Communicator::relink`] inside [`Communicator::adopt`]).
    pub(super) fn roll_back(&mut self, a: Assigned, deadline: Instant) -> Result<()> {
        self.maybe_mock(MockPoint::RollBack);
        let t = Transition::new(self.view.clone(), a.view.clone()).map_err(Error::Protocol)?;
        let newest = a.version;
        self.adopt(&t, &a, deadline)?;
        let mine = self.version();
        let r = self.rs();
        r.consensus = true;
        r.recoveries += 1;
        self.rolled_back = Some(mine < newest);
        let reason = format!(
            "tasks {:?} did not come back within the rejoin timeout; the job goes on with {} workers {:?}",
            t.leavers(),
            t.to().world(),
            t.to().members()
        );
        warn!(target: LOG, "task {}: rolled back to checkpoint version {newest}: {reason}", self.cfg.task_id);
        Err(Error::RolledBack { version: newest, reason })
    }
}

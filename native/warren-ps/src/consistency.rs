//! The consistency state machine of one server (pure): which pushes to apply when, and which
//! pulls may be answered, under sync (BSP), async (ASP) or bounded staleness SSP(k).
//!
//! Every trainer pushes to every server once per step (an empty push where it has no
//! gradient for that server), so a server counts each trainer's steps: its *clock* is the
//! number of pushes received. A pull is answered for the trainer's current clock `c`:
//!
//! - **sync**: the pushes of step `n` are buffered until every live trainer's `n`-th push has
//!   arrived; then they are released as one batch, in trainer-id order (so the sum never
//!   depends on arrival order). A pull at clock `c` waits until steps `0..c` are applied.
//! - **async**: every push is released on arrival; pulls never wait.
//! - **ssp(k)**: pushes are released on arrival; a pull at clock `c` waits until every live
//!   trainer's clock is at least `c - k`, so what it reads holds every update of steps below
//!   `c - k`: no trainer runs more than `k` steps ahead of the slowest.
//!
//! A trainer that leaves (finished, or given up) no longer holds anyone back; its pushes
//! already received are still applied. A trainer that joins ([`Clocks::join`]: named in the
//! job as joining later, or one that left) takes part from the step it names on. So the
//! members of step `n` are the trainers live at `n`: a sync step counts exactly them, and the
//! same join and leave steps give the same batches whatever the timing. The machine is
//! generic over the pushed payload `G`.
//!
//! **Two-phase pushes.** A trainer's push of step `n` spans `S` servers, and a trainer can
//! die between them. So a push is first *staged* at every server ([`Clocks::stage`]: held,
//! not counted, the clock stays at `n`), and only once every server has it staged does the
//! trainer *commit* it everywhere ([`Clocks::commit`]: counted and released as above). A
//! replacement trainer (same id) finds, from the servers' clocks and staged steps, either
//! that some server committed step `n` (then every server has it at least staged, and it
//! commits the rest: the step is completed) or that none did (then it aborts the staged
//! copies, [`Clocks::abort`]: the step is undone, and it computes it again from the same
//! model). A staged push is always of the trainer's next step (`clock`).
//!
//! Only sync pushes take two phases. Async and SSP pushes are staged and committed at once,
//! when they arrive (one round trip, not two): a trainer that dies between servers loses the
//! one push it was making (never acknowledged to it) at the servers it had not reached. Its
//! replacement finds some servers a step ahead and moves the others' clocks up to them
//! ([`Clocks::resume`]), counting the step lost there. (A server's restart loses nothing: it
//! replays its log, see `checkpoint.rs`.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use warren_base::error::{Error, Result};

/// How pushes and pulls of the trainers are ordered, chosen per job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Bulk-synchronous: step `n` is applied once every live trainer pushed it.
    Sync,
    /// Every push applied on arrival; pulls never wait.
    Async,
    /// Pushes applied on arrival; no trainer more than `staleness` steps ahead of the slowest.
    Ssp {
        /// The bound `k`.
        staleness: u64,
    },
}

impl Mode {
    /// Parses `sync`, `async` or `ssp` (with `staleness` as its bound).
    pub fn parse(mode: &str, staleness: u64) -> Result<Mode> {
        match mode {
            "sync" => Ok(Mode::Sync),
            "async" => Ok(Mode::Async),
            "ssp" => Ok(Mode::Ssp { staleness }),
            other => Err(Error::Config(format!("mode {other:?}: expected sync, async or ssp"))),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Sync => write!(f, "sync"),
            Mode::Async => write!(f, "async"),
            Mode::Ssp { staleness } => write!(f, "ssp({staleness})"),
        }
    }
}

/// Pushes released together, in trainer-id order: `(trainer, step, payload)`.
pub type Batch<G> = Vec<(u32, u64, G)>;

/// The clocks of a job's trainers at one server, and the pushes it holds back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Clocks<G> {
    mode: Mode,
    clock: Vec<u64>,
    live: Vec<bool>,
    /// Sync: steps `0..applied` have been released.
    applied: u64,
    /// Sync: pushes of steps not yet released, by step then trainer.
    pending: BTreeMap<u64, BTreeMap<u32, G>>,
    /// Pushes staged, not yet committed: trainer -> (its next step, payload).
    #[serde(default = "BTreeMap::new")]
    staged: BTreeMap<u32, (u64, G)>,
    /// The step each trainer took part from (its join step; empty: all from step 0).
    #[serde(default)]
    from: Vec<u64>,
}

impl<G> Clocks<G> {
    /// A job of `trainers` trainers (ids `0..trainers`), all live at clock 0.
    pub fn new(mode: Mode, trainers: u32) -> Clocks<G> {
        let n = trainers as usize;
        Clocks {
            mode,
            clock: vec![0; n],
            live: vec![true; n],
            applied: 0,
            pending: BTreeMap::new(),
            staged: BTreeMap::new(),
            from: vec![0; n],
        }
    }

    /// A job of `trainers` trainers of which those in `joining` do not take part at first:
    /// each joins later at a step of its choosing ([`Clocks::join`]).
    pub fn with_joiners(mode: Mode, trainers: u32, joining: &[u32]) -> Result<Clocks<G>> {
        let mut c = Clocks::new(mode, trainers);
        for &j in joining {
            let live = c.live.get_mut(j as usize).ok_or_else(|| {
                Error::InvalidArgument(format!("joining trainer {j} is not in a job of {trainers} trainers"))
            })?;
            *live = false;
        }
        Ok(c)
    }

    /// `trainer`, not taking part (named as joining later, or it left), takes part from its
    /// step `step` on: later steps count it (sync waits for its pushes from `step` on), earlier
    /// ones do not. Joining again at the same step is a no-op (sent again). Refused at a step
    /// already applied (sync) or below the trainer's own clock. Returns the batches released
    /// (sync: the steps before `step` that no trainer takes part in are skipped now).
    pub fn join(&mut self, trainer: u32, step: u64) -> Result<Vec<Batch<G>>> {
        let t = trainer as usize;
        if t >= self.clock.len() {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} is not in this job of {} trainers",
                self.clock.len()
            )));
        }
        if self.live[t] {
            return match self.clock[t] == step && self.first_step(t) == step {
                true => Ok(Vec::new()),
                false => Err(Error::InvalidArgument(format!(
                    "trainer {trainer} already takes part (its next step is {})",
                    self.clock[t]
                ))),
            };
        }
        let earliest = match self.mode {
            Mode::Sync => self.applied.max(self.clock[t]),
            _ => self.clock[t],
        };
        if step < earliest {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} cannot join at step {step}: the earliest step it can join at is {earliest}"
            )));
        }
        if self.from.len() < self.clock.len() {
            self.from.resize(self.clock.len(), 0);
        }
        self.clock[t] = step;
        self.from[t] = step;
        self.live[t] = true;
        Ok(if self.mode == Mode::Sync { self.release() } else { Vec::new() })
    }

    /// The step `trainer` takes part from.
    fn first_step(&self, t: usize) -> u64 {
        self.from.get(t).copied().unwrap_or(0)
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Number of trainers in the job.
    pub fn trainers(&self) -> u32 {
        self.clock.len() as u32
    }

    /// Pushes received from `trainer` (its next step).
    pub fn clock(&self, trainer: u32) -> u64 {
        self.clock.get(trainer as usize).copied().unwrap_or(0)
    }

    /// Steps released in sync mode (in the other modes, the slowest live clock).
    pub fn applied(&self) -> u64 {
        match self.mode {
            Mode::Sync => self.applied,
            _ => self.slowest(),
        }
    }

    /// Whether `trainer` is still taking part.
    pub fn is_live(&self, trainer: u32) -> bool {
        self.live.get(trainer as usize).copied().unwrap_or(false)
    }

    fn check(&self, trainer: u32) -> Result<usize> {
        let t = trainer as usize;
        if t >= self.clock.len() {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} is not in this job of {} trainers (ids 0..{})",
                self.clock.len(),
                self.clock.len()
            )));
        }
        if !self.live[t] {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} does not take part in the job (it left, or has not joined yet)"
            )));
        }
        Ok(t)
    }

    /// Takes `trainer`'s push of `step`, which must be its next one, staged and committed at
    /// once; returns the batches now released (to be applied in order).
    pub fn push(&mut self, trainer: u32, step: u64, payload: G) -> Result<Vec<Batch<G>>> {
        self.stage(trainer, step, payload)?;
        self.commit(trainer, step)
    }

    /// Holds `trainer`'s push of `step` (its next one) until it is committed; staging the
    /// same step again replaces it (a trainer sending it again after a lost connection).
    pub fn stage(&mut self, trainer: u32, step: u64, payload: G) -> Result<()> {
        self.check_stage(trainer, step)?;
        self.staged.insert(trainer, (step, payload));
        Ok(())
    }

    /// Whether [`stage`](Self::stage) would take `trainer`'s push of `step`: an error saying
    /// why not; nothing is changed.
    pub fn check_stage(&self, trainer: u32, step: u64) -> Result<()> {
        let t = self.check(trainer)?;
        if step != self.clock[t] {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} pushed step {step}, but its next step here is {}",
                self.clock[t]
            )));
        }
        Ok(())
    }

    /// The step `trainer` has staged and not committed, if any.
    pub fn staged(&self, trainer: u32) -> Option<u64> {
        self.staged.get(&trainer).map(|(s, _)| *s)
    }

    /// Drops `trainer`'s staged push of `step`, if it has one (a push its replacement undoes).
    pub fn abort(&mut self, trainer: u32, step: u64) -> Result<()> {
        self.check(trainer)?;
        if self.staged(trainer) == Some(step) {
            self.staged.remove(&trainer);
        }
        Ok(())
    }

    /// Commits `trainer`'s staged push of `step`: it counts (the clock moves) and is released
    /// as its mode says; returns the batches now released. A step already committed is a
    /// no-op (the commit was sent again).
    pub fn commit(&mut self, trainer: u32, step: u64) -> Result<Vec<Batch<G>>> {
        let t = self.check(trainer)?;
        if step < self.clock[t] {
            return Ok(Vec::new());
        }
        if self.staged(trainer) != Some(step) {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer} commits step {step}, but it has {} staged here (next step {})",
                self.staged(trainer).map_or("nothing".to_string(), |s| format!("step {s}")),
                self.clock[t]
            )));
        }
        let (_, payload) = self.staged.remove(&trainer).expect("checked above");
        self.clock[t] += 1;
        if self.mode != Mode::Sync {
            return Ok(vec![vec![(trainer, step, payload)]]);
        }
        self.pending.entry(step).or_default().insert(trainer, payload);
        Ok(self.release())
    }

    /// Async and SSP: moves `trainer`'s clock forward to `step` after the trainer died with
    /// its push of a step counted at other servers only (or this server restarted without
    /// the pushes it had acknowledged: no log); returns how many of its pushes were lost
    /// (the steps skipped). Sync trainers push the lost steps again instead.
    pub fn resume(&mut self, trainer: u32, step: u64) -> Result<u64> {
        let t = self.check(trainer)?;
        if self.mode == Mode::Sync {
            return Err(Error::InvalidArgument(format!(
                "trainer {trainer}: a sync job cannot skip steps; push steps {}..{step} again",
                self.clock[t]
            )));
        }
        let lost = step.saturating_sub(self.clock[t]);
        self.clock[t] = self.clock[t].max(step);
        Ok(lost)
    }

    /// `trainer` leaves the job: it holds nobody back any more; a push it staged is dropped.
    /// Leaving again is a no-op: a leave sent again to a server restarted from a checkpoint
    /// that holds it, or by a re-run of a trainer that had left. Returns the batches released.
    pub fn leave(&mut self, trainer: u32) -> Result<Vec<Batch<G>>> {
        if (trainer as usize) < self.live.len() && !self.live[trainer as usize] {
            return Ok(Vec::new());
        }
        let t = self.check(trainer)?;
        self.live[t] = false;
        self.staged.remove(&trainer);
        Ok(if self.mode == Mode::Sync { self.release() } else { Vec::new() })
    }

    /// Sync: releases every complete step, in order. A step no trainer takes part in (every
    /// trainer left before it, and the next one joins after it) is skipped once a trainer has
    /// joined at a later step: it releases nothing (no update, the optimizer's state is left
    /// as it is), so the joiner's pulls do not wait for it. While no trainer takes part at all
    /// the server waits (a trainer may still join at that step).
    fn release(&mut self) -> Vec<Batch<G>> {
        let mut out = Vec::new();
        loop {
            let step = self.applied;
            let member = |t: usize| self.live[t] && self.first_step(t) <= step;
            let nobody = !(0..self.live.len()).any(member) && !self.pending.contains_key(&step);
            if nobody && (0..self.live.len()).any(|t| self.live[t] && self.first_step(t) > step) {
                self.applied += 1;
                continue;
            }
            let complete = self
                .pending
                .get(&step)
                .is_some_and(|pushes| (0..self.live.len()).all(|t| !member(t) || pushes.contains_key(&(t as u32))));
            if !complete {
                return out;
            }
            let pushes = self.pending.remove(&step).expect("checked above");
            out.push(pushes.into_iter().map(|(t, g)| (t, step, g)).collect());
            self.applied += 1;
        }
    }

    /// The lowest clock of the live trainers (`u64::MAX` if none is live).
    fn slowest(&self) -> u64 {
        self.clock.iter().zip(&self.live).filter(|(_, l)| **l).map(|(c, _)| *c).min().unwrap_or(u64::MAX)
    }

    /// Whether a pull by `trainer` at its current clock may be answered now.
    pub fn pull_ready(&self, trainer: u32) -> bool {
        let c = self.clock(trainer);
        if !self.is_live(trainer) {
            return true;
        }
        match self.mode {
            Mode::Sync => self.applied >= c,
            Mode::Async => true,
            Mode::Ssp { staleness } => self.slowest() >= c.saturating_sub(staleness),
        }
    }

    /// The live trainers a pull by `trainer` waits for (for progress lines and errors).
    pub fn holding_back(&self, trainer: u32) -> Vec<u32> {
        let c = self.clock(trainer);
        let need = match self.mode {
            Mode::Sync => c,
            Mode::Async => 0,
            Mode::Ssp { staleness } => c.saturating_sub(staleness),
        };
        (0..self.trainers()).filter(|&u| self.is_live(u) && self.clock(u) < need).collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sync_releases_a_step_once_every_trainer_pushed_it_in_trainer_order() {
        let mut c = Clocks::new(Mode::Sync, 3);
        assert!(c.push(2, 0, "c0").unwrap().is_empty());
        assert!(c.push(0, 0, "a0").unwrap().is_empty());
        assert!(c.push(0, 1, "a1").unwrap().is_empty(), "a trainer may push ahead");
        assert!(!c.pull_ready(0), "trainer 0 is at clock 2, step 0 is not applied");
        assert_eq!(c.holding_back(0), vec![1, 2]);
        assert_eq!(c.push(1, 0, "b0").unwrap(), vec![vec![(0, 0, "a0"), (1, 0, "b0"), (2, 0, "c0")]]);
        assert!(c.pull_ready(1) && c.pull_ready(2) && !c.pull_ready(0));
        assert_eq!(c.leave(2).unwrap(), Vec::<Batch<&str>>::new(), "trainer 1 has not pushed step 1");
        assert_eq!(c.push(1, 1, "b1").unwrap(), vec![vec![(0, 1, "a1"), (1, 1, "b1")]]);
        assert!(c.pull_ready(0));
    }

    #[test]
    fn a_sync_step_counts_the_trainers_taking_part_in_it() {
        let mut c = Clocks::with_joiners(Mode::Sync, 3, &[2]).unwrap();
        assert!(Clocks::<()>::with_joiners(Mode::Sync, 2, &[5]).is_err());
        assert!(c.push(2, 0, "c0").unwrap_err().to_string().contains("has not joined yet"));
        c.join(2, 2).unwrap();
        c.join(2, 2).unwrap();
        assert!(c.join(2, 3).unwrap_err().to_string().contains("already takes part"));
        assert!(c.pull_ready(0) && !c.pull_ready(2), "the joiner waits for steps 0 and 1");
        c.push(0, 0, "a0").unwrap();
        assert_eq!(c.push(1, 0, "b0").unwrap(), vec![vec![(0, 0, "a0"), (1, 0, "b0")]], "step 0 without it");
        c.push(0, 1, "a1").unwrap();
        assert_eq!(c.push(1, 1, "b1").unwrap().len(), 1);
        assert!(c.pull_ready(2));
        c.push(0, 2, "a2").unwrap();
        assert!(c.push(1, 2, "b2").unwrap().is_empty(), "step 2 waits for the joiner");
        assert_eq!(c.leave(1).unwrap(), Vec::<Batch<&str>>::new());
        assert_eq!(c.push(2, 2, "c2").unwrap(), vec![vec![(0, 2, "a2"), (1, 2, "b2"), (2, 2, "c2")]]);
        assert_eq!(c.push(0, 3, "a3").unwrap().len(), 0, "step 3: trainers 0 and 2");
        assert_eq!(c.push(2, 3, "c3").unwrap(), vec![vec![(0, 3, "a3"), (2, 3, "c3")]]);
        let e = c.join(1, 3).unwrap_err().to_string();
        assert!(e.contains("earliest step it can join at is 4"), "{e}");
        c.join(1, 5).unwrap();
        let mut a = Clocks::<()>::with_joiners(Mode::Async, 2, &[1]).unwrap();
        a.push(0, 0, ()).unwrap();
        a.join(1, 0).unwrap();
        assert_eq!(a.push(1, 0, ()).unwrap().len(), 1, "async: released on arrival");
    }

    #[test]
    fn a_sync_step_no_trainer_takes_part_in_is_skipped_once_one_joins_later() {
        let mut c = Clocks::with_joiners(Mode::Sync, 3, &[2]).unwrap();
        c.push(0, 0, "a0").unwrap();
        assert_eq!(c.push(1, 0, "b0").unwrap().len(), 1);
        assert!(c.leave(0).unwrap().is_empty() && c.leave(1).unwrap().is_empty());
        assert_eq!(c.applied(), 1, "nobody takes part in step 1 yet: the server waits (one may join at it)");
        assert!(c.join(2, 4).unwrap().is_empty(), "steps 1, 2 and 3 are skipped: no update");
        assert_eq!(c.applied(), 4);
        assert!(c.pull_ready(2), "the joiner does not wait for the empty steps");
        assert_eq!(c.push(2, 4, "c4").unwrap(), vec![vec![(2, 4, "c4")]]);
        // A joiner ahead does not skip a step that someone still takes part in.
        let mut d = Clocks::with_joiners(Mode::Sync, 2, &[1]).unwrap();
        d.join(1, 3).unwrap();
        d.push(0, 0, "a0").unwrap();
        assert!(d.leave(0).unwrap().is_empty());
        assert_eq!(d.applied(), 3, "step 0 applied, steps 1 and 2 skipped when trainer 0 left");
    }

    #[test]
    fn async_trainers_resume_past_lost_steps_and_sync_ones_cannot() {
        let mut c = Clocks::new(Mode::Ssp { staleness: 1 }, 2);
        c.push(0, 0, ()).unwrap();
        assert_eq!(c.resume(0, 4).unwrap(), 3, "steps 1, 2, 3 were lost");
        assert_eq!(c.clock(0), 4);
        assert_eq!(c.resume(0, 2).unwrap(), 0, "never backwards");
        assert!(!c.pull_ready(0), "trainer 1 is now 4 steps behind");
        let mut s = Clocks::<()>::new(Mode::Sync, 1);
        assert!(s.resume(0, 3).unwrap_err().to_string().contains("push steps 0..3 again"));
    }

    #[test]
    fn pushes_out_of_turn_or_from_strangers_are_errors() {
        let mut c = Clocks::new(Mode::Async, 2);
        assert_eq!(c.push(0, 0, ()).unwrap().len(), 1);
        let e = c.push(0, 0, ()).unwrap_err().to_string();
        assert!(e.contains("pushed step 0") && e.contains("next step here is 1"), "{e}");
        let e = c.push(5, 0, ()).unwrap_err().to_string();
        assert!(e.contains("trainer 5 is not in this job of 2"), "{e}");
        c.leave(1).unwrap();
        assert!(c.push(1, 0, ()).unwrap_err().to_string().contains("left"));
        assert_eq!(c.leave(1).unwrap(), Vec::<Batch<()>>::new(), "leaving again is a no-op");
        assert!(c.leave(5).unwrap_err().to_string().contains("trainer 5 is not in this job"));
    }

    #[test]
    fn a_staged_push_counts_only_once_committed_and_can_be_undone() {
        let mut c = Clocks::new(Mode::Sync, 2);
        c.stage(0, 0, "a0").unwrap();
        c.push(1, 0, "b0").unwrap();
        assert_eq!((c.clock(0), c.staged(0), c.applied()), (0, Some(0), 0), "staged: not counted");
        assert!(!c.pull_ready(1), "trainer 1 waits for trainer 0's step 0");
        c.stage(0, 0, "a0'").unwrap();
        c.abort(0, 0).unwrap();
        assert_eq!(c.staged(0), None, "undone");
        let e = c.commit(0, 0).unwrap_err().to_string();
        assert!(e.contains("commits step 0, but it has nothing staged"), "{e}");
        c.stage(0, 0, "a0''").unwrap();
        assert_eq!(c.commit(0, 0).unwrap(), vec![vec![(0, 0, "a0''"), (1, 0, "b0")]], "the last staged copy");
        assert_eq!(c.commit(0, 0).unwrap(), Vec::<Batch<&str>>::new(), "committing again is a no-op");
        assert!(c.stage(0, 0, "x").unwrap_err().to_string().contains("next step here is 1"));
        c.stage(0, 1, "a1").unwrap();
        c.leave(0).unwrap();
        assert_eq!(c.staged(0), None, "a trainer leaving drops what it staged");
    }

    #[test]
    fn ssp_lets_a_trainer_run_k_steps_ahead_and_no_further() {
        let mut c = Clocks::new(Mode::Ssp { staleness: 2 }, 2);
        for s in 0..2 {
            assert_eq!(c.push(0, s, s).unwrap().len(), 1, "applied on arrival");
            assert!(c.pull_ready(0), "clock {} is within 2 of 0", s + 1);
        }
        c.push(0, 2, 2).unwrap();
        assert!(!c.pull_ready(0), "clock 3 is 3 ahead of trainer 1");
        assert_eq!(c.holding_back(0), vec![1]);
        c.push(1, 0, 0).unwrap();
        assert!(c.pull_ready(0));
        c.leave(1).unwrap();
        c.push(0, 3, 3).unwrap();
        assert!(c.pull_ready(0), "a trainer that left holds nobody back");
    }

    /// Drives `trainers` trainers of `steps` steps each (pull, then push) in the order
    /// `schedule` picks (then round robin), checking at every answered pull that it sees
    /// every push of a step more than `bound` behind its clock. Returns the released batches.
    fn drive(
        mode: Mode,
        trainers: u32,
        steps: u64,
        schedule: &[u8],
        leave_at: Option<(u32, u64)>,
    ) -> Vec<Batch<(u32, u64)>> {
        let mut c = Clocks::new(mode, trainers);
        let mut released: Vec<Batch<(u32, u64)>> = Vec::new();
        let mut applied = vec![0u64; trainers as usize]; // pushes of each trainer applied
        let mut pulled = vec![false; trainers as usize];
        let mut done = vec![false; trainers as usize];
        let bound = match mode {
            Mode::Sync => Some(0),
            Mode::Ssp { staleness } => Some(staleness),
            Mode::Async => None,
        };
        let mut picks = schedule.iter().map(|&p| p as u32 % trainers).chain((0..).map(|i| i % trainers));
        let mut idle = 0;
        while done.iter().any(|d| !d) {
            let t = picks.next().unwrap();
            let ti = t as usize;
            if done[ti] {
                continue;
            }
            let clock = c.clock(t);
            let mut batches = Vec::new();
            if leave_at == Some((t, clock)) {
                batches = c.leave(t).unwrap();
                done[ti] = true;
            } else if !pulled[ti] {
                if c.pull_ready(t) {
                    if let Some(k) = bound {
                        for (u, &a) in applied.iter().enumerate() {
                            // Every push of a step below clock - k that trainer u made is applied.
                            let made = c.clock(u as u32);
                            assert_fresh(a >= made.min(clock.saturating_sub(k)), t, u, a, clock);
                        }
                    }
                    pulled[ti] = true;
                } else {
                    idle += 1;
                    assert!(idle < 100_000, "no trainer can progress: deadlock");
                    continue;
                }
            } else {
                batches = c.push(t, clock, (t, clock)).unwrap();
                pulled[ti] = false;
                done[ti] = clock + 1 == steps;
            }
            idle = 0;
            for b in batches {
                for (u, s, payload) in &b {
                    assert_eq!((*u, *s), *payload);
                    assert_eq!(applied[*u as usize], *s, "trainer {u}'s pushes are applied in order");
                    applied[*u as usize] += 1;
                }
                released.push(b);
            }
        }
        assert_eq!(applied, (0..trainers).map(|t| c.clock(t)).collect::<Vec<_>>(), "every push is applied");
        released
    }

    fn assert_fresh(ok: bool, t: u32, u: usize, applied: u64, clock: u64) {
        assert!(ok, "trainer {t} at clock {clock} read parameters missing trainer {u}'s push {applied}");
    }

    proptest! {
        #[test]
        fn sync_batches_never_depend_on_arrival_order(
            trainers in 1u32..6, steps in 1u64..8,
            schedule in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let got = drive(Mode::Sync, trainers, steps, &schedule, None);
            let want: Vec<Batch<(u32, u64)>> =
                (0..steps).map(|s| (0..trainers).map(|t| (t, s, (t, s))).collect()).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn no_trainer_ever_reads_parameters_more_than_k_steps_old(
            trainers in 1u32..6, steps in 1u64..10, k in 0u64..4,
            schedule in proptest::collection::vec(any::<u8>(), 0..300),
            leave in proptest::option::of((0u32..6, 0u64..10)),
        ) {
            drive(Mode::Ssp { staleness: k }, trainers, steps, &schedule, leave);
        }

        #[test]
        fn a_trainer_leaving_never_blocks_the_others(
            trainers in 2u32..6, steps in 1u64..8, leaver in 0u32..6, at in 0u64..8,
            schedule in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let leaver = leaver % trainers;
            let got = drive(Mode::Sync, trainers, steps, &schedule, Some((leaver, at % steps)));
            // Each step holds the pushes of the trainers that made it, in trainer order.
            for (s, b) in got.iter().enumerate() {
                let ids: Vec<u32> = b.iter().map(|x| x.0).collect();
                let mut sorted = ids.clone();
                sorted.sort();
                prop_assert_eq!(&ids, &sorted);
                prop_assert!(b.iter().all(|x| x.1 == s as u64));
            }
            drive(Mode::Async, trainers, steps, &schedule, Some((leaver, at % steps)));
        }
    }
}

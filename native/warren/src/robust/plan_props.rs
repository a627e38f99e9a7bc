//! Property tests of recovery planning, without sockets: a simulated job of `n` workers, each
//! with a real [`RecoveryState`], runs its calls (bootstrap calls, checkpoint load, then per
//! interval ordinary calls and a two-phase checkpoint); bursts of SIGKILL-like losses reset
//! workers at random moments (in a call that some survivors already finished, or in the middle
//! of a recovery round); recovery is then driven by [`plan`] alone, carrying transfers out
//! between the simulated states. Checked:
//! - every loss that leaves a copy of everything yields plans that end in running the call:
//!   up to `WARREN_LOCAL_REPLICAS` losses between two completed recoveries;
//! - when the call runs, replication is whole again: every local model (committed, and of a
//!   checkpoint in progress) is held by its owner and all its replicas, with the right bytes;
//! - every transfer comes from a worker that holds the item, with the bytes the item had;
//! - a loss of a model and all its replicas fails on every worker, naming the lost ranks.

use proptest::prelude::*;

use super::*;
use crate::collective::header::{CallHeader, CallKind, Numbering};
use crate::membership::{Placed, Placement};
use crate::reduce::{DataType, Op};

/// What a simulated worker's program does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pc {
    Boot(u32),
    Load,
    /// Call `seq` of interval `version`: `0..calls` ordinary, `calls` prepare, `calls + 1` ack.
    Call(u32, u32),
}

struct Job {
    placement: Placement,
    boots: u32,
    calls: u32,
    /// Whether every worker checkpoints a local model; without, nobody does.
    locals: bool,
}

/// The bytes every worker computes, so that any served byte can be checked.
fn global(version: u32) -> Vec<u8> {
    vec![version as u8; 3]
}
/// The local model of `owner` at `version`: empty (none) for every third rank, so that
/// models known to be empty are exercised too.
fn local(owner: usize, version: u32) -> Vec<u8> {
    if owner % 3 == 2 { vec![] } else { vec![owner as u8, version as u8, 7] }
}
fn result(version: u32, seq: u32) -> Vec<u8> {
    vec![version as u8, seq as u8, 1, 2]
}
fn boot_result(i: u32) -> Vec<u8> {
    vec![i as u8; 8]
}
fn key(i: u32) -> BootstrapKey {
    BootstrapKey::new("sim.rs:1:1", i)
}

impl Job {
    fn local(&self, owner: usize, version: u32) -> Vec<u8> {
        if self.locals { local(owner, version) } else { vec![] }
    }

    fn first_pc(&self) -> Pc {
        if self.boots > 0 { Pc::Boot(0) } else { Pc::Load }
    }

    /// The want, key and declared header of the call at `pc` for a worker at `point`.
    fn call(&self, pc: Pc, point: Point) -> (Want, Option<BootstrapKey>, CallHeader) {
        let header = |seq: u64, numbering, kind, count| CallHeader {
            seq,
            numbering,
            kind,
            dtype: DataType::U8,
            op: Op::Sum,
            elem_size: 1,
            root: 0,
            count,
            tag: 0,
        };
        let at = ((point.0 as u64) << 32) | point.1 as u64;
        match pc {
            Pc::Boot(i) => {
                (Want::Bootstrap, Some(key(i)), header(key(i).hash, Numbering::Bootstrap, CallKind::AllreduceTree, 8))
            }
            Pc::Load => (Want::LoadCheckpoint, None, header(at, Numbering::Checkpointed, CallKind::Checkpoint, 0)),
            Pc::Call(_, s) if s < self.calls => {
                (Want::Execute, None, header(at, Numbering::Checkpointed, CallKind::AllreduceTree, 4))
            }
            Pc::Call(v, s) if s == self.calls => {
                (Want::Checkpoint, None, header(at, Numbering::Checkpointed, CallKind::Checkpoint, 3 + v as u64))
            }
            Pc::Call(..) => (Want::Checkpoint, None, header(at, Numbering::Checkpointed, CallKind::CheckpointAck, 0)),
        }
    }
}

struct Worker {
    rank: usize,
    st: RecoveryState,
    pc: Pc,
}

impl Worker {
    fn fresh(rank: usize, job: &Job) -> Worker {
        Worker { rank, st: RecoveryState::new(rank, job.placement.clone()), pc: job.first_pc() }
    }

    fn proposal(&self, job: &Job) -> Proposal {
        let (want, key, call) = job.call(self.pc, self.st.point());
        if let Pc::Call(v, s) = self.pc {
            assert_eq!(self.st.point(), (v, s), "rank {}: the program and the state agree", self.rank);
        }
        self.st.proposal(want, key.as_ref(), call)
    }

    /// The call at `pc` ended with `data` (run for real, or served): record it and move on.
    /// `replicas` are what a prepare phase delivered (`None`: it was served).
    fn finish(&mut self, job: &Job, data: Vec<u8>, ran: Option<Prepared>) {
        let (_, key, call) = job.call(self.pc, self.st.point());
        self.pc = match self.pc {
            Pc::Boot(i) => {
                self.st.record(call, key.as_ref(), &data).unwrap();
                if i + 1 < job.boots { Pc::Boot(i + 1) } else { Pc::Load }
            }
            Pc::Load => Pc::Call(self.st.version(), 0),
            Pc::Call(v, s) if s < job.calls + 1 => {
                self.st.record(call, None, &data).unwrap();
                if s == job.calls {
                    let mine = job.local(self.rank, v + 1);
                    self.st.prepared((!mine.is_empty()).then_some(mine), ran);
                }
                Pc::Call(v, s + 1)
            }
            Pc::Call(v, _) => {
                self.st.record(call, None, &data).unwrap();
                self.st.commit(&global(v + 1));
                Pc::Call(v + 1, 0)
            }
        };
    }
}

/// Runs the call every worker in `who` is at, as the collective would (everyone must be at
/// the same call).
fn run_call(job: &Job, ws: &mut [Worker], who: &[usize]) {
    let pc = ws[who[0]].pc;
    for &w in who {
        assert_eq!(ws[w].pc, pc, "run together");
        let (data, replicas) = match pc {
            Pc::Boot(i) => (boot_result(i), None),
            Pc::Load => (vec![], None),
            Pc::Call(v, s) if s < job.calls => (result(v, s), None),
            Pc::Call(v, s) if s == job.calls => {
                let kept = job.placement.local_models_kept_by(w);
                let replicas = kept.into_iter().map(|o| (o, job.local(o, v + 1))).collect();
                let sizes = (0..ws.len()).map(|o| job.local(o, v + 1).len() as u64).collect();
                (vec![], Some(Prepared { replicas, sizes }))
            }
            Pc::Call(..) => (vec![], None),
        };
        ws[w].finish(job, data, replicas);
    }
}

/// What a recovery ended with.
#[derive(Debug)]
enum Ended {
    Ran,
    Failed(Failure),
}

/// The bytes `item` must have, for checking transfers (a checkpoint's phases return none).
fn expected(job: &Job, item: &Item) -> Vec<u8> {
    match *item {
        Item::Checkpoint { version } => global(version),
        Item::LocalModel { owner, version } => job.local(owner, version),
        Item::Result { point: (_, s) } if s >= job.calls => vec![],
        Item::Result { point } => result(point.0, point.1),
        Item::Bootstrap { key: hash } => {
            let i = (0..16).find(|&i| key(i).hash == hash).expect("a simulated key");
            boot_result(i)
        }
    }
}

/// One recovery round: proposals, plan (asking for holdings at most once), then the plan
/// carried out. With `cut`, the round breaks (a loss in the middle of it): each receiver then
/// applies everything it was sent or nothing, as `cut` says.
fn round(job: &Job, ws: &mut [Worker], cut: Option<&dyn Fn(usize) -> bool>) -> Option<Ended> {
    let props: Vec<Proposal> = ws.iter().map(|w| w.proposal(job)).collect();
    let mut held = Holdings::none();
    let mut asked = false;
    let planned = loop {
        match plan(&props, &held, &job.placement) {
            Plan::Ask(items) => {
                assert!(!asked, "holdings are asked for once per round");
                asked = true;
                let answers = ws.iter().map(|w| answer(&items, |i| w.st.holds(i))).collect();
                held = Holdings::new(items, answers);
            }
            p => break p,
        }
    };
    match planned {
        Plan::Execute if cut.is_none() => {
            check_whole(job, ws);
            let all: Vec<usize> = (0..ws.len()).collect();
            run_call(job, ws, &all);
            Some(Ended::Ran)
        }
        Plan::Fail(f) => Some(Ended::Failed(f)),
        Plan::Execute | Plan::Ask(_) => None,
        Plan::Commit { to } => {
            for w in to.into_iter().filter(|&w| cut.is_none_or(|c| c(w))) {
                let Pc::Call(v, s) = ws[w].pc else { panic!("rank {w} commits outside a checkpoint") };
                assert_eq!(s, job.calls + 1, "rank {w} commits from the ack");
                ws[w].finish(job, vec![], None);
                assert_eq!(ws[w].st.version(), v + 1);
            }
            None
        }
        Plan::StartFresh { to } => {
            for w in to.into_iter().filter(|&w| cut.is_none_or(|c| c(w))) {
                assert_eq!(ws[w].pc, Pc::Load);
                ws[w].finish(job, vec![], None);
            }
            None
        }
        Plan::Release => panic!("no worker of this model serves joiners (Want::Serve)"),
        Plan::Move(transfers) => {
            assert!(!transfers.is_empty(), "a move moves something");
            carry_out(job, ws, &props, &transfers, cut);
            None
        }
    }
}

/// Carries out transfers: checks each comes from a holder with the right bytes, then each
/// receiver takes in everything it was sent (or, in a broken round, all or nothing).
fn carry_out(
    job: &Job,
    ws: &mut [Worker],
    props: &[Proposal],
    transfers: &[Transfer],
    cut: Option<&dyn Fn(usize) -> bool>,
) {
    let mut inbox: Vec<Vec<(Item, Vec<u8>)>> = ws.iter().map(|_| Vec::new()).collect();
    for t in transfers {
        assert!(ws[t.from].st.holds(&t.item), "rank {} does not hold {:?}", t.from, t.item);
        let mut data = ws[t.from].st.payload(&t.item).expect("a holder has the bytes");
        if matches!(t.item, Item::Result { .. } | Item::Bootstrap { .. }) {
            data = check_served(data, t.from, props, &t.to, "a result").expect("requesters asked for that call");
        }
        assert_eq!(data, expected(job, &t.item), "{:?} from rank {}", t.item, t.from);
        for &w in &t.to {
            inbox[w].push((t.item, data.clone()));
        }
    }
    for (w, items) in inbox.into_iter().enumerate() {
        if items.is_empty() || cut.is_some_and(|c| !c(w)) {
            continue;
        }
        let mut answered = None;
        let mut loaded = false;
        for (item, data) in items {
            match ws[w].st.take(&item, data).unwrap() {
                Taken::Loaded => loaded = true,
                Taken::Answer(d) => answered = Some(d),
                Taken::Kept => {}
            }
        }
        if loaded {
            assert_eq!(ws[w].pc, Pc::Load);
            ws[w].finish(job, vec![], None);
        }
        if let Some(d) = answered {
            ws[w].finish(job, d, None);
        }
    }
}

/// Replication is whole: every local model of the version each worker stands at (and of a
/// checkpoint in progress) is held by its owner and every replica, with the right bytes.
fn check_whole(job: &Job, ws: &[Worker]) {
    for w in ws {
        assert_eq!(w.st.owed(), None, "rank {} lacks replicas when the call runs", w.rank);
        let Pc::Call(v, s) = w.pc else { continue };
        let mut versions = vec![v];
        if s == job.calls + 1 {
            versions.push(v + 1);
        }
        for version in versions.into_iter().filter(|&v| v > 0) {
            for owner in std::iter::once(w.rank).chain(w.st.kept().iter().copied()) {
                let item = Item::LocalModel { owner, version };
                assert_eq!(w.st.payload(&item), Some(job.local(owner, version)), "rank {} {item:?}", w.rank);
            }
        }
    }
}

/// Drives recovery until the call runs or it fails; `losses` are further losses to inject
/// at the given rounds (victims, and which receivers applied that broken round).
fn recover(job: &Job, ws: &mut [Worker], mut losses: Vec<(usize, Vec<usize>, u64)>) -> Ended {
    for r in 0..2000 {
        if let Some(i) = losses.iter().position(|(at, ..)| *at == r) {
            let (_, victims, mask) = losses.remove(i);
            let applied = move |w: usize| mask >> (w % 64) & 1 == 1;
            if let Some(Ended::Failed(f)) = round(job, ws, Some(&applied)) {
                return Ended::Failed(f);
            }
            for v in victims {
                ws[v] = Worker::fresh(v, job);
            }
            continue;
        }
        if let Some(end) = round(job, ws, None) {
            return end;
        }
    }
    panic!("recovery did not end within 2000 rounds");
}

/// Advances the failure-free job by `calls` calls (everyone together).
fn run_for(job: &Job, ws: &mut [Worker], calls: usize) {
    let all: Vec<usize> = (0..ws.len()).collect();
    for _ in 0..calls {
        run_call(job, ws, &all);
    }
}

/// A loss at the current call: `done` survivors finished the call already; victims restart.
fn lose(job: &Job, ws: &mut [Worker], victims: &[usize], done: u64) {
    let finished: Vec<usize> = (0..ws.len()).filter(|w| !victims.contains(w) && done >> (w % 64) & 1 == 1).collect();
    if !finished.is_empty() && !matches!(ws[finished[0]].pc, Pc::Load) {
        run_call(job, ws, &finished);
    }
    for &v in victims {
        ws[v] = Worker::fresh(v, job);
    }
}

/// A burst: some calls of normal running, then victims lost in a call (some survivors done
/// with it), and further victims lost in the middle of the recovery's rounds.
#[derive(Debug, Clone)]
struct Burst {
    calls_before: usize,
    victims: Vec<usize>,
    done: u64,
    /// (round, victims, receivers that applied that round)
    during: Vec<(usize, Vec<usize>, u64)>,
}

fn job_and_bursts() -> impl Strategy<Value = (usize, usize, u32, u32, Vec<Burst>)> {
    (2usize..9, 1usize..4, 0u32..3, 1u32..4).prop_flat_map(|(n, copies, boots, calls)| {
        let copies = copies.min(n - 1);
        let burst = (0usize..40, proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=copies), any::<u64>())
            .prop_flat_map(move |(calls_before, victims, done)| {
                let room = copies - victims.len();
                let during = proptest::collection::vec(
                    (0usize..12, proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 0..=room), any::<u64>()),
                    0..=1,
                )
                .prop_map(move |d| d.into_iter().filter(|(_, v, _)| v.len() <= room).collect::<Vec<_>>());
                (Just(calls_before), Just(victims), Just(done), during)
            })
            .prop_map(|(calls_before, victims, done, during)| Burst { calls_before, victims, done, during });
        (Just(n), Just(copies), Just(boots), Just(calls), proptest::collection::vec(burst, 1..4))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Up to `copies` losses between two completed recoveries (in a call some survivors
    /// finished, and during the recovery itself) always recover, with replication whole and
    /// every byte right.
    #[test]
    fn losses_that_leave_a_copy_of_everything_recover((n, copies, boots, calls, bursts) in job_and_bursts()) {
        let job = Job { placement: Placement::new(n, 0, copies), boots, calls, locals: true };
        let mut ws: Vec<Worker> = (0..n).map(|r| Worker::fresh(r, &job)).collect();
        for b in bursts {
            run_for(&job, &mut ws, b.calls_before);
            lose(&job, &mut ws, &b.victims, b.done);
            let during: Vec<usize> = b.during.iter().flat_map(|(_, v, _)| v.clone()).collect();
            prop_assume!(during.iter().all(|v| !b.victims.contains(v)));
            match recover(&job, &mut ws, b.during.clone()) {
                Ended::Ran => {}
                Ended::Failed(f) => prop_assert!(false, "{b:?}: {f:?}"),
            }
        }
    }

    /// Losing a (non-empty) local model with every replica of it fails on every worker,
    /// naming them.
    #[test]
    fn losing_every_copy_of_a_model_fails_naming_the_lost(n in 3usize..9, copies in 1usize..3, first in 0usize..8, extra in 0usize..12) {
        let copies = copies.min(n - 2);
        let job = Job { placement: Placement::new(n, 0, copies), boots: 1, calls: 2, locals: true };
        let mut ws: Vec<Worker> = (0..n).map(|r| Worker::fresh(r, &job)).collect();
        // Past the first checkpoint, so that local models exist.
        run_for(&job, &mut ws, 2 + (job.calls as usize + 2) + extra);
        let owner = [0, 1, 3, 4, 6, 7].into_iter().filter(|&o| o < n).nth(first % 2).unwrap(); // with a model
        let victims: Vec<usize> = std::iter::once(owner).chain(job.placement.holders(Placed::LocalModel(owner))).collect();
        lose(&job, &mut ws, &victims, 0);
        match recover(&job, &mut ws, vec![]) {
            Ended::Failed(Failure::Impossible { mut lost, reason }) => {
                lost.sort_unstable();
                let mut want = victims.clone();
                want.sort_unstable();
                prop_assert_eq!(lost, want, "{}", reason);
                prop_assert!(reason.contains(&format!("local model of rank {owner}")), "{}", reason);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }

    /// Workers on hosts of equal size, placed in task order (a host runs consecutive ranks):
    /// losing every worker of `min(copies, hosts - 1)` hosts at once recovers, the replicas
    /// being spread over the hosts.
    #[test]
    fn losing_whole_hosts_recovers(
        hosts in 2usize..5, per_host in 1usize..4, copies in 1usize..3, first in 0usize..4, calls_before in 0usize..30,
    ) {
        let n = hosts * per_host;
        let ids: Vec<String> = (0..n).map(|r| format!("h{}", r / per_host)).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let job = Job { placement: Placement::on_hosts(&ids, 0, copies), boots: 1, calls: 2, locals: true };
        let mut ws: Vec<Worker> = (0..n).map(|r| Worker::fresh(r, &job)).collect();
        run_for(&job, &mut ws, calls_before);
        let lost: Vec<usize> = (0..copies.min(hosts - 1)).map(|i| (first + i) % hosts).collect();
        let victims: Vec<usize> = (0..n).filter(|r| lost.contains(&(r / per_host))).collect();
        lose(&job, &mut ws, &victims, 0);
        match recover(&job, &mut ws, vec![]) {
            Ended::Ran => {}
            Ended::Failed(f) => prop_assert!(false, "hosts {lost:?} (ranks {victims:?}) of {ids:?}: {f:?}"),
        }
    }

    /// Without local models (and so without replicas of them), a loss is recovered from what
    /// every worker knows: that the lost worker's model is empty.
    #[test]
    fn without_local_models_no_replicas_are_needed(n in 2usize..7, victim in 0usize..7, calls_before in 0usize..30) {
        let job = Job { placement: Placement::new(n, 0, 0), boots: 1, calls: 2, locals: false };
        let mut ws: Vec<Worker> = (0..n).map(|r| Worker::fresh(r, &job)).collect();
        run_for(&job, &mut ws, calls_before);
        lose(&job, &mut ws, &[victim % n], 0);
        match recover(&job, &mut ws, vec![]) {
            Ended::Ran => {}
            Ended::Failed(f) => prop_assert!(false, "{f:?}"),
        }
    }
}

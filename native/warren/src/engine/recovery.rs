//! One recovery round, carried out: every worker's proposal is gathered on every worker,
//! [`robust::plan`] says what happens next (asking who holds what first if the plan depends
//! on it), and the plan's transfers are carried out. No decision is taken here.

use log::{debug, info};

use super::{Communicator, LOG};
use crate::collective;
use crate::collective::header::{COUNT_UNKNOWN, CallHeader, CallKind, Numbering};
use crate::error::{Error, Result};
use crate::reduce::{self, DataType, Op};
use crate::robust::{self, BootstrapKey, Failure, Holdings, Item, Plan, Proposal, Taken, Transfer, Want, check_served};

/// How a recovery round ended for this worker.
pub(super) enum Round {
    /// Everyone is at this call: run it.
    Execute,
    /// This worker was served the call's result.
    Served(Vec<u8>),
    /// This worker loaded the checkpoint.
    Loaded,
    /// This worker committed the checkpoint it was in.
    Committed,
    /// Other workers moved on; propose again.
    Continue,
    /// This worker, serving joiners ([`Want::Serve`]), is done: it goes on.
    Released,
}

impl Communicator {
    /// One recovery round for the call `hdr` this worker is making (see [`crate::robust`]).
    pub(super) fn recovery_round(&mut self, hdr: &CallHeader, want: Want, key: Option<&BootstrapKey>) -> Result<Round> {
        let me = self.topo.rank;
        let mine = self.rs().state.proposal(want, key, *hdr);
        let props = self.gather_proposals(&mine)?;
        let plan = self.settle(&props)?;
        debug!(target: LOG, "rank {me}: recovery plan {plan:?}");
        match plan {
            Plan::Execute => Ok(Round::Execute),
            Plan::Commit { to } => Ok(if to.contains(&me) { Round::Committed } else { Round::Continue }),
            Plan::StartFresh { to } if to.contains(&me) => {
                self.rs().state.load(0, Vec::new(), None);
                Ok(Round::Loaded)
            }
            Plan::StartFresh { .. } => Ok(Round::Continue),
            Plan::Move(transfers) => self.carry_out(&transfers, &props),
            Plan::Release => Ok(if want == Want::Serve { Round::Released } else { Round::Continue }),
            Plan::Fail(Failure::Mismatch(m)) => Err(Error::Mismatch(m)),
            Plan::Fail(Failure::Impossible { lost, reason }) => {
                Err(Error::RecoveryImpossible { lost: self.view.tasks_of(&lost), reason })
            }
            Plan::Ask(_) => unreachable!("settled plans ask nothing"),
        }
    }

    fn gather_proposals(&mut self, mine: &Proposal) -> Result<Vec<Proposal>> {
        let words = self.gather(&mine.encode())?;
        words
            .iter()
            .enumerate()
            .map(|(r, w)| {
                Proposal::decode(w, r).ok_or_else(|| Error::Protocol(format!("rank {r} sent no recovery proposal")))
            })
            .collect()
    }

    /// Plans; if the plan depends on who holds what, gathers every worker's answer and plans
    /// again with them.
    fn settle(&mut self, props: &[Proposal]) -> Result<Plan> {
        let mut held = Holdings::none();
        for _ in 0..2 {
            let r = self.robust.as_ref().expect("robust mode");
            match robust::plan(props, &held, r.state.placement()) {
                Plan::Ask(items) => {
                    let mine = robust::answer(&items, |i| r.state.holds(i));
                    held = Holdings::new(items, self.gather(&mine)?);
                }
                plan => return Ok(plan),
            }
        }
        Err(Error::Protocol("recovery planning asked for holdings twice".into()))
    }

    /// Carries out transfers. What this worker receives is taken in only once every transfer
    /// went through, so a round broken half-way leaves it as it was.
    fn carry_out(&mut self, transfers: &[Transfer], props: &[Proposal]) -> Result<Round> {
        let me = self.topo.rank;
        let mut inbox = Vec::new();
        for t in transfers {
            let mut data = match t.from == me {
                true => self.rs().state.lend(&t.item).ok_or_else(|| {
                    Error::Protocol(format!("rank {me} was to send {:?} but does not hold it", t.item))
                })?,
                false => Vec::new(),
            };
            // A call's result reaches every worker, which all check that the requesters asked
            // for that call; checkpoints and local models go only where they are needed.
            let route = match t.item {
                Item::Result { .. } | Item::Bootstrap { .. } => None,
                Item::Checkpoint { .. } | Item::LocalModel { .. } => Some(t.to.as_slice()),
            };
            let served = self.serve(t.from, route, &mut data);
            if t.from == me && matches!(t.item, Item::Checkpoint { .. }) {
                // The server takes back the checkpoint it lent (sent without a copy).
                self.rs().state.give_back(&t.item, std::mem::take(&mut data));
                served?;
                continue;
            }
            served?;
            if let Item::Result { point: (v, s) } = t.item {
                data = check_served(data, t.from, props, &t.to, &format!("call #{s} of version {v}"))?;
            } else if let Item::Bootstrap { key } = t.item {
                data = check_served(data, t.from, props, &t.to, &format!("bootstrap key {key:#x}"))?;
            }
            if t.to.contains(&me) {
                inbox.push((t.item, data));
            }
        }
        let mut round = Round::Continue;
        for (item, data) in inbox {
            match self.rs().state.take(&item, data)? {
                Taken::Loaded => {
                    info!(target: LOG, "rank {me}: loaded checkpoint version {}", self.rs().state.version());
                    round = Round::Loaded;
                }
                Taken::Answer(d) => round = Round::Served(d),
                Taken::Kept => {}
            }
        }
        Ok(round)
    }

    /// Gathers every worker's `mine` (the same number of words on every worker) on every
    /// worker, in rank order: a small tree allreduce where each worker fills its own slot.
    pub(super) fn gather(&mut self, mine: &[u64]) -> Result<Vec<Vec<u64>>> {
        let (world, w) = (self.topo.world, mine.len());
        let mut all = vec![0u64; world * w];
        all[self.topo.rank * w..][..w].copy_from_slice(mine);
        let hdr = CallHeader {
            seq: 0,
            numbering: Numbering::Count,
            kind: CallKind::Consensus,
            dtype: DataType::U64,
            op: Op::Sum,
            elem_size: 8,
            root: 0,
            count: (world * w * 8) as u64,
            tag: w as u32,
        };
        let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
        self.exec(hdr, |net, topo, scratch| {
            collective::allreduce_tree(net, topo, hdr, bytemuck::cast_slice_mut(&mut all), 8, &reducer, scratch)
                .map(|_| ())
        })?;
        Ok(all.chunks_exact(w).map(<[u64]>::to_vec).collect())
    }

    /// Sends `data` from `server` to every worker (recovery data), or with `to`, only to those
    /// ranks, over the tree edges between them and the server (the other workers agree on
    /// the size and are done).
    fn serve(&mut self, server: usize, to: Option<&[usize]>, data: &mut Vec<u8>) -> Result<()> {
        let count = if self.topo.rank == server { data.len() as u64 } else { COUNT_UNKNOWN };
        let hdr = CallHeader {
            seq: 0,
            numbering: Numbering::Count,
            kind: CallKind::RecoveryData,
            dtype: DataType::U8,
            op: Op::Sum,
            elem_size: 1,
            root: server as u32,
            count,
            tag: 0,
        };
        self.exec(hdr, |net, topo, scratch| {
            let agreed = collective::allreduce_tree(net, topo, hdr, &mut [], 1, &|_, _| {}, scratch)?;
            match to {
                None => {
                    data.resize(agreed.count as usize, 0);
                    collective::broadcast_tree(net, topo, server, data, "recovery data")
                }
                Some(to) if topo.tree_route(server, to).is_some() => {
                    data.resize(agreed.count as usize, 0);
                    collective::broadcast_tree_to(net, topo, server, to, data, "recovery data")
                }
                Some(_) => Ok(()),
            }
        })
    }
}

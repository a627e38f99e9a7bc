//! Checkpoints: committing one in two phases (local models move to the workers that keep
//! their replicas, then an acknowledgement), and loading the latest one.

use std::time::Instant;

use log::info;

use super::recovery::Round;
use super::{Checkpoint, Communicator, LOG, durable, recoverable};
use crate::collective;
use crate::collective::header::{CallHeader, CallKind};
use crate::error::{Error, Result};
use crate::reduce::{self, DataType, Op};
use crate::robust::{Prepared, Replicas, Want};

impl Communicator {
    /// Commits a checkpoint: the global model (the same on every worker) and this worker's
    /// local model. In robust mode both stay in memory (the local model also on
    /// `WARREN_LOCAL_REPLICAS` other workers, on other hosts first: see
    /// [`crate::membership::Placement`]) so that a restarted worker can load them from
    /// the others; with `WARREN_CHECKPOINT_DIR` they are also written to disk. Two phases
    /// (prepare, then acknowledge): a failure in between leaves every worker either before or
    /// after it. In an elastic job the view may change right after the commit: see
    /// [`Communicator::take_view_change`].
    pub fn checkpoint(&mut self, global: &[u8], local: Option<&[u8]>) -> Result<()> {
        if self.robust.is_none() {
            return Err(Error::InvalidArgument("checkpoints need robust mode (WARREN_ROBUST=1)".into()));
        }
        let started = Instant::now();
        let tag = durable::digest32(global);
        let prep = self.header(CallKind::Checkpoint, DataType::U8, Op::Sum, 1, 0, global.len() as u64, tag, None);
        if !self.prepare(prep, local)? {
            let ack = self.header(CallKind::CheckpointAck, DataType::U8, Op::Sum, 1, 0, 0, tag, None);
            self.robust_call(ack, Want::Checkpoint, None, &mut Vec::new(), &mut |c, _: &mut Vec<u8>| {
                c.exec(ack, |net, topo, scratch| {
                    collective::allreduce_tree(net, topo, ack, &mut [], 1, &|_, _| {}, scratch).map(|_| ())
                })
            })?;
        }
        self.rs().state.commit(global);
        let version = self.rs().state.version();
        durable::write_durable(&self.cfg, self.topo.rank, version, global, local)?;
        self.stats.record(CallKind::Checkpoint, started.elapsed());
        if self.elastic {
            self.follow_view().map_err(|e| self.poison(e))?;
        }
        Ok(())
    }

    /// The prepare phase: local models move along the replica ring, each worker receiving those it
    /// keeps replicas of. Returns whether the checkpoint was committed meanwhile (others had
    /// committed it already). A worker served this phase instead of running it has no
    /// replicas of this checkpoint; it gets them in a recovery round before the job goes on.
    fn prepare(&mut self, prep: CallHeader, local: Option<&[u8]>) -> Result<bool> {
        let (me, world) = (self.topo.rank, self.topo.world);
        let kept = self.rs().state.kept().to_vec();
        // The models move along the replica ring, which spreads them over the hosts.
        let (prev, next) = self.rs().state.placement().ring_neighbours(me);
        let mine = local.unwrap_or(&[]);
        let mut received: Option<Prepared> = None;
        let committed =
            self.robust_call(prep, Want::Checkpoint, None, &mut Vec::new(), &mut |c, _: &mut Vec<u8>| {
                c.exec(prep, |net, topo, scratch| {
                    let mut sizes = vec![0u64; world];
                    sizes[me] = mine.len() as u64;
                    let reducer = reduce::typed_reducer::<u64>(Op::Sum)?;
                    let sizes_bytes = bytemuck::cast_slice_mut(&mut sizes);
                    collective::allreduce_tree(net, topo, prep, sizes_bytes, 8, &reducer, scratch)?;
                    // Step j passes on what step j-1 brought: the model of the (j+1)-th
                    // predecessor in the replica ring.
                    let mut replicas = Replicas::new();
                    let mut block = mine.to_vec();
                    for &owner in &kept {
                        let got = collective::ring_shift(
                            net,
                            (prev, next),
                            &block,
                            sizes[owner] as usize,
                            scratch,
                            &prep.describe(),
                        )?;
                        replicas.insert(owner, got.clone());
                        block = got;
                    }
                    received = Some(Prepared { replicas, sizes });
                    Ok(())
                })
            })?;
        self.rs().state.prepared(local.map(<[u8]>::to_vec), received);
        Ok(committed)
    }

    /// The latest checkpoint: version 0 and empty models on a fresh start. A restarted worker
    /// gets the checkpoint from the others (its local model from a worker that kept a replica
    /// of it, and the replicas it keeps itself from their holders); with
    /// `WARREN_CHECKPOINT_DIR` and no live copy (the fail-all strategy), it is read from disk.
    /// After a call failed with [`Error::RolledBack`], it returns the checkpoint the job goes
    /// on from, in the new view.
    pub fn load_checkpoint(&mut self) -> Result<Checkpoint> {
        self.check_failed()?;
        if self.robust.is_none() {
            return Err(Error::InvalidArgument("checkpoints need robust mode (WARREN_ROBUST=1)".into()));
        }
        // After a roll-back, a worker that committed the newest checkpoint stands right after
        // it (its state was rebased there); the others load it in the recovery round.
        let rolled_back = self.rolled_back.take();
        if rolled_back == Some(false) {
            return Ok(self.current_checkpoint());
        }
        let r = self.robust.as_ref().expect("robust mode");
        if !r.consensus && rolled_back.is_none() {
            if r.state.version() == 0 && self.cfg.checkpoint_dir.is_some() {
                return self.load_durable();
            }
            return Ok(self.current_checkpoint());
        }
        let hdr = self.header(CallKind::Checkpoint, DataType::U8, Op::Sum, 1, 0, 0, 0, None);
        loop {
            match self.recovery_round(&hdr, Want::LoadCheckpoint, None) {
                Ok(Round::Loaded) => return Ok(self.current_checkpoint()),
                Ok(_) => continue,
                Err(e) if recoverable(&e) => match self.relink(&e) {
                    // Rolled back meanwhile: load what the roll-back says.
                    Err(Error::RolledBack { .. }) => return self.load_checkpoint(),
                    r => r.map_err(|e| self.poison(e))?,
                },
                Err(e) => return Err(self.poison(e)),
            }
        }
    }

    fn current_checkpoint(&mut self) -> Checkpoint {
        let (version, global, local) = self.rs().state.checkpoint();
        Checkpoint { version, global: global.to_vec(), local: local.map(<[u8]>::to_vec) }
    }

    /// A fresh start with a checkpoint directory (the fail-all strategy): every worker reads
    /// its latest durable checkpoint, and all agree on the newest version every one of them
    /// has (a failure during a checkpoint can leave some one version ahead).
    fn load_durable(&mut self) -> Result<Checkpoint> {
        let me = self.topo.rank;
        let mine = durable::latest_durable(&self.cfg, me)?;
        let all = self.gather(&[mine as u64]).map_err(|e| self.poison(e))?;
        let agreed = all.iter().map(|v| v[0]).min().unwrap_or(0) as u32;
        if agreed == 0 {
            return Ok(Checkpoint::default());
        }
        let c = durable::read_durable(&self.cfg, me, agreed)?.ok_or_else(|| Error::RecoveryImpossible {
            lost: vec![self.cfg.task_id.clone()],
            reason: format!("rank {me} has no durable checkpoint of version {agreed}, which every worker has"),
        })?;
        info!(target: LOG, "rank {me}: loaded durable checkpoint version {agreed}");
        self.rs().state.load(c.version, c.global.clone(), c.local.clone());
        Ok(c)
    }
}

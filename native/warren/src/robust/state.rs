//! What one worker keeps for recovery — its position, the results of the calls since the last
//! checkpoint, the bootstrap cache, the last checkpoint (global model, own local model,
//! replicas of its ring predecessors' local models) and a checkpoint in progress — and how it
//! answers, serves and takes in the items of a [`super::Plan`]. Pure data: the engine moves
//! the bytes.

use std::collections::BTreeMap;

use super::plan::Item;
use super::{BootstrapCache, BootstrapKey, Point, Proposal, ResultBuffer, Want};
use crate::collective::header::{COUNT_UNKNOWN, CallHeader, HEADER_LEN, HeaderMsg, decode_header};
use crate::error::{CallMismatch, Error, Result};
use crate::membership::{Placed, Placement};

/// Local models of other workers, by owner rank.
pub type Replicas = BTreeMap<usize, Vec<u8>>;

/// The local models of one checkpoint as a worker holds them.
#[derive(Debug, Default)]
struct Models {
    /// Its own (`None`: it has none).
    local: Option<Vec<u8>>,
    /// The replicas it keeps.
    replicas: Replicas,
    /// Every worker's model size, if it ran that checkpoint's prepare phase (a model of size
    /// 0 is held by whoever knows it is empty).
    sizes: Option<Vec<u64>>,
}

impl Models {
    /// The local model of `owner` (this worker is `me`), if held.
    fn get(&self, me: usize, owner: usize) -> Option<&[u8]> {
        if owner == me {
            return Some(self.local.as_deref().unwrap_or_default());
        }
        let empty = self.sizes.as_ref().is_some_and(|s| s.get(owner) == Some(&0));
        self.replicas.get(&owner).map(Vec::as_slice).or(empty.then_some(&[][..]))
    }

    /// Whether it has a replica of every model in `kept`.
    fn whole(&self, kept: &[usize]) -> bool {
        kept.iter().all(|o| self.replicas.contains_key(o))
    }
}

/// What a worker took in from a checkpoint's prepare phase it ran.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The replicas of the local models it keeps.
    pub replicas: Replicas,
    /// Every worker's local model size (0: none).
    pub sizes: Vec<u64>,
}

/// What a worker took in from a transfer.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// A checkpoint: the worker now stands right after it.
    Loaded,
    /// The result of the call the worker is making (checked against its declaration).
    Answer(Vec<u8>),
    /// A local model, kept.
    Kept,
}

/// One worker's recovery state.
#[derive(Debug)]
pub struct RecoveryState {
    me: usize,
    placement: Placement,
    /// Owners whose local models this worker keeps replicas of.
    kept: Vec<usize>,
    /// Committed checkpoint version (0: none yet).
    version: u32,
    /// Calls since that checkpoint.
    seq: u32,
    results: ResultBuffer,
    boot: BootstrapCache,
    global: Vec<u8>,
    /// The local models of checkpoint `version`.
    models: Models,
    /// Those of the checkpoint in progress (`version + 1`), from its prepare phase (run, or
    /// served to this worker, which then still lacks the replicas) to its commit.
    pending: Option<Models>,
}

impl RecoveryState {
    /// The fresh state of rank `me`, keeping recovery data where `placement` puts it.
    pub fn new(me: usize, placement: Placement) -> RecoveryState {
        RecoveryState {
            me,
            kept: placement.local_models_kept_by(me),
            placement,
            version: 0,
            seq: 0,
            results: ResultBuffer::default(),
            boot: BootstrapCache::default(),
            global: Vec::new(),
            models: Models::default(),
            pending: None,
        }
    }

    /// Where recovery data lives.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Committed checkpoint version (0 before the first).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The position of the next call.
    pub fn point(&self) -> Point {
        (self.version, self.seq)
    }

    /// The last committed checkpoint: version, global model, own local model.
    pub fn checkpoint(&self) -> (u32, &[u8], Option<&[u8]>) {
        (self.version, &self.global, self.models.local.as_deref())
    }

    /// The owners whose local models this worker keeps, nearest ring predecessor first.
    pub fn kept(&self) -> &[usize] {
        &self.kept
    }

    /// The key of the next bootstrap call from `site`.
    pub fn next_bootstrap_key(&mut self, site: &str) -> BootstrapKey {
        self.boot.next_key(site)
    }

    /// This worker's proposal for a call it is making.
    pub fn proposal(&self, want: Want, key: Option<&BootstrapKey>, call: CallHeader) -> Proposal {
        Proposal { point: self.point(), want, key: key.map_or(0, |k| k.hash), call, owed: self.owed() }
    }

    /// The checkpoint version of replicas this worker should keep but lacks.
    pub fn owed(&self) -> Option<u32> {
        match &self.pending {
            Some(p) if !p.whole(&self.kept) => Some(self.version + 1),
            _ if self.version > 0 && !self.models.whole(&self.kept) => Some(self.version),
            _ => None,
        }
    }

    /// Whether this worker holds `item`.
    pub fn holds(&self, item: &Item) -> bool {
        match *item {
            Item::Checkpoint { version } => version > 0 && version == self.version,
            Item::LocalModel { owner, version } => self.model(owner, version).is_some(),
            Item::Result { point: (v, s) } => v == self.version && self.results.get(s).is_some(),
            Item::Bootstrap { key } => self.boot.get(key).is_some(),
        }
    }

    /// The bytes this worker sends for `item`, if it holds it. Buffered and bootstrap results
    /// travel with their call's header, so that receivers can check they asked for that call.
    pub fn payload(&self, item: &Item) -> Option<Vec<u8>> {
        let with_header = |h: &CallHeader, data: &[u8]| [&h.encode()[..], data].concat();
        match *item {
            Item::Checkpoint { version } => (version > 0 && version == self.version).then(|| self.global.clone()),
            Item::LocalModel { owner, version } => self.model(owner, version).map(<[u8]>::to_vec),
            Item::Result { point: (v, s) } => {
                (v == self.version).then(|| self.results.get(s)).flatten().map(|r| with_header(&r.header, &r.data))
            }
            Item::Bootstrap { key } => self.boot.get(key).map(|(_, h, d)| with_header(h, d)),
        }
    }

    /// Like [`RecoveryState::payload`], but the checkpoint's global model is lent rather than
    /// copied (a model of many MiB is sent without a copy): it must come back through
    /// [`RecoveryState::give_back`] before the state is used again.
    pub fn lend(&mut self, item: &Item) -> Option<Vec<u8>> {
        match *item {
            Item::Checkpoint { version } => {
                (version > 0 && version == self.version).then(|| std::mem::take(&mut self.global))
            }
            _ => self.payload(item),
        }
    }

    /// Takes back the checkpoint [`RecoveryState::lend`] lent for `item` (other items were
    /// copies: nothing to do).
    pub fn give_back(&mut self, item: &Item, data: Vec<u8>) {
        if let Item::Checkpoint { .. } = item {
            self.global = data;
        }
    }

    /// The local models of checkpoint `version`, if this worker holds any.
    fn models(&self, version: u32) -> Option<&Models> {
        match &self.pending {
            Some(p) if version == self.version + 1 => Some(p),
            _ => (version == self.version && version > 0).then_some(&self.models),
        }
    }

    /// The local model of `owner` at `version`, if held: the owner's own (empty if it has
    /// none), a replica, or an empty one where this worker knows the owner has none.
    fn model(&self, owner: usize, version: u32) -> Option<&[u8]> {
        self.models(version)?.get(self.me, owner)
    }

    /// Takes in `item` sent to this worker (the payload of a result already checked with
    /// [`check_served`]).
    pub fn take(&mut self, item: &Item, data: Vec<u8>) -> Result<Taken> {
        match *item {
            Item::Checkpoint { version } => {
                self.load(version, data, None);
                Ok(Taken::Loaded)
            }
            Item::Result { .. } | Item::Bootstrap { .. } => Ok(Taken::Answer(data)),
            Item::LocalModel { owner, version } => {
                let models = match self.pending.as_mut() {
                    Some(p) if version == self.version + 1 && owner != self.me => p,
                    _ if version == self.version => &mut self.models,
                    _ => {
                        return Err(Error::Protocol(format!(
                            "rank {} at version {} was sent the local model of rank {owner} of version {version}",
                            self.me, self.version
                        )));
                    }
                };
                if owner == self.me {
                    models.local = (!data.is_empty()).then_some(data);
                } else {
                    models.replicas.insert(owner, data);
                }
                Ok(Taken::Kept)
            }
        }
    }

    /// Stands right after checkpoint `version` (loaded from others, or from disk), with no
    /// replicas yet.
    pub fn load(&mut self, version: u32, global: Vec<u8>, local: Option<Vec<u8>>) {
        self.version = version;
        self.seq = 0;
        self.results.clear();
        self.global = global;
        self.models = Models { local, ..Models::default() };
        self.pending = None;
    }

    /// Moves this worker to rank `me` of a new view (elastic membership) placed by
    /// `placement`, right after a commit: it keeps its checkpoint, its own local model and its
    /// bootstrap cache, and the replicas it held, renumbered by `new_rank` (those of workers
    /// that left are dropped), so that a loss right after the change is still recovered; the
    /// replicas the new placement gives it are owed until a recovery round brings them.
    pub fn rebase(&mut self, me: usize, placement: Placement, new_rank: impl Fn(usize) -> Option<usize>) {
        self.me = me;
        self.kept = placement.local_models_kept_by(me);
        self.placement = placement;
        let replicas = std::mem::take(&mut self.models.replicas);
        let (version, global, local) = (self.version, std::mem::take(&mut self.global), self.models.local.take());
        self.load(version, global, local);
        self.models.replicas = replicas.into_iter().filter_map(|(old, m)| Some((new_rank(old)?, m))).collect();
    }

    /// Keeps a call's result: in the bootstrap cache by key, or in the result buffer at the
    /// next sequence number (the data only where the placement puts it). A bootstrap key
    /// already cached for a different call is a mismatch.
    pub fn record(&mut self, hdr: CallHeader, key: Option<&BootstrapKey>, data: &[u8]) -> Result<()> {
        match key {
            None => {
                let keep = self.keeps_next();
                self.results.push(self.seq, counted(hdr, data.len()), data, keep);
                self.seq += 1;
                Ok(())
            }
            Some(k) => self.cache(hdr, k, data.to_vec()),
        }
    }

    /// [`RecoveryState::record`] of a result computed into a buffer from
    /// [`RecoveryState::spare`]: kept without a copy.
    pub fn record_owned(&mut self, hdr: CallHeader, key: Option<&BootstrapKey>, data: Vec<u8>) -> Result<()> {
        match key {
            None => {
                let keep = self.keeps_next();
                self.results.push_owned(self.seq, counted(hdr, data.len()), data, keep);
                self.seq += 1;
                Ok(())
            }
            Some(k) => self.cache(hdr, k, data),
        }
    }

    /// [`RecoveryState::record_owned`] of an ordinary call's result that the caller holds
    /// too (a lent result): kept without a copy, shared.
    pub fn record_shared(&mut self, hdr: CallHeader, data: std::sync::Arc<Vec<u8>>) {
        let keep = self.keeps_next();
        self.results.push_shared(self.seq, counted(hdr, data.len()), data, keep);
        self.seq += 1;
    }

    /// A buffer of `len` bytes (contents unspecified) to compute a call's result into, to be
    /// given to [`RecoveryState::record_owned`] or back to [`RecoveryState::recycle`].
    pub fn spare(&mut self, len: usize) -> Vec<u8> {
        self.results.spare(len)
    }

    /// Takes back a buffer from [`RecoveryState::spare`] whose call failed.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.results.recycle(buf);
    }

    /// Whether this worker keeps the result of the next ordinary call.
    pub fn keeps_next(&self) -> bool {
        self.placement.holders(Placed::Result(self.seq)).contains(&self.me)
    }

    fn cache(&mut self, hdr: CallHeader, k: &BootstrapKey, data: Vec<u8>) -> Result<()> {
        let hdr = counted(hdr, data.len());
        self.boot.insert(k, hdr, data).map_err(|[(cached_key, cached), (new_key, new)]| {
            let (first, second) =
                (cached.declaration(self.me, Some(&cached_key)), new.declaration(self.me, Some(&new_key)));
            Error::Mismatch(CallMismatch::new(first, second, "bootstrap key collision"))
        })
    }

    /// A checkpoint's prepare phase is over: this worker's local model for it, and what the
    /// phase delivered (`None` if it was served to this worker: it lacks the replicas, and
    /// says so in its proposals until it gets them).
    pub fn prepared(&mut self, local: Option<Vec<u8>>, ran: Option<Prepared>) {
        let (replicas, sizes) = ran.map_or((Replicas::new(), None), |p| (p.replicas, Some(p.sizes)));
        self.pending = Some(Models { local, replicas, sizes });
    }

    /// Commits the checkpoint in progress with its global model, copied into the buffer of
    /// the previous one (no fresh allocation, so no page faults, for a model of fixed size).
    pub fn commit(&mut self, global: &[u8]) {
        self.models = self.pending.take().unwrap_or_default();
        self.version += 1;
        self.seq = 0;
        self.results.clear();
        self.global.clear();
        self.global.extend_from_slice(global);
    }
}

/// The header to store with a result of `len` bytes: a broadcast receiver, which declared an
/// unknown count, learns the size from the root.
fn counted(mut hdr: CallHeader, len: usize) -> CallHeader {
    if hdr.count == COUNT_UNKNOWN {
        hdr.count = len as u64;
    }
    hdr
}

/// Splits a served result into its stored call header and its bytes, and checks that each
/// requester in `to` asked for that call (run on every worker, so that a mismatch is raised
/// everywhere).
pub fn check_served(
    mut payload: Vec<u8>,
    from: usize,
    props: &[Proposal],
    to: &[usize],
    what: &str,
) -> Result<Vec<u8>> {
    if payload.len() < HEADER_LEN {
        return Err(Error::Protocol(format!("rank {from} served {what} without its header")));
    }
    let HeaderMsg::Proceed(stored) = decode_header(payload[..HEADER_LEN].try_into().unwrap(), from)? else {
        return Err(Error::Protocol(format!("rank {from} served {what} with a malformed header")));
    };
    for &r in to {
        if props[r].call.merge(&stored, r, from).is_err() {
            let replay = props[r].call.declaration(r, None);
            let original = stored.declaration(from, None);
            return Err(Error::Mismatch(CallMismatch::new(replay, original, format!("rank {r} replays {what}"))));
        }
    }
    Ok(payload.split_off(HEADER_LEN))
}

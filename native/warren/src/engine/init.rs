//! Joining a job (registration with the tracker, the membership view, peer links) and
//! re-linking after a lost peer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::{CallStats, Communicator, LOG, Robust, recoverable};
use crate::cancel::CancelHandle;
use crate::collective::Scratch;
use crate::config::Config;
use crate::config::{ReductionOrder, TransportChoice};
use crate::error::{Error, Result};
use crate::hosts::HostLayout;
use crate::liveness::{Heartbeat, Pulse, Watch};
use crate::membership::{Placement, View};
use crate::mock::Point as MockPoint;
use crate::robust::RecoveryState;
use crate::tracker::TrackerClient;
use crate::tracker::proto::{FromTracker, PeerAddr, ToTracker};
use crate::transport::{LinkSetup, PeerListener, ShmSetup, Waiter, connect_peers};

/// What the tracker assigned a registering worker.
pub(super) struct Assigned {
    /// The members of the job.
    pub(super) view: View,
    /// Every member's address, by rank.
    pub(super) peers: Arc<[PeerAddr]>,
    /// Link rounds completed (this one included).
    pub(super) round: u64,
    recovered: bool,
    incarnation: u64,
    peer_timeout: Option<Duration>,
    elastic: bool,
    /// The newest checkpoint version a member of the round committed (the tracker's
    /// [`FromTracker::Assignment`]): where a roll-back goes on from.
    pub(super) version: u32,
}

impl Communicator {
    /// Joins the job described by `cfg`: registers with the tracker (none for a world of
    /// one), gets the membership view (its rank is its task id's place in it), and links to
    /// the neighbours in the tree and the ring. A worker whose task id already had a rank (a
    /// restarted worker) re-joins in recovery: its first calls are served by the others until
    /// it has caught up.
    pub fn init(cfg: Config) -> Result<Communicator> {
        Communicator::init_cancellable(cfg, &CancelHandle::new())
    }

    /// [`Communicator::init`] that `cancel` can end from another thread (it fails with
    /// [`Error::Aborted`]: while waiting for the other workers to register, or to link); the
    /// communicator keeps `cancel` as its [`Communicator::cancel_handle`].
    pub fn init_cancellable(cfg: Config, cancel: &CancelHandle) -> Result<Communicator> {
        Communicator::join(cfg, cancel).map_err(|e| cancel.explain(e))
    }

    fn join(cfg: Config, cancel: &CancelHandle) -> Result<Communicator> {
        cfg.validate()?;
        cancel.check()?;
        let watch = Arc::new(Watch::new(cfg.stall_warn));
        let mut waiter = Waiter::new(cfg.spin, cancel)?;
        waiter.set_watch(watch.clone());
        let Some(uri) = cfg.tracker_uri.clone() else {
            let view = View::solo(&cfg.task_id);
            return Communicator::assemble(cfg, view, &[], waiter, None, None, watch, cancel);
        };
        let deadline = Instant::now() + cfg.connect_timeout;
        let tls = crate::wire::Tls::from_settings(&cfg.tls)?;
        let mut tracker = TrackerClient::connect(&uri, cfg.secret.as_bytes(), tls.as_ref(), deadline, Some(cancel))?;
        cancel.watch_tracker(tracker.socket());
        let host = match &cfg.host {
            Some(h) => h.clone(),
            None => tracker.local_ip()?.to_string(),
        };
        let listener = match cfg.transport {
            TransportChoice::Mem => PeerListener::bind_in_memory()?,
            TransportChoice::Auto | TransportChoice::Tcp => PeerListener::bind(&host)?,
        };
        let a = register(&mut tracker, &cfg, &listener, deadline)?;
        // Beating from now on: the tracker expects heartbeats from the assignment on.
        let heartbeat = start_heartbeat(&cfg, &uri, tls.as_ref(), &a, &watch, cancel)?;
        watch.set_peers(a.peers.clone(), a.round);
        let placed = placed_hosts(&a.peers);
        let mut comm =
            Communicator::assemble(cfg, a.view.clone(), &placed, waiter, Some(tracker), Some(listener), watch, cancel)?;
        comm.heartbeat = heartbeat;
        comm.tls = tls;
        comm.elastic = a.elastic;
        comm.maybe_mock(MockPoint::Linking);
        match comm.install_links(&a.peers, a.round, deadline) {
            Err(e) if recoverable(&e) && comm.robust.is_some() && !cancel.is_cancelled() => match comm.relink(&e) {
                // No call made yet: the rolled-back view is simply the one it starts in.
                Err(Error::RolledBack { .. }) => {}
                r => r?,
            },
            r => r?,
        }
        let rank = comm.topo.rank;
        if a.recovered {
            let task = &comm.cfg.task_id;
            info!(target: LOG, "task {task} re-joined as rank {rank} (round {}); catching up from the other workers", a.round);
            if let Some(r) = comm.robust.as_mut() {
                r.consensus = true;
            }
        }
        debug!(target: LOG, "rank {rank}/{}: linked to {:?}", comm.topo.world, comm.topo.neighbours());
        Ok(comm)
    }

    /// A communicator with no links yet: its rank, topology and recovery placement derive
    /// from `view` and the hosts the ranks were placed on (`placed`, indexed by rank; empty if
    /// unknown).
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        cfg: Config,
        view: View,
        placed: &[&str],
        waiter: Waiter,
        tracker: Option<TrackerClient>,
        listener: Option<PeerListener>,
        watch: Arc<Watch>,
        cancel: &CancelHandle,
    ) -> Result<Communicator> {
        let rank = view.rank_of(&cfg.task_id).ok_or_else(|| {
            Error::Protocol(format!("the tracker's view {:?} does not include task {}", view.members(), cfg.task_id))
        })?;
        cancel.set_rank(rank);
        let topo = view.topology(rank);
        let robust = cfg.robust.then(|| {
            let placement = placement(view.world(), placed, &cfg);
            Robust {
                state: RecoveryState::new(rank, placement),
                consensus: false,
                recoveries: 0,
                boot_calls: 0,
                backup: Vec::new(),
                progress: Vec::new(),
                exit_in_ring: false,
            }
        });
        Ok(Communicator {
            links: (0..topo.world).map(|_| None).collect(),
            hosts: None,
            view,
            topo,
            waiter,
            tracker,
            listener,
            calls: 0,
            failed: None,
            scratch: Scratch::default(),
            stats: CallStats::default(),
            robust,
            tls: None,
            cancel: cancel.clone(),
            watch,
            heartbeat: None,
            elastic: false,
            view_change: None,
            left: false,
            rolled_back: None,
            lent: Default::default(),
            cfg,
        })
    }

    /// Links to the neighbours at `peers`, with the key of link round `round`: a worker left
    /// behind in an earlier round (a fenced one that woke up) cannot link into this one.
    pub(super) fn install_links(&mut self, peers: &[PeerAddr], round: u64, deadline: Instant) -> Result<()> {
        let listener = self.listener.as_ref().expect("a tracker-joined communicator has a listener");
        let me = self.topo.rank;
        let ids: Vec<&str> = peers.iter().map(|p| p.host_id.as_str()).collect();
        // Every rank makes the same layout from where the tracker placed the ranks when the
        // view was made (not where they run now: a replacement on another host must join its
        // peers' calls with their algorithm), whatever the transport of each link.
        // Under the ranks order no call uses the hierarchy: no layout, no links for it.
        self.hosts = match self.cfg.reduction_order {
            ReductionOrder::Hosts => HostLayout::new(&placed_hosts(peers), me),
            ReductionOrder::Ranks => None,
        };
        let dedicated = has_cores(&ids, me);
        self.waiter.set_busy_poll(if dedicated { self.cfg.busy_poll } else { Duration::ZERO });
        // Workers that are threads of this process and outnumber its cores: the peer a spinning
        // thread waits for needs that core (1,024 of them spent most of their time spinning).
        let spin =
            if self.cfg.transport == TransportChoice::Mem && !dedicated { Duration::ZERO } else { self.cfg.spin };
        self.waiter.set_spin(spin);
        let mut neighbours = self.topo.neighbours();
        neighbours.extend(self.hosts.iter().flat_map(|h| h.neighbours(me)));
        // The replica ring's neighbours, for a checkpoint's ring shift of the local models.
        if let Some(r) = self.robust.as_ref().filter(|r| r.state.placement().local_copies() > 0) {
            let (prev, next) = r.state.placement().ring_neighbours(me);
            neighbours.extend([prev, next].into_iter().filter(|&p| p != me));
        }
        neighbours.sort_unstable();
        neighbours.dedup();
        let tracker = &mut self.tracker;
        let cancelled = &self.cancel;
        let mut cancel = || -> Result<()> {
            cancelled.check()?;
            let started = match tracker.as_mut() {
                Some(t) => t.round_started()?,
                None => false,
            };
            if started {
                return Err(Error::RelinkSuperseded(format!(
                    "rank {me}: a worker failed again while the others linked"
                )));
            }
            Ok(())
        };
        let secret = round_secret(&self.cfg.secret, round);
        let host_id = host_id(&self.cfg, &listener.host);
        let shm = (self.cfg.transport == TransportChoice::Auto).then_some(ShmSetup {
            host_id: &host_id,
            ring: self.cfg.shm_ring,
            cma: self.cfg.shm_cma && dedicated,
        });
        let setup = LinkSetup {
            me,
            secret: &secret,
            tls: self.tls.as_ref(),
            deadline,
            socket_buffer: self.cfg.socket_buffer,
            shm,
        };
        let linked = connect_peers(listener, &setup, peers, &neighbours, &mut cancel)?;
        for mut l in linked {
            self.waiter.register(&mut l)?;
            let p = l.peer;
            self.links[p] = Some(l);
        }
        Ok(())
    }

    /// Re-links after a lost peer: closes every link (so the neighbours learn at once), joins
    /// the tracker's re-link round, and links to the new addresses. Retries until
    /// `connect_timeout` if a worker fails again meanwhile. If the round's view lacks members
    /// given up on, rolls back instead ([`Error::RolledBack`]).
    pub(super) fn relink(&mut self, cause: &Error) -> Result<()> {
        let deadline = Instant::now() + self.cfg.connect_timeout;
        warn!(target: LOG, "rank {}: {cause}; re-linking", self.topo.rank);
        loop {
            self.close_links();
            // A fence notice is about the round being left; the next one goes without that peer.
            self.watch.clear_notice();
            self.cancel.check()?;
            let a = self.rejoin(deadline)?;
            if a.view != self.view {
                // Members were given up on (an elastic job's rejoin timeout): roll back.
                return self.roll_back(a, deadline);
            }
            self.watch.set_peers(a.peers.clone(), a.round);
            match self.install_links(&a.peers, a.round, deadline) {
                Ok(()) => {
                    let r = self.robust.as_mut().expect("only robust communicators re-link");
                    r.consensus = true;
                    r.recoveries += 1;
                    info!(target: LOG, "rank {}: re-linked (round {})", self.topo.rank, a.round);
                    return Ok(());
                }
                Err(e) if Instant::now() < deadline && !self.cancel.is_cancelled() => {
                    warn!(target: LOG, "rank {}: re-linking failed ({e}); trying again", self.topo.rank)
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Joins the tracker's re-link round; returns the view and the new addresses once it is
    /// complete.
    pub(super) fn rejoin(&mut self, deadline: Instant) -> Result<Assigned> {
        let port = self.listener.as_ref().map(|l| l.port).unwrap_or(0);
        let host = self.listener.as_ref().map(|l| l.host.clone()).unwrap_or_default();
        let version = self.version();
        let tracker = self.tracker.as_mut().ok_or_else(|| Error::Tracker("no tracker to re-link through".into()))?;
        tracker.send(&ToTracker::Rejoin { host, port, version }, deadline)?;
        let reply = tracker.recv(deadline)?;
        // Rounds announced before our assignment are the one we just joined.
        tracker.take_notifications();
        assigned(reply, "a re-link")
    }
}

/// Registers with the tracker (again while it says the task id is still held by a live
/// worker) and returns the assignment.
fn register(tracker: &mut TrackerClient, cfg: &Config, listener: &PeerListener, deadline: Instant) -> Result<Assigned> {
    let register = ToTracker::Register {
        task_id: cfg.task_id.clone(),
        host: listener.host.clone(),
        port: listener.port,
        attempt: cfg.attempt,
        pid: std::process::id(),
        host_id: host_id(cfg, &listener.host),
    };
    let reply = loop {
        match tracker.request(&register, deadline)? {
            FromTracker::Retry { message } if Instant::now() < deadline => {
                debug!(target: LOG, "task {}: {message}; registering again", cfg.task_id);
                std::thread::sleep(Duration::from_millis(10));
            }
            FromTracker::Retry { message } => return Err(Error::Tracker(message)),
            other => break other,
        }
    };
    let a = assigned(reply, "registration")?;
    tracker.take_notifications();
    // An elastic job's view may be of any size within its limits.
    if !a.elastic && a.view.world() != cfg.num_workers {
        return Err(Error::Config(format!(
            "{} is {} but the tracker runs a job of {} workers",
            crate::config::keys::NUM_WORKERS,
            cfg.num_workers,
            a.view.world()
        )));
    }
    Ok(a)
}

fn assigned(reply: FromTracker, what: &str) -> Result<Assigned> {
    match reply {
        FromTracker::Assignment { view, peers, round, recovered, incarnation, peer_timeout_ms, elastic, version } => {
            Ok(Assigned {
                view: view.into_inner(),
                peers: peers.into_inner().0.into(),
                round,
                recovered,
                incarnation,
                peer_timeout: (peer_timeout_ms > 0).then(|| Duration::from_millis(peer_timeout_ms)),
                elastic,
                version,
            })
        }
        FromTracker::Error { message } => Err(Error::Tracker(message)),
        FromTracker::Left { message } => Err(Error::Left(message)),
        other => Err(Error::Protocol(format!("tracker answered {what} with {other:?}"))),
    }
}

/// Starts the heartbeat thread if the tracker expects heartbeats.
fn start_heartbeat(
    cfg: &Config,
    uri: &str,
    tls: Option<&crate::wire::Tls>,
    a: &Assigned,
    watch: &Arc<Watch>,
    cancel: &CancelHandle,
) -> Result<Option<Heartbeat>> {
    let Some(timeout) = a.peer_timeout else { return Ok(None) };
    let pulse = Pulse {
        uri: uri.to_string(),
        secret: cfg.secret.as_bytes().to_vec(),
        tls: tls.cloned(),
        task_id: cfg.task_id.clone(),
        incarnation: a.incarnation,
        timeout,
        stall_warn: cfg.stall_warn,
    };
    Heartbeat::start(pulse, watch.clone(), cancel.clone()).map(Some)
}

/// The host each rank was placed on when the view was made (indexed by rank): the tracker's
/// [`PeerAddr::placed_on`], else where it runs.
pub(super) fn placed_hosts(peers: &[PeerAddr]) -> Vec<&str> {
    peers.iter().map(|p| if p.placed_on.is_empty() { p.host_id.as_str() } else { p.placed_on.as_str() }).collect()
}

/// Where recovery data lives in a view of `world` ranks placed on the hosts `placed` (by
/// rank; empty if unknown): the replicas spread over the hosts, the same on every member.
pub(super) fn placement(world: usize, placed: &[&str], cfg: &Config) -> Placement {
    if placed.len() == world {
        Placement::on_hosts(placed, cfg.result_replicas, cfg.local_replicas)
    } else {
        Placement::new(world, cfg.result_replicas, cfg.local_replicas)
    }
}

/// Whether this host (the ranks with this rank's host id in `ids`, indexed by rank) runs no
/// more workers than this process may use CPUs. Only then does a waiting rank poll without
/// yielding its core (else it would hold the core that the rank it waits for needs), and do
/// shared-memory links lend (a loan is copied by the receiver alone, while the ring splits
/// the copying between both ends; with more workers than cores the rings were faster here:
/// 16 MiB at N = 4 on 2 cores, 0.75-0.80x Open MPI's vader with loans, 0.81-0.89x without).
fn has_cores(ids: &[&str], me: usize) -> bool {
    let local = ids.iter().filter(|h| ids.get(me) == Some(*h)).count();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    local <= cpus
}

/// This worker's host id: `WARREN_HOST_ID`, else the kernel's boot id (the same for every
/// process on this machine, different on another one or after a reboot) and the host its
/// peers reach it at (so workers on distinct addresses, e.g. 127.0.0.2 and 127.0.0.3, are
/// distinct hosts). Empty if the boot id is unknown: no shared memory then.
fn host_id(cfg: &Config, advertised: &str) -> String {
    if let Some(id) = &cfg.host_id {
        return id.clone();
    }
    match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(boot) => format!("{}@{advertised}", boot.trim()),
        Err(_) => String::new(),
    }
}

/// The key of the peer links of link round `round`: the job secret bound to the round, so
/// that only workers the tracker assigned to this round prove they hold it.
fn round_secret(secret: &str, round: u64) -> Vec<u8> {
    format!("{secret}\nlink round {round}").into_bytes()
}

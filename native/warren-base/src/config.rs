//! Worker settings, from the environment (`WARREN_*`), from a string map (the JVM passes one),
//! or built in code. Every setting has a documented default.

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{Error, Result};
pub mod mock;
mod tls;

pub use tls::TlsSettings;

/// Environment variable / map key names. These are a contract shared with the CLI and the JVM.
pub mod keys {
    /// `host:port` of the tracker. Not needed with one worker: a world of one needs no tracker.
    /// Default: none.
    pub const TRACKER_URI: &str = "WARREN_TRACKER_URI";
    /// Stable identity of this worker: ranks are ordered by task id and stay bound to it. Default:
    /// `0`.
    pub const TASK_ID: &str = "WARREN_TASK_ID";
    /// Number of workers in the job. Default: `1`.
    pub const NUM_WORKERS: &str = "WARREN_NUM_WORKERS";
    /// The job secret, required with a tracker: workers prove it to the tracker and to each other
    /// by HMAC challenge-response, and it never crosses the wire. Default: none.
    pub const JOB_SECRET: &str = "WARREN_JOB_SECRET";
    /// A file holding the job secret, read when `WARREN_JOB_SECRET` is absent (`warren run` and
    /// `warren tracker` print the one they made). Default: none.
    pub const JOB_SECRET_FILE: &str = "WARREN_JOB_SECRET_FILE";
    /// Attempt number of this task, `0` the first time (`warren run` and the Spark and Flink
    /// runners set it). Default: `0`.
    pub const ATTEMPT: &str = "WARREN_ATTEMPT";
    /// Deadline of one collective call, in seconds (decimal allowed). A dead peer is detected at
    /// once; this catches hung ones. Default: `1800`.
    pub const TIMEOUT_S: &str = "WARREN_TIMEOUT_S";
    /// Deadline of joining the job (tracker rendezvous and peer links), in seconds. Default: `300`.
    pub const CONNECT_TIMEOUT_S: &str = "WARREN_CONNECT_TIMEOUT_S";
    /// Payload size in bytes from which allreduce uses the ring instead of the tree. Default:
    /// `262144`.
    pub const RING_THRESHOLD: &str = "WARREN_RING_THRESHOLD";
    /// Bytes of each chunk a ring allreduce reduces and gathers before it moves on to the next
    /// slice of the chunks, so that the slice is still in the CPU cache when its result is gathered
    /// and kept; `0`: whole chunks. The bits are the same either way; every rank must use the same
    /// value (a call with another is refused as a mismatch). Over loopback TCP a 16 MiB allreduce
    /// took about half the time of whole chunks (docs/benchmarks.md, "The ring in slices, and
    /// loopback socket buffers"). Default: `131072`.
    pub const RING_SLICE: &str = "WARREN_RING_SLICE_BYTES";
    /// How long a waiting rank polls its sockets before it blocks in `epoll`, in microseconds.
    /// Default: `50`.
    pub const SPIN_US: &str = "WARREN_SPIN_US";
    /// How much of that spin, in microseconds, polls without yielding the core (used only while the
    /// host runs no more of the job's workers than it has CPUs). Off by default: on a shared 2-core
    /// machine it made the 4-byte allreduce 6-20x slower and burned 16x the CPU
    /// (docs/benchmarks.md, "Busy-polling"). Default: `0`.
    pub const BUSY_POLL_US: &str = "WARREN_BUSY_POLL_US";
    /// Address this worker's peer listener binds to and advertises. Default: the address that
    /// reaches the tracker.
    pub const HOST: &str = "WARREN_HOST";
    /// `SO_SNDBUF` / `SO_RCVBUF` of peer links in bytes, at least 16384. Default: kernel
    /// auto-tuning.
    pub const SOCKET_BUFFER: &str = "WARREN_SOCKET_BUFFER";
    /// The order in which a large allreduce (`WARREN_RING_THRESHOLD` and up) adds the workers'
    /// values. `ranks`: the flat ring, fixed by the ranks alone, so every placement of the job
    /// (which workers share a host, shared memory or TCP) gives the same bits; `hosts`: when
    /// several hosts run several workers each, the hierarchy of hosts (a chain within each host, a
    /// ring across the hosts' leaders), which sends less across hosts but adds in an order fixed by
    /// the host layout, so placements that group the ranks differently may give different bits.
    /// Every rank must use the same value (a call with another is refused as a mismatch). Default:
    /// `ranks`.
    pub const REDUCTION_ORDER: &str = "WARREN_REDUCTION_ORDER";
    /// `auto`: peers with the same host id exchange data through shared memory (rings in
    /// `/dev/shm`; the TCP link stays, for wake-ups and to notice a dead peer), the others over
    /// TCP; `tcp`: TCP to every peer; `mem`: queues in memory, for workers that are threads of
    /// one process (tests and simulations of many workers; every worker of the job must use
    /// it). Default: `auto`.
    pub const TRANSPORT: &str = "WARREN_TRANSPORT";
    /// This worker's host id: workers with the same one are offered shared memory (a peer that
    /// cannot open the segment stays on TCP). The default makes workers on distinct addresses
    /// (127.0.0.2, 127.0.0.3) distinct hosts. Default: the kernel's boot id `@` `WARREN_HOST`.
    pub const HOST_ID: &str = "WARREN_HOST_ID";
    /// Bytes of each shared-memory ring (one per direction and link): a power of two, 4 KiB to 1
    /// GiB. Default: `1048576`.
    pub const SHM_RING: &str = "WARREN_SHM_RING";
    /// `1`: large ring-allgather transfers between workers on one host (the second half of a ring
    /// allreduce) are read straight from the sender's memory (`process_vm_readv`, one copy instead
    /// of two through the ring) when the host runs no more workers than cores and the kernel allows
    /// it (same user, no ptrace restriction; probed per link, else the rings); `0`: always through
    /// the rings. Default: `1`.
    pub const SHM_CMA: &str = "WARREN_SHM_CMA";
    /// `1` for retry-one recovery (results kept, re-link on a lost peer); `0` for plain collectives
    /// that fail on a lost peer. Default: `1`.
    pub const ROBUST: &str = "WARREN_ROBUST";
    /// `1` keeps bootstrap results for the whole job; `0` treats bootstrap calls as ordinary calls,
    /// which a worker restarted after the first checkpoint then cannot replay. Default: `1`.
    pub const BOOTSTRAP_CACHE: &str = "WARREN_BOOTSTRAP_CACHE";
    /// Failure injection: entries separated by `;`, each naming a rank, a point of its run and
    /// an attempt (`rank,version,seq,attempt`, `rank,bootstrap:n,attempt`, `rank,linking,attempt`,
    /// `rank,finalize,attempt`, `rank,shutdown,attempt`; docs/retry-one.md, "Failure
    /// injection"). The matching worker exits at that point, or, with `,cut` appended, is cut
    /// off from the tracker. Default: none.
    pub const MOCK: &str = "WARREN_MOCK";
    /// Workers keeping a copy of each local model, on other hosts first: with hosts running equally
    /// many workers, losing `min(R, hosts - 1)` whole hosts at once is survivable; with any hosts,
    /// losing one host is, while no host runs more than R times as many workers as the others
    /// together. Default: `2`.
    pub const LOCAL_REPLICAS: &str = "WARREN_LOCAL_REPLICAS";
    /// Workers that keep each call's result until the next checkpoint: `0` for every worker, k
    /// spreads them over k workers evenly around the ring, on `min(k, hosts)` hosts (memory per
    /// worker about k / world). Default: `0`.
    pub const RESULT_REPLICAS: &str = "WARREN_RESULT_REPLICAS";
    /// Write every k-th checkpoint to `WARREN_CHECKPOINT_DIR`. Default: `1`.
    pub const DURABLE_EVERY: &str = "WARREN_DURABLE_EVERY";
    /// Directory where checkpoints are also written, for the fail-all strategy. Default: none.
    pub const CHECKPOINT_DIR: &str = "WARREN_CHECKPOINT_DIR";
    /// Seconds a call waits without progress before it logs a stall naming the ranks it waits for
    /// (task, host, pid), again every such period, and reports it to the tracker with its
    /// heartbeat; `0` turns reports off. Default: `10`.
    pub const STALL_WARN_S: &str = "WARREN_STALL_WARN_S";
    /// Read by the tracker (`warren run`, `warren tracker`; on Spark `spark.warren.peerTimeout`,
    /// which passes it on): a worker without a heartbeat for this many seconds is fenced
    /// (docs/liveness.md). Time the tracker itself was stopped does not count, so a paused tracker
    /// is not a failure; `0` turns heartbeats and fencing off. Default: `30`.
    pub const PEER_TIMEOUT_S: &str = "WARREN_PEER_TIMEOUT_S";
    /// `1` to encrypt with TLS every connection that can leave a host (tracker, master, parameter
    /// servers, TCP peer links), keyed from the job secret unless certificates are given; every
    /// process of a job must agree (docs/security.md). Default: `0`.
    pub const TLS: &str = "WARREN_TLS";
    /// With `WARREN_TLS=1`: a PEM bundle of the authorities that sign every end's certificate.
    /// `WARREN_TLS_CA`, `WARREN_TLS_CERT` and `WARREN_TLS_KEY` go together, all three or none;
    /// every end then presents its certificate and checks the other's (mutual TLS). Default: none.
    pub const TLS_CA: &str = "WARREN_TLS_CA";
    /// With `WARREN_TLS=1`: the PEM certificate chain this process presents. Default: none.
    pub const TLS_CERT: &str = "WARREN_TLS_CERT";
    /// With `WARREN_TLS=1`: the PEM private key of `WARREN_TLS_CERT`. Default: none.
    pub const TLS_KEY: &str = "WARREN_TLS_KEY";
    /// JVM only: how a Java array reaches a collective. `auto` pins it for the call (no copy) where
    /// G1 pins an array's heap region only (JDK 22 and later), else copies it in pieces (JDK 17 and
    /// 21, where a pinned array holds up the JVM's garbage collector while the call waits on
    /// peers); `copy` or `critical` force either (docs/jvm-api.md). Default: `auto`.
    pub const JNI_ARRAY_ACCESS: &str = "WARREN_JNI_ARRAY_ACCESS";
    /// JVM only: the piece size in bytes in which copied Java arrays are reduced (each piece one
    /// collective call; the same on every rank). Default: `1048576`.
    pub const JNI_ARRAY_SEGMENT_BYTES: &str = "WARREN_JNI_ARRAY_SEGMENT_BYTES";
    /// `host:port` of the data master a worker pulls its tasks from (`warren master` prints it).
    /// Default: none.
    pub const MASTER_URI: &str = "WARREN_MASTER_URI";
    /// The parameter servers' addresses, in server order, separated by commas (`warren ps` prints
    /// them). Default: none.
    pub const PS_URIS: &str = "WARREN_PS_URIS";
    /// Failure injection in parameter-server trainers: `trainer,step,point,attempt`, the point one
    /// of `before-push`, `staged`, `half-committed`, `after-push`, `mid-pull`
    /// (docs/parameter-server.md). Default: none.
    pub const PS_MOCK: &str = "WARREN_PS_MOCK";
    /// The bytes each buffer pool of a service (frames, gradients, sums) keeps at most; `0` keeps
    /// none. Default: `536870912`.
    pub const POOL_MAX_BYTES: &str = "WARREN_POOL_MAX_BYTES";
    /// The log level of the `warren` command: `error`, `warn`, `info`, `debug` or `trace`. Default:
    /// `info`.
    pub const LOG: &str = "WARREN_LOG";

    /// Every `WARREN_*` key that some part of Warren reads: the worker settings, the JVM
    /// binding's, the addresses of the data master and the parameter servers, failure
    /// injection and logging. A settings map holding another key with the `WARREN_` prefix
    /// is refused ([`check_known`]): that key is a typo, or a setting of another version.
    pub const KNOWN: &[&str] = &[
        TRACKER_URI,
        TASK_ID,
        NUM_WORKERS,
        JOB_SECRET,
        JOB_SECRET_FILE,
        ATTEMPT,
        TIMEOUT_S,
        CONNECT_TIMEOUT_S,
        RING_THRESHOLD,
        RING_SLICE,
        REDUCTION_ORDER,
        SPIN_US,
        BUSY_POLL_US,
        HOST,
        SOCKET_BUFFER,
        TRANSPORT,
        HOST_ID,
        SHM_RING,
        SHM_CMA,
        ROBUST,
        BOOTSTRAP_CACHE,
        MOCK,
        LOCAL_REPLICAS,
        RESULT_REPLICAS,
        DURABLE_EVERY,
        CHECKPOINT_DIR,
        STALL_WARN_S,
        PEER_TIMEOUT_S,
        TLS,
        TLS_CA,
        TLS_CERT,
        TLS_KEY,
        JNI_ARRAY_ACCESS,
        JNI_ARRAY_SEGMENT_BYTES,
        MASTER_URI,
        PS_URIS,
        PS_MOCK,
        POOL_MAX_BYTES,
        LOG,
    ];

    /// The prefix of every key of Warren's.
    pub const PREFIX: &str = "WARREN_";

    /// Why `key` is not one of Warren's keys, naming the closest known one; `None` when it is
    /// one, or does not start with [`PREFIX`] (another program's).
    pub fn unknown(key: &str) -> Option<String> {
        if !key.starts_with(PREFIX) || KNOWN.contains(&key) {
            return None;
        }
        let (closest, distance) =
            KNOWN.iter().map(|k| (*k, strsim::levenshtein(key, k))).min_by_key(|&(_, d)| d).expect("known keys");
        let hint = if distance <= key.len() / 3 { format!(" (did you mean {closest}?)") } else { String::new() };
        Some(format!(
            "{key} is not a Warren setting{hint}: every key starting with {PREFIX} must be one of Warren's \
             (docs/settings.md lists them); correct its name or remove it"
        ))
    }

    /// Refuses a settings map holding a `WARREN_*` key that is not one of Warren's
    /// ([`unknown`]), as a configuration error.
    pub fn check_known<'a>(keys: impl IntoIterator<Item = &'a String>) -> crate::Result<()> {
        let mut keys: Vec<&String> = keys.into_iter().collect();
        keys.sort();
        match keys.into_iter().find_map(|k| unknown(k)) {
            Some(why) => Err(crate::Error::Config(why)),
            None => Ok(()),
        }
    }
}

/// Default of [`keys::BUSY_POLL_US`] (see docs/benchmarks.md, "Busy-polling").
pub const DEFAULT_BUSY_POLL: Duration = Duration::ZERO;

/// Default of [`keys::STALL_WARN_S`].
pub const DEFAULT_STALL_WARN: Duration = Duration::from_secs(10);

/// Default of [`keys::PEER_TIMEOUT_S`]: heartbeats come from a native thread that a JVM
/// garbage collection does not stop, so this only has to outlast scheduling stalls, swapping
/// and brief network cuts; it is well under Spark's 120 s executor heartbeat timeout, so a
/// frozen worker is replaced before Spark gives up on its executor.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The peer timeout from the environment ([`keys::PEER_TIMEOUT_S`]; `None` when set to 0),
/// or [`DEFAULT_PEER_TIMEOUT`].
pub fn peer_timeout_from_env() -> Result<Option<Duration>> {
    let get = |k: &str| std::env::var(k).ok();
    Ok(secs_or_off(&get, keys::PEER_TIMEOUT_S)?.unwrap_or(Some(DEFAULT_PEER_TIMEOUT)))
}

/// Default [`Config::ring_slice`]: 128 KiB. Over loopback TCP a 16 MiB allreduce took 0.5-0.65x
/// the time of whole chunks, plain or robust, at N = 2 and 4 (docs/benchmarks.md, "The ring in
/// slices, and loopback socket buffers"); over shared memory it made no difference.
pub const DEFAULT_RING_SLICE: usize = 128 << 10;

/// The largest [`Config::ring_slice`] (it travels in 31 bits of the call header's root field,
/// with the reduction order).
pub const MAX_RING_SLICE: usize = (1 << 31) - 1;

/// Smallest accepted shared-memory ring (`WARREN_SHM_RING`), in bytes.
pub const MIN_SHM_RING: usize = 4 << 10;
/// Largest accepted shared-memory ring (`WARREN_SHM_RING`), in bytes.
pub const MAX_SHM_RING: usize = 1 << 30;

/// Smallest accepted socket buffer: below this, loopback TCP (whose MSS is 64 KiB) waits in
/// its zero-window persist timer and a large transfer crawls.
pub const MIN_SOCKET_BUFFER: usize = 16 << 10;

/// How peer links carry data ([`keys::TRANSPORT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory to peers with the same host id, TCP to the others.
    Auto,
    /// TCP to every peer.
    Tcp,
    /// Queues in this process's memory: every worker is a thread of this process.
    Mem,
}

/// The order in which a large allreduce adds the workers' values ([`keys::REDUCTION_ORDER`]).
/// Small allreduces (below [`Config::ring_threshold`]) use the tree, whose order is fixed by
/// the ranks alone, under either value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReductionOrder {
    /// Fixed by the ranks alone: the flat ring over all ranks, whatever host each rank runs
    /// on and whatever transport (shared memory or TCP) carries each link, so that every
    /// placement of a job gives the same bits.
    Ranks,
    /// Fixed by the ranks and the host layout: when several hosts run several workers each,
    /// the hierarchy of hosts (a chain within each host, a ring across the hosts' leaders),
    /// which sends less across hosts; two placements with different layouts may give
    /// different bits.
    Hosts,
}

impl ReductionOrder {
    /// The setting's value for this order: `ranks` or `hosts`.
    pub fn name(self) -> &'static str {
        match self {
            ReductionOrder::Ranks => "ranks",
            ReductionOrder::Hosts => "hosts",
        }
    }

    /// Parses a value of [`keys::REDUCTION_ORDER`] (surrounding spaces and case ignored).
    pub fn parse(v: &str) -> Result<ReductionOrder> {
        match v.trim().to_ascii_lowercase().as_str() {
            "ranks" => Ok(ReductionOrder::Ranks),
            "hosts" => Ok(ReductionOrder::Hosts),
            _ => Err(Error::Config(format!(
                "{}={v:?} must be ranks (the same bits on every placement) or hosts (hierarchical, by host)",
                keys::REDUCTION_ORDER
            ))),
        }
    }
}

/// Default of [`keys::REDUCTION_ORDER`] (see docs/benchmarks.md, "Reduction order").
pub const DEFAULT_REDUCTION_ORDER: ReductionOrder = ReductionOrder::Ranks;

/// Settings of one worker.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// Tracker address (`host:port`); `None` only for a world of one.
    pub tracker_uri: Option<String>,
    /// Stable task id. Default: `"0"`.
    pub task_id: String,
    /// Number of workers. Default: 1.
    pub num_workers: usize,
    /// Job secret. Default: empty (only valid without a tracker).
    pub secret: String,
    /// Attempt number. Default: 0.
    pub attempt: u32,
    /// Deadline of one collective call. Default: 1800 s (long enough for a straggler that is
    /// still computing; a *dead* peer is detected at once through its closed connection).
    pub timeout: Duration,
    /// Deadline of joining. Default: 300 s.
    pub connect_timeout: Duration,
    /// Ring threshold in bytes. Default: 256 KiB (see docs/benchmarks.md).
    pub ring_threshold: usize,
    /// Bytes of each chunk that a ring allreduce reduces and gathers before it moves on to the
    /// next slice of the chunks, so that a slice is still in the cache when its result is
    /// gathered (and, in robust mode, kept); 0: whole chunks. The same bits either way. Every
    /// rank must use the same (each call checks it). Default: [`DEFAULT_RING_SLICE`].
    pub ring_slice: usize,
    /// The order in which a large allreduce adds the workers' values. Every rank must use
    /// the same (each call checks it). Default: [`DEFAULT_REDUCTION_ORDER`].
    pub reduction_order: ReductionOrder,
    /// Spin before blocking. Default: 50 µs.
    pub spin: Duration,
    /// The first part of the spin, polling without yielding the core, used only while this
    /// host runs no more of the job's workers than it has CPUs. Default: [`DEFAULT_BUSY_POLL`].
    pub busy_poll: Duration,
    /// Advertised host. Default: the local address of the connection to the tracker.
    pub host: Option<String>,
    /// Socket buffer size. Default: none (kernel auto-tuning).
    pub socket_buffer: Option<usize>,
    /// How peer links carry data. Default: [`TransportChoice::Auto`].
    pub transport: TransportChoice,
    /// Host id. Default: none (the boot id and the advertised host, found at init).
    pub host_id: Option<String>,
    /// Capacity of each shared-memory ring in bytes. Default: 1 MiB.
    pub shm_ring: usize,
    /// Single-copy transfers on shared-memory links (`process_vm_readv`). Default: on.
    pub shm_cma: bool,
    /// Retry-one recovery. Default: on.
    pub robust: bool,
    /// Bootstrap cache. Default: on (the results of calls marked bootstrap are kept for the
    /// whole job, so a restarted worker can replay them).
    pub bootstrap_cache: bool,
    /// Failure-injection points ([`mock`]). Default: none.
    pub mock: Vec<mock::Mock>,
    /// Ring successors holding a replica of each local model. Default: 2 (survives the loss
    /// of a worker and its successor together).
    pub local_replicas: usize,
    /// Workers keeping each result. Default: 0 (every worker).
    pub result_replicas: usize,
    /// Write every k-th checkpoint durably. Default: 1.
    pub durable_every: u32,
    /// Durable checkpoint directory. Default: none.
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// Time without progress in a call after which the worker reports a stall. Default:
    /// 10 s ([`DEFAULT_STALL_WARN`]); `None` for no reports.
    pub stall_warn: Option<Duration>,
    /// Encryption in transit. Default: off ([`TlsSettings`]).
    pub tls: TlsSettings,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("tracker_uri", &self.tracker_uri)
            .field("task_id", &self.task_id)
            .field("num_workers", &self.num_workers)
            .field("secret", &"<redacted>")
            .field("attempt", &self.attempt)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ring_threshold", &self.ring_threshold)
            .field("ring_slice", &self.ring_slice)
            .field("reduction_order", &self.reduction_order)
            .field("spin", &self.spin)
            .field("busy_poll", &self.busy_poll)
            .field("host", &self.host)
            .field("socket_buffer", &self.socket_buffer)
            .field("transport", &self.transport)
            .field("host_id", &self.host_id)
            .field("shm_ring", &self.shm_ring)
            .field("shm_cma", &self.shm_cma)
            .field("robust", &self.robust)
            .field("bootstrap_cache", &self.bootstrap_cache)
            .field("mock", &self.mock)
            .field("local_replicas", &self.local_replicas)
            .field("result_replicas", &self.result_replicas)
            .field("durable_every", &self.durable_every)
            .field("checkpoint_dir", &self.checkpoint_dir)
            .field("stall_warn", &self.stall_warn)
            .field("tls", &self.tls)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tracker_uri: None,
            task_id: "0".into(),
            num_workers: 1,
            secret: String::new(),
            attempt: 0,
            timeout: Duration::from_secs(1800),
            connect_timeout: Duration::from_secs(300),
            ring_threshold: 256 << 10,
            ring_slice: DEFAULT_RING_SLICE,
            reduction_order: DEFAULT_REDUCTION_ORDER,
            spin: Duration::from_micros(50),
            busy_poll: DEFAULT_BUSY_POLL,
            host: None,
            socket_buffer: None,
            transport: TransportChoice::Auto,
            host_id: None,
            shm_ring: 1 << 20,
            shm_cma: true,
            robust: true,
            bootstrap_cache: true,
            mock: Vec::new(),
            local_replicas: 2,
            result_replicas: 0,
            durable_every: 1,
            checkpoint_dir: None,
            stall_warn: Some(DEFAULT_STALL_WARN),
            tls: TlsSettings::default(),
        }
    }
}

impl Config {
    /// Reads the settings from the process environment. A `WARREN_*` variable that is not one
    /// of Warren's keys is logged as ignored (the environment also carries other programs'
    /// variables, so it is not refused as a map's key is).
    pub fn from_env() -> Result<Config> {
        let mut vars: Vec<String> = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect();
        vars.sort();
        for why in vars.iter().filter_map(|k| keys::unknown(k)) {
            log::warn!("ignored from the environment: {why}");
        }
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the settings from a map with the same keys as the environment. A `WARREN_*` key
    /// that is not one of Warren's is refused, naming the closest one ([`keys::check_known`]).
    pub fn from_map(map: &HashMap<String, String>) -> Result<Config> {
        keys::check_known(map.keys())?;
        Self::from_lookup(|k| map.get(k).cloned())
    }

    /// Reads the settings through `get`, which returns the value of a key if set.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let d = Config::default();
        let secret = match get(keys::JOB_SECRET) {
            Some(s) => s,
            None => match get(keys::JOB_SECRET_FILE) {
                Some(path) => std::fs::read_to_string(&path)
                    .map_err(|e| Error::Config(format!("{} {path}: {e}", keys::JOB_SECRET_FILE)))?
                    .trim()
                    .to_string(),
                None => String::new(),
            },
        };
        let cfg = Config {
            tracker_uri: get(keys::TRACKER_URI).filter(|s| !s.is_empty()),
            task_id: get(keys::TASK_ID).unwrap_or(d.task_id),
            num_workers: parse(&get, keys::NUM_WORKERS)?.unwrap_or(d.num_workers),
            secret,
            attempt: parse(&get, keys::ATTEMPT)?.unwrap_or(d.attempt),
            timeout: secs(&get, keys::TIMEOUT_S)?.unwrap_or(d.timeout),
            connect_timeout: secs(&get, keys::CONNECT_TIMEOUT_S)?.unwrap_or(d.connect_timeout),
            ring_threshold: parse(&get, keys::RING_THRESHOLD)?.unwrap_or(d.ring_threshold),
            ring_slice: parse(&get, keys::RING_SLICE)?.unwrap_or(d.ring_slice),
            reduction_order: match get(keys::REDUCTION_ORDER).filter(|v| !v.trim().is_empty()) {
                Some(v) => ReductionOrder::parse(&v)?,
                None => d.reduction_order,
            },
            spin: parse::<u64>(&get, keys::SPIN_US)?.map(Duration::from_micros).unwrap_or(d.spin),
            busy_poll: parse::<u64>(&get, keys::BUSY_POLL_US)?.map(Duration::from_micros).unwrap_or(d.busy_poll),
            host: get(keys::HOST).filter(|s| !s.is_empty()),
            socket_buffer: parse(&get, keys::SOCKET_BUFFER)?,
            transport: match get(keys::TRANSPORT).as_deref().map(str::trim) {
                None | Some("" | "auto") => TransportChoice::Auto,
                Some("tcp") => TransportChoice::Tcp,
                Some("mem") => TransportChoice::Mem,
                Some(v) => return Err(Error::Config(format!("{}={v:?} must be auto, tcp or mem", keys::TRANSPORT))),
            },
            host_id: get(keys::HOST_ID).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            shm_ring: parse(&get, keys::SHM_RING)?.unwrap_or(d.shm_ring),
            shm_cma: flag(&get, keys::SHM_CMA)?.unwrap_or(d.shm_cma),
            robust: flag(&get, keys::ROBUST)?.unwrap_or(d.robust),
            bootstrap_cache: flag(&get, keys::BOOTSTRAP_CACHE)?.unwrap_or(d.bootstrap_cache),
            mock: match get(keys::MOCK) {
                Some(m) => mock::parse(&m)?,
                None => Vec::new(),
            },
            local_replicas: parse(&get, keys::LOCAL_REPLICAS)?.unwrap_or(d.local_replicas),
            result_replicas: parse(&get, keys::RESULT_REPLICAS)?.unwrap_or(d.result_replicas),
            durable_every: parse::<u32>(&get, keys::DURABLE_EVERY)?.unwrap_or(d.durable_every).max(1),
            checkpoint_dir: get(keys::CHECKPOINT_DIR).filter(|s| !s.is_empty()).map(Into::into),
            stall_warn: secs_or_off(&get, keys::STALL_WARN_S)?.unwrap_or(d.stall_warn),
            tls: TlsSettings::from_lookup(&get)?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<()> {
        if self.num_workers == 0 {
            return Err(Error::Config(format!("{} must be at least 1", keys::NUM_WORKERS)));
        }
        if self.num_workers > 1 && self.tracker_uri.is_none() {
            return Err(Error::Config(format!(
                "{} workers need a tracker: set {} (e.g. from `warren tracker`, or run under `warren run`)",
                self.num_workers,
                keys::TRACKER_URI
            )));
        }
        if self.tracker_uri.is_some() && self.secret.is_empty() {
            return Err(Error::Config(format!(
                "joining a tracker needs the job secret: set {} or {}",
                keys::JOB_SECRET,
                keys::JOB_SECRET_FILE
            )));
        }
        if self.ring_slice > MAX_RING_SLICE {
            return Err(Error::Config(format!(
                "{}={} is above the maximum of {MAX_RING_SLICE} (0 reduces whole chunks)",
                keys::RING_SLICE,
                self.ring_slice
            )));
        }
        if let Some(n) = self.socket_buffer {
            if n < MIN_SOCKET_BUFFER {
                return Err(Error::Config(format!(
                    "{}={n} is below the minimum of {MIN_SOCKET_BUFFER}: smaller buffers stall TCP in its persist timer",
                    keys::SOCKET_BUFFER
                )));
            }
        }
        let (lo, hi) = (MIN_SHM_RING, MAX_SHM_RING);
        if !self.shm_ring.is_power_of_two() || !(lo..=hi).contains(&self.shm_ring) {
            return Err(Error::Config(format!(
                "{}={} must be a power of two from {lo} to {hi}",
                keys::SHM_RING,
                self.shm_ring
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::Config("timeouts must be positive".into()));
        }
        Ok(())
    }
}

fn parse<T: std::str::FromStr>(get: &impl Fn(&str) -> Option<String>, key: &str) -> Result<Option<T>> {
    match get(key) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Config(format!("{key}={v:?} is not a valid {}", std::any::type_name::<T>()))),
    }
}

/// A `1`/`0` setting (also `true`/`false`, `on`/`off`, `yes`/`no`): `None` when unset.
pub(crate) fn flag(get: &impl Fn(&str) -> Option<String>, key: &str) -> Result<Option<bool>> {
    match get(key).as_deref().map(str::trim) {
        None => Ok(None),
        Some("1" | "true" | "on" | "yes") => Ok(Some(true)),
        Some("0" | "false" | "off" | "no") => Ok(Some(false)),
        Some(v) => Err(Error::Config(format!("{key}={v:?} must be 1 or 0"))),
    }
}

fn secs(get: &impl Fn(&str) -> Option<String>, key: &str) -> Result<Option<Duration>> {
    match parse::<f64>(get, key)? {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(Error::Config(format!("{key}={s} must be a positive number of seconds"))),
    }
}

/// A number of seconds where `0` means "off": `None` when unset, `Some(None)` when off.
fn secs_or_off(get: &impl Fn(&str) -> Option<String>, key: &str) -> Result<Option<Option<Duration>>> {
    match parse::<f64>(get, key)? {
        None => Ok(None),
        Some(0.0) => Ok(Some(None)),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Some(Duration::from_secs_f64(s)))),
        Some(s) => Err(Error::Config(format!("{key}={s} must be a number of seconds >= 0 (0: off)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> HashMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_mistyped_key_in_a_map_is_refused_naming_the_closest() {
        let e = Config::from_map(&map(&[("WARREN_TIMEOUT", "5")])).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("WARREN_TIMEOUT is not a Warren setting (did you mean WARREN_TIMEOUT_S?)"), "{text}");
        let e = Config::from_map(&map(&[("WARREN_LOCAL_REPLICA", "1")])).unwrap_err().to_string();
        assert!(e.contains("did you mean WARREN_LOCAL_REPLICAS?"), "{e}");
        // Far from every key: no guess, still refused.
        let e = Config::from_map(&map(&[("WARREN_QQQQQQQQQQQQQQQQ", "1")])).unwrap_err().to_string();
        assert!(e.contains("is not a Warren setting:"), "{e}");
        // Other programs' keys and every key of Warren's are accepted.
        Config::from_map(&map(&[("SPARK_HOME", "/x"), ("WARREN_TIMEOUT_S", "5"), ("WARREN_PS_URIS", "h:1")])).unwrap();
    }

    /// Every `"WARREN_..."` literal in the native and JVM sources (but this file's, where the
    /// keys are defined) is a known key or one of the few names that are not settings (the
    /// lines the commands print), so a key added to the code without [`keys::KNOWN`] fails
    /// here instead of being refused in users' maps.
    #[test]
    fn every_key_the_sources_name_is_known() {
        let not_settings = ["WARREN_JOB_DONE", "WARREN_RUN_SUMMARY", "WARREN_PS_URI_"];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        let mut dirs = vec![root.join("native"), root.join("jvm")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() && !matches!(name.as_str(), "target" | "tests" | "test") {
                    dirs.push(path);
                } else if name != "config.rs"
                    && (name.ends_with(".rs") || name.ends_with(".java") || name.ends_with(".scala"))
                {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 50, "found the sources: {}", files.len());
        let mut unknown = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (i, _) in text.match_indices("\"WARREN_") {
                let name: String = text[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let name = name.as_str();
                if name != keys::PREFIX && !keys::KNOWN.contains(&name) && !not_settings.contains(&name) {
                    unknown.push(format!("{name} in {}", file.display()));
                }
            }
        }
        assert!(unknown.is_empty(), "keys missing from config::keys::KNOWN: {unknown:?}");
    }

    #[test]
    fn defaults_make_a_world_of_one() {
        let c = Config::from_map(&HashMap::new()).unwrap();
        assert_eq!(c.num_workers, 1);
        assert!(c.tracker_uri.is_none());
        assert!(c.robust && c.bootstrap_cache, "retry-one with the bootstrap cache by default");
    }

    #[test]
    fn parses_every_key() {
        let c = Config::from_map(&map(&[
            ("WARREN_TRACKER_URI", "127.0.0.1:9000"),
            ("WARREN_TASK_ID", "7"),
            ("WARREN_NUM_WORKERS", "8"),
            ("WARREN_JOB_SECRET", "abc"),
            ("WARREN_ATTEMPT", "2"),
            ("WARREN_TIMEOUT_S", "1.5"),
            ("WARREN_RING_THRESHOLD", "1024"),
            ("WARREN_SPIN_US", "0"),
            ("WARREN_BUSY_POLL_US", "7"),
            ("WARREN_SOCKET_BUFFER", "65536"),
            ("WARREN_ROBUST", "0"),
            ("WARREN_BOOTSTRAP_CACHE", "0"),
            ("WARREN_MOCK", "0,1,2,0; 4,0,7,1"),
            ("WARREN_STALL_WARN_S", "2.5"),
            ("WARREN_TRANSPORT", "tcp"),
            ("WARREN_HOST_ID", "rack1-node7"),
            ("WARREN_SHM_RING", "65536"),
            ("WARREN_SHM_CMA", "0"),
        ]))
        .unwrap();
        assert_eq!(c.task_id, "7");
        assert_eq!(c.num_workers, 8);
        assert_eq!(c.attempt, 2);
        assert_eq!(c.timeout, Duration::from_millis(1500));
        assert_eq!(c.ring_threshold, 1024);
        assert_eq!(c.spin, Duration::ZERO);
        assert_eq!(c.busy_poll, Duration::from_micros(7));
        assert_eq!(c.socket_buffer, Some(65536));
        assert!(!c.robust && !c.bootstrap_cache);
        assert_eq!(c.mock, crate::mock::parse("0,1,2,0;4,0,7,1").unwrap());
        assert!(!format!("{c:?}").contains("abc"), "the secret must not be printed");
        assert_eq!(c.stall_warn, Some(Duration::from_millis(2500)));
        assert_eq!((c.transport, c.host_id.as_deref(), c.shm_ring), (TransportChoice::Tcp, Some("rack1-node7"), 65536));
        assert_eq!(Config::default().transport, TransportChoice::Auto);
        assert!(!c.shm_cma && Config::default().shm_cma);
        let off = Config::from_map(&map(&[("WARREN_STALL_WARN_S", "0")])).unwrap();
        assert_eq!(off.stall_warn, None);
        assert_eq!(Config::default().stall_warn, Some(DEFAULT_STALL_WARN));
    }

    #[test]
    fn ring_slices_are_parsed_and_bounded() {
        assert_eq!(Config::default().ring_slice, 128 << 10);
        let c = Config::from_map(&map(&[("WARREN_RING_SLICE_BYTES", "0")])).unwrap();
        assert_eq!(c.ring_slice, 0, "0: whole chunks");
        let c = Config::from_map(&map(&[("WARREN_RING_SLICE_BYTES", "65536")])).unwrap();
        assert_eq!(c.ring_slice, 65536);
        let e = Config::from_map(&map(&[("WARREN_RING_SLICE_BYTES", "2147483648")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_RING_SLICE_BYTES=2147483648 is above the maximum"), "{e}");
        assert!(Config::from_map(&map(&[("WARREN_RING_SLICE_BYTES", "lots")])).is_err());
    }

    #[test]
    fn reduction_orders_are_parsed() {
        assert_eq!(Config::default().reduction_order, ReductionOrder::Ranks);
        for (v, want) in
            [("ranks", ReductionOrder::Ranks), (" Hosts ", ReductionOrder::Hosts), ("", ReductionOrder::Ranks)]
        {
            let c = Config::from_map(&map(&[("WARREN_REDUCTION_ORDER", v)])).unwrap();
            assert_eq!(c.reduction_order, want, "{v:?}");
        }
        let e = Config::from_map(&map(&[("WARREN_REDUCTION_ORDER", "rank")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_REDUCTION_ORDER=\"rank\" must be ranks"), "{e}");
        assert!(e.to_string().contains("or hosts"), "{e}");
    }

    #[test]
    fn clear_errors() {
        let e = Config::from_map(&map(&[("WARREN_NUM_WORKERS", "four")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_NUM_WORKERS=\"four\""), "{e}");
        let e = Config::from_map(&map(&[("WARREN_NUM_WORKERS", "4")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TRACKER_URI"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_NUM_WORKERS", "4"), ("WARREN_TRACKER_URI", "h:1")])).unwrap_err();
        assert!(e.to_string().contains("secret"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_MOCK", "1,2,3")])).unwrap_err();
        assert!(e.to_string().contains("rank,version,seq,attempt"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_MOCK", "1,bootstrap,0")])).unwrap_err();
        assert!(e.to_string().contains("rank,bootstrap:n,attempt"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_ROBUST", "maybe")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_ROBUST"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_STALL_WARN_S", "-3")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_STALL_WARN_S") && e.to_string().contains("0: off"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_TIMEOUT_S", "-1")])).unwrap_err();
        assert!(e.to_string().contains("positive"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_TRANSPORT", "rdma")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TRANSPORT=\"rdma\" must be auto, tcp or mem"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_SHM_RING", "100000")])).unwrap_err();
        assert!(e.to_string().contains("WARREN_SHM_RING=100000 must be a power of two"), "{e}");
        let e = Config::from_map(&map(&[("WARREN_JOB_SECRET_FILE", "/nonexistent/x")])).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x"), "{e}");
    }
}

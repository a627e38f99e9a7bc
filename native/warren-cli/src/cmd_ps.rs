//! `warren ps`: parameter servers as threads of this process (or one server per process with
//! `--index`, or registered in etcd with `--store`), and `warren ps status`.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};
use warren::Error;
use warren::ps::{
    CheckpointPolicy, EtcdRegistry, LogSync, PsClient, PsClientOptions, PsConfig, PsServer, parse_log_sync,
};

/// The environment variable that gives trainers the servers' addresses, comma-separated in
/// server order.
pub const PS_URIS: &str = "WARREN_PS_URIS";

/// Arguments of `warren ps`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PsArgs {
    #[command(subcommand)]
    cmd: Option<PsCmd>,
    /// Number of parameter servers of the job.
    #[arg(long, default_value_t = 1)]
    servers: usize,
    /// Run only server INDEX (0-based) in this process; without it, all `--servers` run here
    /// as threads.
    #[arg(long)]
    index: Option<usize>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port of the first server run here (the next ones take the following ports); 0 = any
    /// free port.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seconds a trainer's pull may wait for slower trainers before it fails naming them.
    #[arg(long, default_value_t = 300.0)]
    pull_timeout_s: f64,
    /// Keep each server's state in DIR/server-<index>: a log of every push it takes, written
    /// before it answers, and checkpoints of its shard (parameters, optimizer state, trainers'
    /// clocks), atomically; a server started on that directory replays them and goes on
    /// exactly where it stopped.
    #[arg(long)]
    checkpoint_dir: Option<std::path::PathBuf>,
    /// Steps between checkpoints (with --checkpoint-dir; 0, the default: by time only). Every
    /// push is in the log, so a checkpoint only bounds what a restart replays; the log also
    /// asks for one once it holds four times the shard's size.
    #[arg(long, default_value_t = 0)]
    checkpoint_every_steps: u64,
    /// Seconds between checkpoints (with --checkpoint-dir; 0: by steps only).
    #[arg(long, default_value_t = 60.0)]
    checkpoint_every_s: f64,
    /// When a logged push may be answered (with --checkpoint-dir): `write`, once its record
    /// is written to the kernel (it survives the server process being killed; the log is
    /// fsynced every second), or `fsync`, once it is on disk (it survives the machine
    /// crashing too, at the cost of a disk flush before each answer).
    #[arg(long, default_value = "write", value_parser = parse_log_sync)]
    log_sync: LogSync,
    /// Threads of each server: a shard's rows are worked on by one thread at a time, more
    /// threads read and write several trainers' frames at once (a dense model's large
    /// frames gain from two; see docs/benchmarks-ps.md).
    #[arg(long, default_value_t = warren::ps::DEFAULT_THREADS)]
    threads: usize,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Registration in etcd (`--store etcd:...`), shared by `warren ps` and the trainers.
#[derive(Args)]
pub struct RegistryArgs {
    /// Register in etcd, as in PaddlePaddle's design: `etcd:HOST:PORT[,HOST:PORT...][/PREFIX]`
    /// (one prefix per job; default /warren/ps/default). A server claims the first free
    /// PREFIX/ps/<index> below --servers (or waits for --index I to be free), runs alone in
    /// this process and publishes its address there; trainers set PREFIX/trainer/<id> and
    /// wait until every server is there.
    #[arg(long)]
    pub store: Option<String>,
    /// TTL in seconds of the etcd lease the keys of this process are bound to: they are
    /// deleted this long after it dies (etcd may raise it to its minimum, 2 s by default).
    #[arg(long, default_value_t = 5)]
    pub etcd_lease_ttl_s: i64,
    /// Seconds to wait in etcd: for a free server index (a dead server keeps its key for a
    /// lease TTL), or, for a trainer, for every server to register.
    #[arg(long, default_value_t = 300.0)]
    pub register_timeout_s: f64,
}

impl RegistryArgs {
    /// The registration wait.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.register_timeout_s.max(0.001))
    }

    /// Connects to the etcd of `--store`, if given.
    pub fn connect(&self) -> warren::Result<Option<EtcdRegistry>> {
        self.store.as_deref().map(|spec| EtcdRegistry::connect(spec, self.etcd_lease_ttl_s)).transpose()
    }
}

/// Subcommands of `warren ps`.
#[derive(Subcommand)]
enum PsCmd {
    /// Print every server's state (job, trainers' clocks, steps applied) as JSON lines; with
    /// `--store etcd:...`, the servers and trainers registered there (see `warren ps status
    /// --help`).
    Status(StatusArgs),
}

/// Arguments of `warren ps status`.
#[derive(Args)]
struct StatusArgs {
    /// The servers' `host:port`s in server order, comma-separated (as printed in
    /// WARREN_PS_URIS).
    #[arg(long, env = PS_URIS, required_unless_present = "store")]
    uris: Option<String>,
    /// Read the job from etcd instead (`etcd:HOST:PORT[,HOST:PORT...][/PREFIX]`, as given to
    /// `warren ps --store`): one JSON line per server index below the job's server count,
    /// `{"index", "address", "alive", "status"}` (`alive`: its key is in etcd, bound to the
    /// lease of a live process; `status`: its state, as without `--store`, when every server
    /// answered), then `{"trainers": [ids]}`, the trainers registered.
    #[arg(long)]
    store: Option<String>,
    /// Seconds to wait for the servers (and for etcd).
    #[arg(long, default_value_t = 10.0)]
    timeout_s: f64,
}

/// Starts servers `indices` of `template.servers`, each with `template`'s settings, its index,
/// and a port from `template.port` on (0: any free port), with the TLS of the environment.
pub fn start_servers(template: &PsConfig, indices: impl Iterator<Item = usize>) -> warren::Result<Vec<PsServer>> {
    let tls = super::launcher::tls()?;
    indices
        .enumerate()
        .map(|(n, i)| {
            let mut cfg = template.clone();
            cfg.index = i;
            cfg.port = if template.port == 0 { 0 } else { template.port + n as u16 };
            cfg.tls = tls.clone();
            PsServer::start(cfg)
        })
        .collect()
}

/// The addresses in `WARREN_PS_URIS` (or `value`), in server order.
pub fn parse_uris(value: &str) -> warren::Result<Vec<String>> {
    let uris: Vec<String> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if uris.is_empty() {
        return Err(Error::Config(format!("{PS_URIS} lists no server (expected host:port,host:port,...)")));
    }
    Ok(uris)
}

/// Runs `warren ps` until killed.
pub fn run(a: PsArgs) -> warren::Result<u8> {
    if let Some(PsCmd::Status(s)) = a.cmd {
        return status(s);
    }
    if a.servers == 0 {
        return Err(Error::Config("--servers must be at least 1".into()));
    }
    let secret = super::launcher::job_secret(true)?;
    let pull_timeout = Duration::from_secs_f64(a.pull_timeout_s.max(0.001));
    let checkpoint = a.checkpoint_dir.map(|dir| CheckpointPolicy {
        dir,
        every_steps: a.checkpoint_every_steps,
        every: Duration::from_secs_f64(a.checkpoint_every_s.max(0.0)),
        log_sync: a.log_sync,
    });
    // Kept until the process ends: its lease holds the server's key.
    let registry = a.registry.connect()?;
    let indices: Vec<usize> = match (a.index, &registry) {
        (Some(i), _) if i >= a.servers => {
            return Err(Error::Config(format!("--index {i} is not below --servers {}", a.servers)));
        }
        (wanted, Some(r)) => vec![r.claim_server(a.servers, wanted, a.registry.timeout())?],
        (Some(i), None) => vec![i],
        (None, None) => (0..a.servers).collect(),
    };
    let one = registry.is_some() || a.index.is_some();
    let mut template = PsConfig::new(secret, 0, a.servers);
    template.host = a.host;
    template.port = a.port;
    template.pull_timeout = pull_timeout;
    template.checkpoint = checkpoint;
    template.threads = a.threads;
    let running = start_servers(&template, indices.iter().copied())?;
    let uris: Vec<&str> = running.iter().map(|s| s.uri()).collect();
    if let Some(r) = &registry {
        r.publish_server(indices[0], uris[0])?;
    }
    if one {
        println!("WARREN_PS_URI_{}={}", indices[0], uris[0]);
    } else {
        println!("{PS_URIS}={}", uris.join(","));
    }
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn status(s: StatusArgs) -> warren::Result<u8> {
    let timeout = Duration::from_secs_f64(s.timeout_s.max(0.001));
    if let Some(store) = &s.store {
        return status_in_etcd(store, timeout);
    }
    let uris = parse_uris(s.uris.as_deref().unwrap_or_default())?;
    for st in servers_status(&uris, timeout)? {
        println!("{}", json(&st)?);
    }
    Ok(0)
}

/// Every server's state, asked as an observer.
fn servers_status(uris: &[String], timeout: Duration) -> warren::Result<Vec<warren::ps::ServerStatus>> {
    let secret = super::cmd_master::client_secret()?;
    let opts = PsClientOptions { connect_timeout: timeout, call_timeout: timeout, tls: super::launcher::tls()? };
    PsClient::connect(uris, secret, None, opts)?.status()
}

fn json(v: &impl serde::Serialize) -> warren::Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Protocol(e.to_string()))
}

/// `warren ps status --store etcd:...` (see [`StatusArgs::store`]).
fn status_in_etcd(store: &str, timeout: Duration) -> warren::Result<u8> {
    // The shortest lease etcd grants: this process registers nothing.
    let registry = EtcdRegistry::connect(store, 1)?;
    let Some(servers) = registry.server_count()? else {
        return Err(Error::Config(format!("no parameter-server job is registered in {store} (no server count)")));
    };
    let roster: Vec<Option<String>> = (0..servers).map(|i| registry.resolve(i)).collect::<warren::Result<_>>()?;
    // The servers' own state, if all of them are there to ask.
    let states = match roster.iter().cloned().collect::<Option<Vec<String>>>() {
        Some(uris) => servers_status(&uris, timeout).map_err(|e| log::warn!("asking the servers: {e}")).ok(),
        None => None,
    };
    for (i, address) in roster.iter().enumerate() {
        let line = serde_json::json!({
            "index": i,
            "address": address,
            "alive": address.is_some(),
            "status": states.as_ref().map(|s| &s[i]),
        });
        println!("{line}");
    }
    println!("{}", serde_json::json!({ "trainers": registry.trainers()? }));
    Ok(0)
}

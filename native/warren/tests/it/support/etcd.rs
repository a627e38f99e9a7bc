//! A real etcd server for tests: the `etcd` binary (Debian package `etcd-server`) started on
//! 127.0.0.1 with free ports and a temporary data directory, killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running etcd.
pub struct Etcd {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT` of its client endpoint.
    pub endpoint: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn etcd_binary() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "the `etcd` binary is not installed, so the etcd store cannot be tested: \
             run `apt-get install -y etcd-server` (Debian/Ubuntu)"
        )
    })
}

impl Etcd {
    /// Starts etcd (accepting requests up to 32 MiB) and waits (at most 30 s) until it
    /// reports itself healthy.
    pub fn start(tag: &str) -> Etcd {
        // The change that sets a dataset lists every chunk.
        Etcd::start_with_request_limit(tag, 32 << 20)
    }

    /// Like [`start`](Etcd::start), with etcd's `--max-request-bytes` set to `bytes`.
    ///
    /// Its free ports are found by binding port 0 and letting go, so another process (a test
    /// running beside this one) may take one before etcd binds it; etcd then exits at once,
    /// and is started again on other ports (at most three times). Any other failure to start
    /// panics with etcd's log.
    pub fn start_with_request_limit(tag: &str, bytes: u64) -> Etcd {
        let mut attempt = 1;
        loop {
            match Etcd::try_start(tag, bytes) {
                Ok(etcd) => return etcd,
                Err(log) if attempt < 3 && log.contains("address already in use") => {
                    eprintln!("etcd found a port taken (attempt {attempt}); starting it on other ports");
                    attempt += 1;
                }
                Err(log) => panic!("etcd did not start; its log:\n{log}"),
            }
        }
    }

    /// One start of etcd on free ports; its log if it exits or is not healthy within 30 s.
    fn try_start(tag: &str, bytes: u64) -> Result<Etcd, String> {
        let bin = etcd_binary();
        // Unique in this process: the tests of a crate share one test process (its id).
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("warren-etcd-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (client, peer) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let child = Command::new(bin)
            .args(["--name", "warren-test", "--data-dir"])
            .arg(dir.join("data"))
            .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("warren-test={peer_url}")])
            .args(["--max-request-bytes", &bytes.to_string()])
            .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        let endpoint = format!("127.0.0.1:{client}");
        let mut etcd = Etcd { child, dir, endpoint };
        let deadline = Instant::now() + Duration::from_secs(30);
        // An open port is not enough: under load etcd accepted connections and then reset the
        // first gRPC call (a lease grant) while it was still electing itself leader.
        while !etcd.healthy() {
            if Instant::now() > deadline || etcd.child.try_wait().unwrap().is_some() {
                let log = std::fs::read_to_string(etcd.dir.join("etcd.log")).unwrap_or_default();
                return Err(log); // dropping `etcd` kills it and removes its directory
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(etcd)
    }
}

impl Etcd {
    /// Whether etcd answers `GET /health` with `"health":"true"` (it has a leader and serves).
    fn healthy(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(&self.endpoint) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.endpoint);
        let mut reply = String::new();
        stream.write_all(request.as_bytes()).is_ok()
            && stream.read_to_string(&mut reply).is_ok()
            && reply.contains("\"health\":\"true\"")
    }

    /// The etcd process id (to stop and continue it).
    #[allow(dead_code)] // warren-cli's tests, which include this module too, do not pause etcd
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Simulated hosts: network namespaces joined by veth pairs through bridges, each host with
//! its own address, on this machine (needs root and `ip`), optionally with a bandwidth limit
//! per host (`tc ... tbf` on both ends of its veth pair: the `netem` qdisc is not in this
//! kernel). Everything is named after this process (`wn<pid>...`) and removed on drop, also
//! when a test panics; only addresses in the namespaces created here (10.X.Y.0/24, X from the
//! pid) are used.

use std::process::{Command, Stdio};

/// Runs `ip ARGS`, panicking with its stderr if it fails.
fn ip(args: &[&str]) {
    run("ip", args);
}

/// Runs `program ARGS`, panicking with its stderr if it fails; returns its stdout.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("the {program} command: {e}"));
    assert!(out.status.success(), "{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The token bucket of a link limited to `bits_per_s`: the `tc` arguments after `dev X root`.
/// The bucket holds 4 ms at that rate, and at least 96 KiB (a 64 KiB GSO segment and then
/// some: a smaller bucket makes `tbf` split or drop them), so that a limited link still
/// carries full segments and only its long-run rate is bounded; the queue holds 20 ms.
pub fn tbf_args(bits_per_s: u64) -> Vec<String> {
    let burst = (bits_per_s / 8 / 250).max(96 * 1024);
    ["tbf", "rate", &format!("{bits_per_s}bit"), "burst", &burst.to_string(), "latency", "20ms"]
        .map(String::from)
        .to_vec()
}

/// Whether namespaces can be made here (root, `ip netns`).
pub fn available() -> bool {
    let probe = format!("wn{}probe", std::process::id());
    let ok = Command::new("ip").args(["netns", "add", &probe]).status().map(|s| s.success()).unwrap_or(false);
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    ok
}

/// A simulated host: a namespace with one address.
#[derive(Debug, Clone)]
pub struct Host {
    /// The namespace.
    pub ns: String,
    /// Its address.
    pub addr: String,
    /// The host side of its veth pair (on a bridge): set it down to cut the host off.
    pub link: String,
    /// The end of its veth pair inside its namespace.
    pub inside: String,
}

/// The namespaces, bridges and links of one test.
pub struct Net {
    prefix: String,
    subnet: String,
    namespaces: Vec<String>,
    links: Vec<String>,
    bridges: Vec<String>,
    next_host: u32,
}

impl Net {
    /// An empty network; `tag` (0-9) tells apart the networks of one test process.
    pub fn new(tag: u32) -> Net {
        let pid = std::process::id();
        Net {
            prefix: format!("wn{}{tag}", pid % 100_000),
            subnet: format!("10.{}.{}", 200 + pid % 50, 10 + tag),
            namespaces: Vec::new(),
            links: Vec::new(),
            bridges: Vec::new(),
            next_host: 1,
        }
    }

    /// A new bridge (a switch); returns its name.
    pub fn bridge(&mut self) -> String {
        let name = format!("{}b{}", self.prefix, self.bridges.len());
        ip(&["link", "add", &name, "type", "bridge"]);
        self.bridges.push(name.clone());
        ip(&["link", "set", &name, "up"]);
        name
    }

    /// Joins two bridges with a veth pair; returns one end (set it down to partition them).
    pub fn trunk(&mut self, a: &str, b: &str) -> String {
        let (x, y) =
            (format!("{}t{}x", self.prefix, self.links.len()), format!("{}t{}y", self.prefix, self.links.len()));
        ip(&["link", "add", &x, "type", "veth", "peer", "name", &y]);
        self.links.push(x.clone());
        ip(&["link", "set", &x, "master", a, "up"]);
        ip(&["link", "set", &y, "master", b, "up"]);
        x
    }

    /// A new host on `bridge`, with the next address of the subnet.
    pub fn host(&mut self, bridge: &str) -> Host {
        let n = self.next_host;
        self.next_host += 1;
        let ns = format!("{}n{n}", self.prefix);
        let (outside, inside) = (format!("{}h{n}", self.prefix), format!("{}i{n}", self.prefix));
        ip(&["netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside]);
        self.links.push(outside.clone());
        ip(&["link", "set", &inside, "netns", &ns]);
        ip(&["link", "set", &outside, "master", bridge, "up"]);
        let addr = format!("{}.{n}", self.subnet);
        ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &inside]);
        ip(&["-n", &ns, "link", "set", &inside, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        Host { ns, addr, link: outside, inside }
    }

    /// Limits `host`'s link to `bits_per_s` each way, as a NIC of that speed would: a token
    /// bucket ([`tbf_args`]) on the inside end of its veth pair (what the host sends) and on
    /// the bridge's end (what it receives).
    pub fn limit(&self, host: &Host, bits_per_s: u64) {
        let tbf = tbf_args(bits_per_s);
        let tbf: Vec<&str> = tbf.iter().map(String::as_str).collect();
        let mut inside = vec!["-n", host.ns.as_str(), "qdisc", "replace", "dev", host.inside.as_str(), "root"];
        inside.extend(&tbf);
        run("tc", &inside);
        let mut outside = vec!["qdisc", "replace", "dev", host.link.as_str(), "root"];
        outside.extend(&tbf);
        run("tc", &outside);
    }

    /// The root qdiscs of both ends of `host`'s link, as `tc qdisc show` prints them.
    pub fn qdiscs(&self, host: &Host) -> String {
        let inside = run("tc", &["-n", &host.ns, "qdisc", "show", "dev", &host.inside, "root"]);
        inside + &run("tc", &["qdisc", "show", "dev", &host.link, "root"])
    }

    /// Sets a link up or down.
    pub fn set_link(&self, link: &str, up: bool) {
        ip(&["link", "set", link, if up { "up" } else { "down" }]);
    }

    /// A command that runs `program` inside `host`'s namespace.
    pub fn command(&self, host: &Host, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &host.ns, program]).stdin(Stdio::null());
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both; a namespace goes once its last
        // process has exited (a [`super::procs::Proc`] kills
        // its process on drop: declare it after the `Net`).
        for l in &self.links {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for b in &self.bridges {
            let _ = Command::new("ip").args(["link", "del", b]).output();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

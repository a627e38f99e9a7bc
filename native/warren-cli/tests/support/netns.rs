//! Simulated hosts: network namespaces joined by veth pairs through bridges, each host with
//! its own address, on this machine (needs root and `ip`). Everything is named after this
//! process (`wn<pid>...`) and removed on drop, also when a test panics; only addresses in the
//! namespaces created here (10.X.Y.0/24, X from the pid) are used.

use std::process::{Command, Stdio};

/// Runs `ip ARGS`, panicking with its stderr if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("the ip command");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
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
        Host { ns, addr, link: outside }
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

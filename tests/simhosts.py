"""Simulated hosts for the end-to-end tests: network namespaces, each with its own address on a
veth pair whose other end is on a bridge, on this machine (needs root and `ip netns`), as
native/warren-cli/tests/it/support/netns.rs makes them for the Rust tests. Everything is named
after this process (`wp<pid>...`) and removed by `Net.close()`, also after a failure; only
addresses in the namespaces made here (10.X.Y.0/24, X from the pid) are used, and traffic
stays inside them (the bridge has no address: the root namespace is not on it)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sparkjob import ROOT


def ip(*args: str) -> str:
    """Runs `ip ARGS`; fails with its stderr."""
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"ip {' '.join(args)}: {out.stderr}"
    return out.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "simulated hosts need root (network namespaces, veth pairs, a bridge)"
    probe = f"wp{os.getpid() % 100000}probe"
    try:
        made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "simulated hosts need the `ip` command (iproute2)"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    if made.returncode != 0:
        return f"`ip netns add` does not work here: {made.stderr.strip()}"
    return None


@dataclass
class Host:
    """A simulated host: a namespace with one address."""

    ns: str
    addr: str
    # The bridge's end of its veth pair: set it down to cut the host off.
    link: str

    def exec(self, *cmd: str) -> list[str]:
        """`cmd` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.ns, *cmd]

    def pids(self) -> list[int]:
        """The processes in this host's namespace."""
        return [int(p) for p in ip("netns", "pids", self.ns).split()]

    def kill_all(self) -> list[int]:
        """SIGKILLs every process in this host's namespace, as a power loss would; returns them."""
        pids = self.pids()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def get(self, url: str, timeout: float = 30) -> bytes:
        """GET `url` from inside this host (its address is not reachable from the root
        namespace): in a thread of its own that enters the namespace (a network namespace is
        a thread's, and so are the sockets it opens)."""
        result: list = []

        def run():
            try:
                with open(f"/var/run/netns/{self.ns}") as f:
                    if LIBC.setns(f.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns into {self.ns}")
                with urllib.request.urlopen(url, timeout=timeout) as r:
                    result.append(r.read())
            except Exception as e:  # handed to the caller
                result.append(e)

        t = threading.Thread(target=run, name=f"get-{self.ns}")
        t.start()
        t.join(timeout + 5)
        assert result, f"GET {url} in {self.ns}: no answer in {timeout + 5} s"
        if isinstance(result[0], Exception):
            raise OSError(f"GET {url} in {self.ns}: {result[0]}") from result[0]
        return result[0]


LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


class Net:
    """The namespaces, bridge and links of one test module; `close()` removes them."""

    def __init__(self, tag: int = 0):
        pid = os.getpid()
        self.prefix = f"wp{pid % 100000}{tag}"
        self.subnet = f"10.{150 + pid % 50}.{10 + tag}"
        self.hosts: list[Host] = []
        self.bridge = f"{self.prefix}b"
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "up")

    def host(self) -> Host:
        """A new host on the bridge, with the next address of the subnet."""
        n = len(self.hosts) + 1
        ns, outside, inside = f"{self.prefix}n{n}", f"{self.prefix}h{n}", f"{self.prefix}i{n}"
        ip("netns", "add", ns)
        host = Host(ns, f"{self.subnet}.{n}", outside)
        self.hosts.append(host)
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", ns)
        ip("link", "set", outside, "master", self.bridge, "up")
        ip("-n", ns, "addr", "add", f"{host.addr}/24", "dev", inside)
        ip("-n", ns, "link", "set", inside, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return host

    def set_link(self, host: Host, up: bool) -> None:
        ip("link", "set", host.link, "up" if up else "down")

    def close(self) -> None:
        """Kills what still runs in the namespaces, then removes links, bridge and namespaces."""
        for h in self.hosts:
            try:
                h.kill_all()
            except AssertionError:
                pass
        deadline = time.monotonic() + 15
        while any(self._pids(h) for h in self.hosts) and time.monotonic() < deadline:
            time.sleep(0.2)
        for h in self.hosts:
            subprocess.run(["ip", "link", "del", h.link], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)
        for h in self.hosts:
            subprocess.run(["ip", "netns", "del", h.ns], capture_output=True, timeout=30)

    @staticmethod
    def _pids(h: Host) -> list[int]:
        try:
            return h.pids()
        except AssertionError:
            return []


def host_of(hosts: list[Host], pid: int) -> Host:
    """The host whose namespace process `pid` runs in (`ip netns identify`)."""
    ns = ip("netns", "identify", str(pid)).strip()
    for h in hosts:
        if h.ns == ns:
            return h
    raise AssertionError(f"process {pid} runs in namespace {ns!r}, none of {[h.ns for h in hosts]}")


class HostsCluster:
    """A Spark standalone cluster on simulated hosts (scripts/spark-standalone.sh run inside
    namespaces): the master on `master`, one Worker daemon on each of `workers`, each daemon
    bound to its host's address. `worker_timeout` is the master's `spark.worker.timeout`
    (seconds without a heartbeat after which it takes a Worker, and its executors, for lost)."""

    def __init__(self, dir: Path, spark_home: Path, master: Host, worker_timeout: int):
        self.dir, self.spark_home, self.master, self.worker_timeout = dir, spark_home, master, worker_timeout
        self.url = ""
        self.webui = ""
        # The hosts Workers were started on.
        self.hosts: list[Host] = []

    def _script(self, host: Host, *args: str, timeout: float = 300) -> subprocess.Popen:
        opts = f"-Dspark.worker.timeout={self.worker_timeout}"
        env = dict(os.environ, SPARK_HOME=str(self.spark_home), SPARK_LOCAL_IP=host.addr,
                   SPARK_MASTER_OPTS=opts, SPARK_WORKER_OPTS=opts)
        return subprocess.Popen(host.exec(str(ROOT / "scripts" / "spark-standalone.sh"), *args),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    @staticmethod
    def _done(p: subprocess.Popen, timeout: float = 300) -> str:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        assert p.returncode == 0, f"{' '.join(p.args)}:\n{err}"
        return out

    def host_dir(self, host: Host) -> Path:
        """The directory of the Worker daemons of `host` (their logs, work dirs, pid files)."""
        return self.dir / host.ns

    def start(self, workers: list[Host], cores: int, memory: str) -> HostsCluster:
        out = self._done(self._script(self.master, "start", str(self.dir / "master"), "0"))
        self.url = re.search(r"^SPARK_MASTER_URL=(.*)$", out, re.M).group(1)
        port = re.search(r"^SPARK_MASTER_WEBUI=.*:(\d+)/?$", out, re.M).group(1)
        self.webui = f"http://{self.master.addr}:{port}"
        # The Workers start together (each in a directory of its own host).
        starting = [self._add_worker(h, cores, memory) for h in workers]
        for h, p in zip(workers, starting):
            self._done(p)
        return self

    def _add_worker(self, host: Host, cores: int, memory: str) -> subprocess.Popen:
        d = self.host_dir(host)
        d.mkdir(parents=True, exist_ok=True)
        (d / "master.url").write_text(self.url + "\n")
        self.hosts.append(host)
        return self._script(host, "add-worker", str(d), str(cores), memory)

    def add_worker(self, host: Host, cores: int, memory: str) -> None:
        """Starts a Worker daemon on `host`; returns once it has registered."""
        self._done(self._add_worker(host, cores, memory))

    def stop(self) -> None:
        stopping = [self._script(self.master, "stop", str(self.host_dir(h))) for h in {h.ns: h for h in self.hosts}.values()]
        for p in stopping:
            self._done(p)
        self._done(self._script(self.master, "stop", str(self.dir / "master")))

    def status(self) -> dict:
        """The master's web UI JSON (workers, their state and hosts)."""
        return json.loads(self.master.get(self.webui + "/json/"))

    def alive_hosts(self) -> list[str]:
        """The addresses of the Workers the master counts as alive."""
        return sorted(w["host"] for w in self.status()["workers"] if w["state"] == "ALIVE")

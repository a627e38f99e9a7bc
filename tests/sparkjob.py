"""What the end-to-end tests share: the repository's paths and versions, a Spark standalone
cluster (scripts/spark-standalone.sh), spark-submit with Warren's jars and quiet logs, the
example's printed results, and the processes of a running Spark application."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import testbuild

ROOT = Path(__file__).resolve().parent.parent
QUIET_LOG4J = ROOT / "spark-examples" / "conf" / "log4j2-quiet.properties"
DEMO_HASH_FILE = ROOT / "spark-examples" / "demo-model-hash.txt"
EXAMPLE_CLASS = "io.warren.examples.LogisticRegression"
RECORDIO_CLASS = "io.warren.examples.RecordIOTraining"


def pom_properties() -> dict[str, str]:
    """The project version and the properties of jvm/pom.xml (the parent pom)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(ROOT / "jvm" / "pom.xml").getroot()
    props = {el.tag.split("}")[1]: (el.text or "").strip() for el in pom.find("m:properties", ns)}
    props["project.version"] = pom.find("m:version", ns).text.strip()
    return props


VERSION = pom_properties()["project.version"]
CORE_JAR = ROOT / "jvm" / "warren-core" / "target" / f"warren-core-{VERSION}.jar"
RUNNER_JAR = ROOT / "jvm" / "warren-runner" / "target" / f"warren-runner-{VERSION}.jar"
SCALA_JAR = ROOT / "jvm" / "warren-scala" / "target" / f"warren-scala_2.13-{VERSION}.jar"
SPARK_JAR = ROOT / "jvm" / "warren-spark" / "target" / f"warren-spark_2.13-{VERSION}.jar"
EXAMPLES_JAR = ROOT / "spark-examples" / "target" / f"warren-spark-examples_2.13-{VERSION}.jar"


def built_jars() -> list[Path]:
    """Warren's library jars (core, runner, Scala, Spark) and the examples' jar; fails naming the
    first missing one."""
    jars = [CORE_JAR, RUNNER_JAR, SCALA_JAR, SPARK_JAR, EXAMPLES_JAR]
    for jar in jars:
        assert jar.is_file(), f"{jar} is missing: build the JVM modules first (make jvm)"
    return jars


def core_jar_with_etcd(out_dir: Path) -> Path:
    """warren-core's jar with the JNI library that has the etcd store (the release library
    `make jvm` bundles has none; docker/Dockerfile builds it so), its library swapped into a copy
    of the jar. The library is the workspace's test build (testbuild.py, the test profile):
    the release library in target/release stays as it is."""
    lib = testbuild.jni_library()
    with_etcd = lib.read_bytes()
    entry = f"io/warren/native/{pom_properties()['warren.native.platform']}/libwarren_jni.so"
    jar = out_dir / CORE_JAR.name
    with zipfile.ZipFile(CORE_JAR) as src, zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as dst:
        assert entry in src.namelist(), f"{CORE_JAR} bundles no {entry}"
        for item in src.infolist():
            dst.writestr(item, with_etcd if item.filename == entry else src.read(item))
    return jar


def spark_home() -> Path:
    """SPARK_HOME of the Spark that scripts/setup-spark.sh installs (installing it once)."""
    out = subprocess.run(
        [str(ROOT / "scripts" / "setup-spark.sh")], check=True, capture_output=True, text=True, timeout=900
    ).stdout
    return Path(re.search(r"^SPARK_HOME=(.*)$", out, re.M).group(1))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_job() -> tuple[list[str], str]:
    """The demo's job arguments and the MODEL_HASH of that job without failures, as recorded in
    spark-examples/demo-model-hash.txt."""
    fields = {}
    for line in DEMO_HASH_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(" ")
            fields[key] = value.strip()
    return fields["args"].split(), fields["hash"]


@dataclass
class Cluster:
    """A standalone cluster started by scripts/spark-standalone.sh under `dir`."""

    dir: Path
    spark_home: Path
    url: str = ""
    webui: str = ""

    def _script(self, *args: str, timeout: float = 300) -> str:
        env = dict(os.environ, SPARK_HOME=str(self.spark_home), SPARK_LOCAL_IP="127.0.0.1")
        return subprocess.run(
            [str(ROOT / "scripts" / "spark-standalone.sh"), *args],
            check=True, capture_output=True, text=True, env=env, timeout=timeout,
        ).stdout

    def start(self, workers: int, cores: int, memory: str) -> Cluster:
        out = self._script("start", str(self.dir), str(workers), str(cores), memory)
        self.url = re.search(r"^SPARK_MASTER_URL=(.*)$", out, re.M).group(1)
        self.webui = re.search(r"^SPARK_MASTER_WEBUI=(.*)$", out, re.M).group(1)
        return self

    def add_worker(self, cores: int, memory: str) -> None:
        self._script("add-worker", str(self.dir), str(cores), memory)

    def stop(self) -> None:
        self._script("stop", str(self.dir))

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its web UI's JSON)."""
        with urllib.request.urlopen(self.webui.replace("localhost", "127.0.0.1") + "/json/", timeout=10) as r:
            return int(json.load(r)["aliveworkers"])

    def worker_pids(self) -> list[int]:
        return [int(p.read_text()) for p in sorted(self.dir.glob("worker-*.pid"))]


@dataclass
class Result:
    """What the logistic-regression example prints at its end."""

    losses: list[float]
    accuracy: float
    recoveries: int
    model_hash: str

    @staticmethod
    def parse(stdout: str) -> Result:
        def one(key: str) -> str:
            m = re.search(rf"^{key} (\S+)$", stdout, re.M)
            assert m, f"no {key} line in the job's output:\n{stdout[-3000:]}"
            return m.group(1)

        losses = [float(x) for x in re.findall(r"^iter +\d+ loss (\S+)$", stdout, re.M)]
        return Result(losses, float(one("ACCURACY")), int(one("RECOVERIES")), one("MODEL_HASH"))


@dataclass
class Job:
    """A running spark-submit: its output goes to files under `log_dir`."""

    proc: subprocess.Popen
    log_dir: Path
    ui_port: int | None
    started: float = field(default_factory=time.monotonic)
    # The simulated host (simhosts.Host) the driver runs on; None: this host's loopback.
    host: object = None

    @property
    def stdout(self) -> str:
        return (self.log_dir / "stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        """The driver's console: Warren's log lines (Spark's own go to spark.log)."""
        return (self.log_dir / "stderr").read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float, after: int = 0) -> re.Match:
        """The first match of `pattern` in the driver's console past offset `after`; fails
        after `timeout` seconds or when the job ends without it."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.compile(pattern, re.M).search(self.stderr, after)
            if m:
                return m
            assert self.proc.poll() is None, f"the job ended without /{pattern}/:\n{self.stderr[-4000:]}"
            assert time.monotonic() < deadline, f"no /{pattern}/ after {timeout} s:\n{self.stderr[-4000:]}"
            time.sleep(0.2)

    def finish(self, timeout: float) -> Result:
        """Waits for spark-submit to exit 0 and parses the example's result."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the job did not end in {timeout} s:\n{self.stderr[-4000:]}") from None
        assert code == 0, f"spark-submit exited {code}:\n{self.stderr[-4000:]}\nSpark's log: {self.log_dir / 'spark.log'}"
        return Result.parse(self.stdout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def rest(self, path: str):
        """GET /api/v1/<path> of the driver's web UI."""
        if self.host is not None:
            return json.loads(self.host.get(f"http://{self.host.addr}:{self.ui_port}/api/v1/{path}"))
        url = f"http://127.0.0.1:{self.ui_port}/api/v1/{path}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)

    def busy_executor_ids(self) -> list[str]:
        """Executors running a task now (the driver's REST API)."""
        app = self.rest("applications")[0]["id"]
        return [e["id"] for e in self.rest(f"applications/{app}/executors")
                if e["id"] != "driver" and e["isActive"] and e["activeTasks"] > 0]


def quiet_java_options(log_file: Path) -> str:
    return f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} -Dwarren.spark.log={log_file}"


def submit(
    home: Path,
    master: str,
    app_args: list[str],
    log_dir: Path,
    *,
    conf: dict[str, str] | None = None,
    deploy_mode: str = "client",
    jars: list[Path] | None = None,
    extra: list[str] | None = None,
    ui: bool = False,
    main_class: str = EXAMPLE_CLASS,
    host=None,
) -> Job:
    """Starts `spark-submit` of an example (the logistic regression): Warren's jars by --jars
    (unless `jars` is [] and `extra` brings them another way), Spark's log in
    log_dir/spark.log, the console in log_dir/stdout and log_dir/stderr. With `host` (a
    simhosts.Host) the driver runs in that simulated host, on its address."""
    log_dir.mkdir(parents=True, exist_ok=True)
    ui_port = free_port() if ui else None
    settings = {
        "spark.ui.enabled": "true" if ui else "false",
        "spark.executor.extraJavaOptions": quiet_java_options(log_dir / "spark-executors.log"),
        "spark.warren.progressInterval": "0.5",
        **({"spark.ui.port": str(ui_port)} if ui else {}),
        **({"spark.driver.host": host.addr} if host is not None else {}),
        **(conf or {}),
    }
    if jars is None:
        jars = [j for j in built_jars() if j != EXAMPLES_JAR]
    cmd = [str(home / "bin" / "spark-submit"), "--master", master, "--deploy-mode", deploy_mode,
           "--driver-java-options", quiet_java_options(log_dir / "spark.log"), "--class", main_class]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    if jars:
        cmd += ["--jars", ",".join(str(j) for j in jars)]
    cmd += [*(extra or []), str(EXAMPLES_JAR), *app_args]
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1" if host is None else host.addr)
    if host is not None:
        cmd = host.exec(*cmd)
    (log_dir / "command").write_text(" ".join(cmd) + "\n")
    with open(log_dir / "stdout", "wb") as out, open(log_dir / "stderr", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=log_dir, start_new_session=True)
    return Job(proc, log_dir, ui_port, host=host)


def cmdline(pid: int) -> list[str]:
    """The command line of process `pid` ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (a PySpark executor: its JVM, the Python daemon and
    its workers), parents first."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                children.setdefault(parent_pid(int(proc.name)), []).append(int(proc.name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    tree, i = [pid], 0
    while i < len(tree):
        tree.extend(children.get(tree[i], []))
        i += 1
    return tree


def executor_pid(executor_id: str) -> int:
    """The pid of the executor JVM with this id (CoarseGrainedExecutorBackend --executor-id)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            args = cmdline(int(proc.name))
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and \
                    args[args.index("--executor-id") + 1] == executor_id:
                return int(proc.name)
    raise AssertionError(f"no executor JVM with id {executor_id}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]


def sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def etcd(tmp_path: Path):
    """A real etcd (Debian's etcd-server) on free loopback ports; yields `127.0.0.1:PORT`."""
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    log = open(tmp_path / "etcd.log", "wb")
    proc = subprocess.Popen(
        ["etcd", "--name", "e2e", "--data-dir", str(tmp_path / "etcd-data"), "--listen-client-urls", client,
         "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", f"e2e={peer}"],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, ETCD_UNSUPPORTED_ARCH=os.uname().machine),
    )
    endpoint = client.removeprefix("http://")
    try:
        deadline = time.monotonic() + 30
        # Healthy, not just listening: etcd accepts connections before it has elected itself.
        while True:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                    if json.load(r).get("health") == "true":
                        break
            except (OSError, ValueError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "etcd.log").read_text()
            time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def etcd_keys(endpoint: str, prefix: str) -> list[str]:
    """The keys under `prefix` (etcd's v3 JSON gateway)."""
    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = json.dumps({"key": b64(prefix), "range_end": b64(end), "keys_only": True}).encode()
    with urllib.request.urlopen(f"http://{endpoint}/v3/kv/range", data=body, timeout=10) as r:
        return [base64.b64decode(kv["key"]).decode() for kv in json.load(r).get("kvs", [])]

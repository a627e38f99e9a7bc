"""The Flink logistic-regression example on a real Flink standalone cluster: a JobManager and
three TaskManagers of one slot each, every one a JVM of its own (scripts/flink-standalone.sh,
Flink 2.3 from scripts/setup-flink.sh, Warren's jars in the cluster's lib/), the job submitted
with `bin/flink run`. Subtask 1's first attempt SIGKILLs its own TaskManager process at
iteration 8 (`--kill-taskmanager 8`); the test starts another TaskManager, Flink restarts that
subtask alone (region failover: forward edges only) in the new slot, Warren's retry-one
recovery slots it back in while the other workers wait in their collective call, and the job
ends with the failure-free model recorded for the demo (the Spark example's hash).

A TaskManager frozen with SIGSTOP (`--pause-taskmanager 8`): the tracker fences its worker
after warren.peerTimeout (5 s) and the others wait for the replacement, which Flink starts when
it gives the TaskManager up (the cluster's heartbeat.timeout, 30 s unless FLINK_HEARTBEAT_TIMEOUT_MS
says): nothing in a frozen process
can fail its subtask, and nothing outside the JobManager can. The test measures the time from
the pause to the restarted subtask running (`FENCE_FLINK_STANDALONE ...`, docs/benchmarks-flink.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from sparkjob import CORE_JAR, ROOT, RUNNER_JAR, VERSION, Result, alive, demo_job

FLINK_JAR = ROOT / "jvm" / "warren-flink" / "target" / f"warren-flink-{VERSION}.jar"
EXAMPLES_JAR = ROOT / "jvm" / "flink-examples" / "target" / f"warren-flink-examples-{VERSION}.jar"
EXAMPLE_CLASS = "io.warren.examples.flink.LogisticRegression"
SCRIPT = ROOT / "scripts" / "flink-standalone.sh"
TASKMANAGERS = 3


def script(*args: str, timeout: float = 300) -> str:
    return subprocess.run([str(SCRIPT), *args], check=True, capture_output=True, text=True, timeout=timeout).stdout


@pytest.fixture(scope="module")
def flink(tmp_path_factory) -> dict:
    """One standalone cluster for the module, stopped at its end (whatever happened)."""
    jars = [CORE_JAR, RUNNER_JAR, FLINK_JAR]
    for jar in [*jars, EXAMPLES_JAR]:
        assert jar.is_file(), f"{jar} is missing: build the JVM modules first (make jvm)"
    d = tmp_path_factory.mktemp("flink-standalone")
    try:
        out = script("start", str(d), str(TASKMANAGERS), "1", "--", *map(str, jars), timeout=400)
        info = dict(re.findall(r"^(FLINK_\w+)=(.*)$", out, re.M))
        info["dir"] = d
        yield info
    finally:
        script("stop", str(d), timeout=60)


def taskmanager_pids(d: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in sorted(d.glob("taskmanager-*.pid"))}


def flink_run(home: Path, out_dir: Path, args: list[str]) -> subprocess.Popen:
    """`bin/flink run` of the example with `args`, its output in out_dir/stdout and stderr."""
    env = dict(os.environ, FLINK_CONF_DIR=str(home / "conf"), FLINK_LOG_DIR=str(out_dir))
    with open(out_dir / "stdout", "w") as out, open(out_dir / "stderr", "w") as err:
        return subprocess.Popen(
            [str(home / "bin" / "flink"), "run", "-c", EXAMPLE_CLASS, str(EXAMPLES_JAR), *args],
            stdout=out, stderr=err, env=env)


def succeeded(job: subprocess.Popen, out_dir: Path) -> str:
    """The stdout of `job` once it exited 0 (within 400 s)."""
    code = job.wait(timeout=400)
    stdout = (out_dir / "stdout").read_text()
    assert code == 0, f"flink run exited {code}:\n{stdout[-3000:]}\n{(out_dir / 'stderr').read_text()[-4000:]}"
    return stdout


def ended(job: subprocess.Popen) -> None:
    """Kills `job` if it still runs."""
    if job.poll() is None:
        job.kill()
        job.wait(timeout=30)


def test_sigkill_a_taskmanager_then_a_new_one_recovers_the_failure_free_model(flink, tmp_path):
    d = flink["dir"]
    home = Path(flink["FLINK_HOME"])
    args, recorded = demo_job()
    before = taskmanager_pids(d)
    assert len(before) == TASKMANAGERS and all(alive(p) for p in before.values())
    job = flink_run(home, tmp_path, [*args, "--kill-taskmanager", "8", "--set", "warren.connectTimeout=180"])
    try:
        # The SIGKILL: one TaskManager process ends while the job runs.
        deadline = time.monotonic() + 240
        while all(alive(p) for p in before.values()):
            assert job.poll() is None, f"the job ended before a TaskManager died:\n{(tmp_path / 'stderr').read_text()[-4000:]}"
            assert time.monotonic() < deadline, "no TaskManager died in 240 s"
            time.sleep(0.2)
        dead = [name for name, p in before.items() if not alive(p)]
        assert len(dead) == 1, f"one TaskManager killed, not {dead}"
        # A new TaskManager gives the restarted subtask a slot.
        script("add-taskmanager", str(d), timeout=200)
        stdout = succeeded(job, tmp_path)
    finally:
        ended(job)
    r = Result.parse(stdout)
    assert r.model_hash == recorded, "the recovered model differs from the failure-free one"
    # Flink's own attempt numbers: only subtask 1 was restarted.
    assert re.search(r"^ATTEMPTS 0:0 1:1 2:0$", stdout, re.M), stdout[-2000:]
    assert r.recoveries >= 1
    log = "".join(p.read_text(errors="replace") for p in d.glob("jobmanager.log"))
    assert "warren-workers" in log and re.search(r"switched from RUNNING to FAILED", log), "the JobManager saw no failed task"


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal (state T)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except FileNotFoundError:
        return False


def rest(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)


def worker_subtask(base: str, job_id: str, index: int) -> dict:
    """Flink's current attempt of subtask `index` of the workers' vertex: attempt and status."""
    vertex = next(v for v in rest(base, f"/jobs/{job_id}")["vertices"] if "warren-workers" in v["name"])
    return rest(base, f"/jobs/{job_id}/vertices/{vertex['id']}/subtasks/{index}")


def test_sigstop_a_taskmanager_its_worker_is_fenced_and_flink_replaces_it(flink, tmp_path):
    d = flink["dir"]
    home = Path(flink["FLINK_HOME"])
    base = flink["FLINK_REST"]
    args, recorded = demo_job()
    # A spare TaskManager, started before the job, gives the restarted subtask a slot at once
    # (a TaskManager started after the pause could take longer to register than Flink's timeout).
    script("add-taskmanager", str(d), timeout=200)
    before = {n: p for n, p in taskmanager_pids(d).items() if alive(p)}
    assert len(before) >= TASKMANAGERS + 1, before
    job = flink_run(home, tmp_path, [*args, "--pause-taskmanager", "8", "--set", "warren.peerTimeout=5",
                                     "--set", "warren.connectTimeout=180"])
    paused = None
    try:
        deadline = time.monotonic() + 240
        while paused is None:
            assert job.poll() is None, f"the job ended before a TaskManager paused:\n{(tmp_path / 'stderr').read_text()[-4000:]}"
            assert time.monotonic() < deadline, "no TaskManager paused in 240 s"
            paused = next((p for p in before.values() if stopped(p)), None)
            time.sleep(0.05)
        t_paused, epoch_paused = time.monotonic(), time.time()
        job_id = re.search(r"JobID ([0-9a-f]{32})", (tmp_path / "stdout").read_text()).group(1)
        restarted = None
        while restarted is None:
            assert job.poll() is None or job.returncode == 0, (tmp_path / "stderr").read_text()[-4000:]
            assert time.monotonic() < t_paused + 200, "subtask 1 was not restarted within 200 s of the pause"
            s = worker_subtask(base, job_id, 1)
            if s["attempt"] >= 1 and s["status"] in ("RUNNING", "FINISHED"):
                restarted = time.monotonic()
            time.sleep(0.1)
        stdout = succeeded(job, tmp_path)
    finally:
        ended(job)
        if paused is not None:
            os.kill(paused, signal.SIGKILL)
    r = Result.parse(stdout)
    assert r.model_hash == recorded, "the recovered model differs from the failure-free one"
    assert re.search(r"^ATTEMPTS 0:0 1:1 2:0$", stdout, re.M), stdout[-2000:]
    exceptions = rest(base, f"/jobs/{job_id}/exceptions")
    history = json.dumps(exceptions)
    assert re.search(r"[Hh]eartbeat of TaskManager .* timed out", history), history[:3000]
    # When the JobManager gave the TaskManager up and failed the subtask.
    failed_at = min(e["timestamp"] for e in exceptions["exceptionHistory"]["entries"]) / 1000
    config = {e["key"]: e["value"] for e in rest(base, "/jobmanager/config")}
    flink_timeout_s = int(config.get("heartbeat.timeout", "50000")) / 1000
    took = restarted - t_paused
    print(f"FENCE_FLINK_STANDALONE peer_timeout_s=5 heartbeat_timeout_s={flink_timeout_s:g}"
          f" pause_to_flink_failure_s={failed_at - epoch_paused:.2f}"
          f" pause_to_restarted_s={took:.2f} ratio_to_heartbeat_timeout={took / flink_timeout_s:.2f}")

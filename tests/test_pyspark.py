"""warren.spark.train on a real Spark cluster (spark-submit of tests/pyspark_job/train.py on
local-cluster[3,1,1024]: three executor JVMs, each with its PySpark workers): the model of a
run without failures, the same model after the executor JVM of one task is SIGKILLed
mid-training (only that task re-run, recovering from its peers), and a call mismatch that
stops the job at once instead of letting Spark retry it.

Needs warren-core's and warren-runner's jars (make jvm, or `mvn -f jvm/pom.xml -pl
warren-core,warren-runner package -DskipTests`); installs the binding into the venv running
pytest, which is also the Python of the driver and of Spark's Python workers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sparkjob import CORE_JAR, QUIET_LOG4J, RUNNER_JAR, SCALA_JAR, SPARK_JAR, alive, cmdline, parent_pid, \
    process_tree, sigkill
from testbuild import python_with_binding

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "pyspark_job" / "train.py"
WORKERS, ITERS = 3, 30
# Hard limit on one job (a clean one takes about 30 s on a loaded 2-core machine, most of it
# Spark starting the driver, three executors and their Python workers).
LIMIT_S = 240


@pytest.fixture(scope="module")
def python() -> str:
    """The venv running pytest with the binding installed (`pip install ./`, the venv's
    maturin, the release target of `make jvm-native` reused): the driver's and the workers'
    Python. Fails naming the jars to build if the driver would lack them."""
    for jar in (CORE_JAR, RUNNER_JAR):
        assert jar.is_file(), f"{jar} is missing: build the JVM modules first (make jvm)"
    return python_with_binding()


class Run:
    """A spark-submit of train.py; its console in out_dir/stdout and out_dir/stderr, Spark's
    log in out_dir/spark.log, the workers' files in out_dir."""

    def __init__(self, spark: Path, python: str, out_dir: Path, jobs: str, sleep_s: float = 0.0,
                 conf: dict[str, str] | None = None, jars: tuple[Path, ...] = (CORE_JAR, RUNNER_JAR)):
        self.dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        # C1 only: the JVMs start faster, and these jobs are too short for C2 to pay off.
        quiet = (f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} -Dwarren.spark.log={out_dir / 'spark.log'}"
                 " -XX:TieredStopAtLevel=1")
        cmd = [str(spark / "bin" / "spark-submit"), "--master", f"local-cluster[{WORKERS},1,1024]",
               "--jars", ",".join(map(str, jars)), "--driver-java-options", quiet,
               "--conf", f"spark.executor.extraJavaOptions={quiet}", "--conf", "spark.ui.enabled=false",
               *[a for k, v in (conf or {}).items() for a in ("--conf", f"{k}={v}")],
               str(SCRIPT), str(out_dir), str(ITERS), str(sleep_s), jobs]
        env = dict(os.environ, SPARK_HOME=str(spark), SPARK_LOCAL_IP="127.0.0.1",
                   PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
        with open(out_dir / "stdout", "wb") as out, open(out_dir / "stderr", "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=out_dir, start_new_session=True)
        self.started = time.monotonic()

    def finish(self) -> Run:
        """Waits for spark-submit to end (killing it after LIMIT_S)."""
        try:
            self.proc.wait(timeout=max(1.0, LIMIT_S - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the job did not end in {LIMIT_S} s:\n{self.stderr[-4000:]}") from None
        self.ended = time.monotonic()
        self.seconds = self.ended - self.started
        return self

    def stop(self) -> None:
        """Kills the application's processes (its session: spark-submit, the driver, the
        executors) if it still runs; nothing once it ended."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    @property
    def stdout(self) -> str:
        return (self.dir / "stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self.dir / "stderr").read_text(errors="replace")

    def model_hash(self, job: int = 0) -> str:
        """The MODEL_HASH its `job`-th job that trained printed (from 0)."""
        code = self.proc.returncode
        assert code == 0, f"spark-submit exited {code}:\n{self.stdout}\n{self.stderr[-4000:]}"
        hashes = re.findall(r"^MODEL_HASH ([0-9a-f]{64})$", self.stdout, re.M)
        assert len(hashes) > job, f"no MODEL_HASH line of job {job}:\n{self.stdout}\n{self.stderr[-4000:]}"
        return hashes[job]

    def attempts(self, job: str = "clean") -> dict[int, list[int]]:
        """The attempt numbers of `job` that started, per task id (from the
        start-<task>-<attempt>-<pid> files the workers leave)."""
        found: dict[int, list[int]] = {}
        for f in (self.dir / job).glob("start-*"):
            _, task, attempt, _ = f.name.split("-")
            found.setdefault(int(task), []).append(int(attempt))
        return {t: sorted(a) for t, a in sorted(found.items())}

    def recoveries(self, rank: int, job: str = "clean") -> int:
        return int((self.dir / job / f"recoveries-{rank}").read_text())

    def await_progress(self, checkpoints: int, job: str = "clean") -> None:
        """Waits until rank 0 of `job` has committed `checkpoints` checkpoints."""
        progress = self.dir / job / "progress"
        while True:
            text = progress.read_text().strip() if progress.exists() else ""
            if text.isdigit() and int(text) >= checkpoints:
                return
            assert self.proc.poll() is None, f"the job ended before checkpoint {checkpoints}:\n{self.stderr[-4000:]}"
            assert time.monotonic() - self.started < LIMIT_S, f"no checkpoint {checkpoints} in {LIMIT_S} s"
            time.sleep(0.05)

    def executor_of(self, task: int, job: str = "clean") -> int:
        """The pid of the executor JVM running task `task`'s first attempt of `job`: the Python
        worker (its start file names it) is a child of PySpark's daemon, a child of the
        executor."""
        (start,) = (self.dir / job).glob(f"start-{task}-0-*")
        pid = int(start.name.split("-")[3])
        for _ in range(4):
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline(pid):
                return pid
            pid = parent_pid(pid)
        raise AssertionError(f"no executor JVM above task {task}'s Python worker {start.name}")


@pytest.fixture(scope="module")
def runs(spark, python, tmp_path_factory) -> dict[str, Run]:
    """Two applications side by side (each spends most of its time starting Spark): one runs
    a clean job, then a job with a call mismatch and one with an invalid setting; in the other
    (with warren-spark's jar, which brings the fence watch), task 1 loses its executor, and in
    its next job the executor of task 1 is frozen (SIGSTOP, with its Python workers, as a
    paused host is)."""
    base = tmp_path_factory.mktemp("pyspark")
    for jar in (SCALA_JAR, SPARK_JAR):
        assert jar.is_file(), f"{jar} is missing: build the JVM modules first (make jvm)"
    clean = Run(spark, python, base / "clean", "clean,mismatch,badsetting")
    # A pause per iteration, so that the faults land mid-training; a progress line a second.
    killed = Run(spark, python, base / "killed", "clean,paused", sleep_s=0.3,
                 conf={"spark.warren.progressInterval": "1"}, jars=(CORE_JAR, RUNNER_JAR, SCALA_JAR, SPARK_JAR))
    frozen: list[int] = []
    try:
        killed.await_progress(10)
        executor = killed.executor_of(1)
        sigkill(executor)
        killed.await_progress(10, "paused")
        frozen = process_tree(killed.executor_of(1, "paused"))
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        killed.frozen_at = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(Run.finish, [clean, killed]))
    finally:
        for run in (clean, killed):
            run.stop()
        for pid in frozen:  # what Spark did not kill stays stopped, outside any session's end
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not alive(executor)
    return dict(zip(["clean", "killed"], done))


def test_a_clean_run_trains_one_model_on_every_worker(runs):
    clean = runs["clean"]
    assert clean.model_hash()
    assert clean.attempts() == {0: [0], 1: [0], 2: [0]}, "one attempt per task"
    assert all(clean.recoveries(r) == 0 for r in range(WORKERS))


def test_a_lost_executor_re_runs_only_its_task_which_recovers_the_same_model(runs):
    clean, killed = runs["clean"], runs["killed"]
    assert killed.model_hash() == clean.model_hash(), "the model of the run without the failure"
    assert killed.attempts() == {0: [0], 1: [0, 1], 2: [0]}, "only the lost task re-ran, once"
    assert all(killed.recoveries(r) >= 1 for r in (0, 2)), "the survivors served a recovery"
    assert "tracker: task 1 (rank 1) registered again (attempt 1)" in killed.stderr, killed.stderr[-4000:]


def test_a_frozen_executor_is_fenced_and_its_task_re_run_without_waiting_for_spark(runs):
    clean, killed = runs["clean"], runs["killed"]
    assert killed.model_hash(1) == clean.model_hash(), "the model of the run without the failure"
    assert killed.attempts("paused") == {0: [0], 1: [0, 1], 2: [0]}, "only the frozen task re-ran, once"
    assert all(killed.recoveries(r, "paused") >= 1 for r in (0, 2)), "the survivors served a recovery"
    log = killed.stderr
    assert "the tracker fenced the worker of partition 1, attempt 0" in log, log[-4000:]
    assert "killing and replacing it" in log, "the frozen executor was given up: " + log[-4000:]
    # Spark alone would wait spark.network.timeout (120 s) for the frozen executor.
    assert killed.ended - killed.frozen_at < 100, f"{killed.ended - killed.frozen_at:.0f} s after the freeze"


def test_rank_0_sends_progress_lines_to_the_driver_log(runs):
    clean, killed = runs["clean"], runs["killed"]
    lines = re.findall(r"\[rank 0\] (progress|finished): job 1, checkpoint version (\d+), recoveries (\d+), "
                       r"[0-9.]+ s; (.*)$", killed.stderr, re.M)
    assert [l for l in lines if l[0] == "progress"], "a line a second while it trained: " + killed.stderr[-4000:]
    assert lines[-1][:2] == ("finished", str(ITERS)) and int(lines[-1][2]) >= 1, lines
    assert "allreduce(tree): n=" in lines[-1][3] and "checkpoint: n=" in lines[-1][3], lines[-1]
    # The default interval (10 s) is longer than the clean job: its last line alone.
    assert [l[:2] for l in re.findall(r"\[rank 0\] (progress|finished): job (\d+)", clean.stderr)] == [("finished", "1")]


def test_a_call_mismatch_stops_the_job_at_once_without_retries(runs):
    run = runs["clean"]
    assert run.proc.returncode == 0, run.stderr[-4000:]
    assert "WARREN_SPARK_ERROR Warren job of 3 workers (retry-one) failed with an error that cannot succeed" \
        " on retry, and the job was stopped" in run.stdout, run.stdout
    assert "collective call mismatch" in run.stdout, run.stdout
    # Stopped, not retried to spark.task.maxFailures: no task ran a third time.
    attempts = run.attempts("mismatch")
    assert sorted(attempts) == [0, 1, 2] and all(max(a) <= 1 for a in attempts.values()), attempts


def test_an_invalid_setting_fails_on_the_driver_naming_it(runs):
    run = runs["clean"]
    errors = [l for l in run.stdout.splitlines() if l.startswith("WARREN_SPARK_ERROR ")]
    line = next((l for l in errors if "spark.warren.timeout" in l), None)
    assert line is not None, run.stdout
    assert 'spark.warren.timeout = "ten": expected a number of seconds > 0 and <= 86400' in line, line
    assert not list((run.dir / "badsetting").glob("start-*")), "no task started"


NOTEBOOK = ROOT / "notebooks" / "warren-pyspark.ipynb"


def test_the_python_notebook_trains_through_a_lost_task(spark, python, monkeypatch):
    """notebooks/warren-pyspark.ipynb run headless (nbclient, the venv's python3 kernel) on
    local-cluster[3,1,1024]: task 1's Python worker killed at iteration 8, re-run alone, the
    model the same as without the failure."""
    import nbformat
    from nbclient import NotebookClient

    # pyspark and py4j as spark-submit puts them on a Python's path.
    lib = spark / "python" / "lib"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lib / "pyspark.zip"), str(next(lib.glob("py4j-*.zip")))]))
    monkeypatch.setenv("SPARK_HOME", str(spark))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", python)
    monkeypatch.setenv("WARREN_JARS", f"{CORE_JAR},{RUNNER_JAR}")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=LIMIT_S, startup_timeout=60).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                     if o.output_type == "stream" and o.name == "stdout")
    assert "on local-cluster[3,1,1024]" in text, text
    assert "task 1: attempt 1, recoveries" in text, "task 1 was re-run: " + text
    assert "task 0: attempt 0, recoveries 1" in text and "task 2: attempt 0, recoveries 1" in text, text
    assert "same model: True" in text, text
    losses = [float(m) for m in re.findall(r"^\s+\d+  (\d+\.\d+)$", text, re.M)]
    assert len(losses) == 20 and losses[-1] < losses[0], text
    # The session is interactive (a SparkSession.builder sets spark.ui.showConsoleProgress):
    # the tracker's lines are shown in the cells, from Python.
    shown = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                      if o.output_type == "stream" and o.name == "stderr")
    assert "[warren] tracker: task 1 (rank 1) registered again (attempt 1)" in shown, shown[-4000:]
    # Only warren-core's and warren-runner's jars: no fence watch, said once.
    assert shown.count("warren-spark's jar is not on the driver's class path") == 1, shown[-4000:]
    assert re.search(r"^\[warren\] \[rank 0\] finished: job 2, checkpoint version 20, recoveries 1", shown, re.M), \
        shown[-4000:]

"""The Python binding (pyproject.toml, native/warren-py, python/warren): built and installed
into this venv once, then real `warren run -n 3` jobs of tests/python_binding/train.py, a
worker lost by failure injection and by SIGKILL, bad arrays and a call mismatch."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from testbuild import python_with_binding, warren_command

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "python_binding" / "train.py"
WORKERS, ITERS, DIM = 3, 30, 1000
# Hard limit on one job (a clean one takes well under a second).
LIMIT_S = 120


@pytest.fixture(scope="session")
def binding() -> str:
    """The venv running pytest with the binding installed, and the `warren` command built
    (the test build's): see testbuild.py."""
    warren_command()
    return python_with_binding()


class Job:
    """A finished `warren run` of train.py: its output and the files its workers left."""

    def __init__(self, out_dir: Path, proc: subprocess.CompletedProcess):
        self.dir, self.stdout, self.stderr = out_dir, proc.stdout, proc.stderr
        line = next(l for l in self.stdout.splitlines() if l.startswith("WARREN_RUN_SUMMARY "))
        self.summary = json.loads(line.split(" ", 1)[1])

    def ok(self) -> bool:
        return self.summary["status"] == "ok"

    def hashes(self) -> set[str]:
        return {l.split()[1] for l in self.stdout.splitlines() if l.startswith("MODEL_HASH ")}

    def model(self, rank: int) -> np.ndarray:
        return np.frombuffer((self.dir / f"model-{rank}").read_bytes(), dtype=np.float64)

    def recoveries(self, rank: int) -> int:
        return int((self.dir / f"recoveries-{rank}").read_text())

    def starts(self) -> dict[str, int]:
        """Processes started per task id (1: never re-run)."""
        counts: dict[str, int] = {}
        for f in self.dir.glob("start-*"):
            task = f.name.split("-")[1]
            counts[task] = counts.get(task, 0) + 1
        return counts


def run(python: str, out_dir: Path, env: dict[str, str] | None = None, kill_task: str | None = None) -> Job:
    """`warren run -n 3 -- python train.py` with `env`; `kill_task`: SIGKILL that task's
    python process once rank 0 has committed 10 checkpoints."""
    out_dir.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ, TRAIN_DIR=str(out_dir), TRAIN_ITERS=str(ITERS), TRAIN_DIM=str(DIM), **(env or {}))
    cmd = [str(warren_command()), "run", "-n", str(WORKERS), "--max-restarts", "3", "--", python, str(SCRIPT)]
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill_task is not None:
            kill_when_progressed(out_dir, kill_task, proc)
        stdout, stderr = proc.communicate(timeout=LIMIT_S)
    finally:
        if proc.poll() is None:
            subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
            proc.kill()
    return Job(out_dir, subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr))


def kill_when_progressed(out_dir: Path, task: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + LIMIT_S
    progress = out_dir / "progress"
    while not (progress.exists() and progress.read_text().strip() in {str(i) for i in range(10, ITERS + 1)}):
        assert proc.poll() is None, "the job ended before the kill"
        assert time.monotonic() < deadline, "rank 0 made no progress"
        time.sleep(0.01)
    (start,) = out_dir.glob(f"start-{task}-*")
    os.kill(int(start.name.split("-")[2]), signal.SIGKILL)


def expected_model() -> np.ndarray:
    """The model train.py computes, in plain numpy on one process."""
    sys.path.insert(0, str(SCRIPT.parent))
    os.environ["TRAIN_DIM"] = str(DIM)
    import train  # noqa: E402 (train.py itself, for its gradient)

    w = np.zeros(DIM)
    for it in range(ITERS):
        g = sum(train.gradient(rank, it, w) for rank in range(WORKERS))
        w -= 0.1 * g / WORKERS
    return w


@pytest.fixture(scope="module")
def clean(binding, tmp_path_factory) -> Job:
    job = run(binding, tmp_path_factory.mktemp("clean"))
    assert job.ok(), job.stderr
    return job


def test_allreduce_of_numpy_arrays_trains_the_model_numpy_computes(clean):
    assert len(clean.hashes()) == 1, f"every rank ends with the same model: {clean.stdout}"
    assert clean.starts() == {"0": 1, "1": 1, "2": 1}
    for rank in range(WORKERS):
        np.testing.assert_allclose(clean.model(rank), expected_model(), rtol=1e-12, atol=1e-12)
    assert clean.hashes() == {hashlib.sha256(clean.model(0).tobytes()).hexdigest()}


def assert_only_task_1_re_ran(job: Job, clean: Job) -> None:
    assert job.ok(), job.stderr
    assert job.hashes() == clean.hashes(), "the failure-free model"
    assert job.summary["restarts"] == 1, job.summary
    assert job.starts() == {"0": 1, "1": 2, "2": 1}, "only the lost worker re-ran"
    survivors = [r for r in range(WORKERS) if r != 1]
    assert all(job.recoveries(r) >= 1 for r in survivors), "the survivors served a recovery"


def test_a_worker_lost_by_failure_injection_is_re_run_alone_with_the_same_model(binding, clean, tmp_path):
    # Rank 1 (task 1: ranks follow task ids) exits at the first call after checkpoint 10.
    job = run(binding, tmp_path, env={"WARREN_MOCK": "1,10,0,0"})
    assert_only_task_1_re_ran(job, clean)


def test_a_sigkilled_python_worker_is_re_run_alone_with_the_same_model(binding, clean, tmp_path):
    job = run(binding, tmp_path, env={"TRAIN_SLEEP_S": "0.05"}, kill_task="1")
    assert_only_task_1_re_ran(job, clean)


def test_bad_arrays_raise_a_clear_python_error_and_the_job_goes_on(binding, clean, tmp_path):
    job = run(binding, tmp_path, env={"TRAIN_BAD_INPUT": "1"})
    assert job.ok(), job.stderr
    assert job.hashes() == clean.hashes()
    lines = [l for l in job.stdout.splitlines() if l.startswith("BAD_INPUT ")]
    assert len(lines) == 2 * WORKERS, job.stdout
    read_only = [l for l in lines if l.startswith("BAD_INPUT read-only ")]
    wrong_type = [l for l in lines if l.startswith("BAD_INPUT float16 ")]
    assert all("ValueError: allreduce works in place and needs a writable array" in l and "a.copy()" in l
               for l in read_only), read_only
    assert all("TypeError: allreduce cannot reduce an array of dtype float16" in l and "float64" in l
               for l in wrong_type), wrong_type


def test_a_call_mismatch_raises_call_mismatch_error_and_stops_the_job_without_re_runs(binding, tmp_path):
    job = run(binding, tmp_path, env={"TRAIN_MISMATCH": "1"})
    assert not job.ok()
    assert job.summary["restarts"] == 0, "a final error is not retried"
    assert "warren.CallMismatchError: collective call mismatch: rank 0 called allreduce" in job.stderr, job.stderr
    assert "8000 bytes f64 sum but rank 1 called allreduce(tree) #0 of version 2, 8008 bytes" in job.stderr


def python(binding: str, code: str) -> subprocess.CompletedProcess:
    """`code` run by the venv's python as a world of one (no tracker), with a time limit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_")}
    return subprocess.run([binding, "-c", code], env=env, capture_output=True, text=True, timeout=LIMIT_S)


def test_an_uncaught_warren_error_sets_the_exit_status_warren_run_reads(binding):
    # Final (a bad setting): 3, so that `warren run` stops the job instead of re-running it.
    bad = python(binding, "import warren\nwarren.Communicator(no_such_setting='1')")
    assert bad.returncode == 3, bad.stderr
    assert "warren.ConfigError: configuration error: " in bad.stderr, bad.stderr
    assert "WARREN_NO_SUCH_SETTING" in bad.stderr
    # Not final (a call after finalize): Python's 1, so that `warren run` re-runs the worker.
    closed = python(binding, "import warren\nc = warren.Communicator()\nc.finalize()\nc.barrier()")
    assert closed.returncode == 1, closed.stderr
    assert "warren.ClosedError: the communicator is finalized" in closed.stderr


def test_calls_work_on_the_callers_arrays_without_a_copy(binding):
    code = """
import numpy as np, warren
with warren.Communicator() as c:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    address = a.ctypes.data
    assert c.allreduce(a, op="max") is a and a.ctypes.data == address
    b = np.full(5, 2.5, dtype=np.float32)
    assert c.broadcast(b, 0) is b and b.ctypes.data == b.__array_interface__["data"][0]
    assert c.broadcast(b"model", root=0) == b"model"
    assert c.allgather(b"mine") == [b"mine"]
    c.barrier()
    for bad, kind in [(np.arange(6.0)[::2], ValueError), ([1.0, 2.0], TypeError)]:
        try:
            c.allreduce(bad)
            raise SystemExit("accepted")
        except kind as e:
            print(type(e).__name__, e)
    try:
        c.allreduce(np.zeros(3), op="avg")
    except ValueError as e:
        print("ValueError", e)
print("DONE")
"""
    r = python(binding, code)
    assert r.returncode == 0, r.stderr
    assert "ValueError allreduce works in place and needs a C-contiguous array" in r.stdout
    assert "TypeError allreduce works in place on a numpy.ndarray, got list" in r.stdout
    assert "ValueError unknown reduction op \"avg\": use one of sum, prod, min, max" in r.stdout
    assert r.stdout.strip().endswith("DONE")

"""Resize latency, Warren against torchrun elastic, in one run (docs/benchmarks.md).

Both run a tiny data-parallel loop on 127.0.0.1 whose rank 0 prints `STEP <it> <world>
<unix time>` once a step's gradient allreduce (the model's size) is done:

- Warren: `warren run --min-workers 3 --max-workers 5 --rejoin-timeout R --max-restarts 1 --
  warren example train --elastic --timeline` (an in-memory checkpoint every step);
- torch: one `torchrun --nnodes=1:5 --nproc-per-node=1 --rdzv-backend=c10d` agent per worker
  (bench/resize/torch_train.py, gloo; rank 0 saves the model every step and a restarted job
  loads it and broadcasts it, torch elastic's recipe).

Each job grows to 4 workers, then is measured on these changes:
- **add** (4 -> 5): from the moment the change is asked for (`warren ctl add 4`, which makes
  `warren run` start the worker; for torch, starting the fifth agent) to the first step done
  with 5 workers;
- **restart** (Warren, 5 -> 5): from SIGKILL of one worker, right after a step, to the next
  step done, the worker re-run by `warren run` and recovered from its peers (retry-one);
- **lost** (5 -> 4): from SIGKILL of one worker (Warren: the worker process, with no restart
  left; torch: a whole agent, i.e. a node) to the first step done with 4 workers. Warren's
  time includes the rejoin timeout R it waits for a replacement before going on without it;
- **remove** (Warren, 4 -> 3): from `warren ctl remove 4` to the first step done with 3.
torchrun has no retry-one nor graceful remove: its columns are empty there.

Prints one JSON line per measurement and a summary (medians, torch/Warren ratios).
Reproduce: make bench-resize
"""

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SECRET = "resize-bench-secret"


class Lines:
    """Collects the STEP lines (and everything else) of some processes' pipes."""

    def __init__(self):
        self.q = queue.Queue()
        self.log = []

    def follow(self, pipe, tag):
        def run():
            for raw in iter(pipe.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                self.log.append(f"[{tag}] {line}")
                self.q.put(line)
        threading.Thread(target=run, daemon=True).start()

    def wait_step(self, world, after, timeout, count=1):
        """Time of the `count`-th step done with `world` workers after `after` (unix s)."""
        until = time.time() + timeout
        seen = 0
        while True:
            left = until - time.time()
            if left <= 0:
                fd, path = tempfile.mkstemp(prefix="resize-bench-", suffix=".log")
                with os.fdopen(fd, "w") as f:
                    f.write("\n".join(self.log) + "\n")
                raise TimeoutError(f"no step with {world} workers within {timeout} s; every line in {path}")
            try:
                line = self.q.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            m = re.match(r"STEP (\d+) (\d+) ([\d.]+)$", line)
            if m and int(m.group(2)) == world and float(m.group(3)) > after:
                seen += 1
                if seen == count:
                    return float(m.group(3))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs):
    for p in procs:
        for pid in tree(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def tree(pid):
    """`pid` and all its descendants."""
    out = [pid]
    for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split():
        out += tree(int(child))
    return out


def warren_children(run_pid):
    """task id -> pid of the workers `warren run` started."""
    out = {}
    for child in subprocess.run(["pgrep", "-P", str(run_pid)], capture_output=True, text=True).stdout.split():
        try:
            env = open(f"/proc/{child}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"WARREN_TASK_ID="):
                out[kv.split(b"=", 1)[1].decode()] = int(child)
    return out


def warren_job(a, w=None):
    w = w or a.warren
    env = dict(os.environ, WARREN_JOB_SECRET=SECRET, WARREN_LOG=os.environ.get("WARREN_LOG", "info"), WARREN_CONNECT_TIMEOUT_S="120")
    cmd = [w, "run", "--min-workers", "3", "--max-workers", "5", "--rejoin-timeout", str(a.rejoin_timeout),
           "--max-restarts", "1", "--", w, "example", "train", "--elastic", "--timeline", "--iters", "1000000",
           "--model-bytes", str(a.model_bytes), "--compute-ms", str(a.compute_ms)]
    run = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    lines = Lines()
    lines.follow(run.stdout, "out")
    uri = []

    def tracker_uri():
        for raw in iter(run.stderr.readline, b""):
            line = raw.decode(errors="replace")
            m = re.search(r"tracker: listening on (\S+)", line)
            if m and not uri:
                uri.append(m.group(1))
            lines.log.append("[log] " + line.rstrip("\n"))
    threading.Thread(target=tracker_uri, daemon=True).start()

    def ctl(*args):
        r = subprocess.run([w, "ctl", "--tracker", uri[0], *args], env=env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"warren ctl {args}: {r.stderr}")

    try:
        lines.wait_step(3, 0, 120, count=3)
        ctl("add", "3")
        lines.wait_step(4, 0, 120, count=3)
        t0 = time.time()
        lines.log.append(f"[bench] {time.strftime('%H:%M:%S', time.localtime(t0))}.{int(t0 % 1 * 1000):03d} ctl add 4")
        ctl("add", "4")
        add = lines.wait_step(5, t0, 120) - t0
        lines.wait_step(5, 0, 120, count=3)
        pid = warren_children(run.pid)["2"]
        t0 = time.time()
        os.kill(pid, signal.SIGKILL)
        restart = lines.wait_step(5, t0, 120) - t0
        lines.wait_step(5, 0, 120, count=3)
        pid = warren_children(run.pid)["1"]
        t0 = time.time()
        os.kill(pid, signal.SIGKILL)  # no restart left: dropped after the rejoin timeout
        lost = lines.wait_step(4, t0, 120) - t0
        lines.wait_step(4, 0, 120, count=3)
        t0 = time.time()
        ctl("remove", "4")
        remove = lines.wait_step(3, t0, 120) - t0
        return {"add": add, "restart": restart, "lost": lost, "remove": remove}
    finally:
        stop([run])
        if a.log_dir:
            os.makedirs(a.log_dir, exist_ok=True)
            with open(os.path.join(a.log_dir, f"warren-{time.time():.0f}.log"), "w") as f:
                f.write("\n".join(lines.log) + "\n")


def torch_job(a):
    torchrun = os.path.join(HERE, ".venv", "bin", "torchrun")
    ckdir = tempfile.mkdtemp(prefix="resize-torch-")
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
               PYTHONUNBUFFERED="1")
    lines = Lines()
    agents = []

    def agent(i):
        cmd = [torchrun, "--nnodes=1:5", "--nproc-per-node=1", "--rdzv-backend=c10d",
               f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=resize-bench", "--local-addr=127.0.0.1",
               *([f"--rdzv-conf=last_call_timeout={a.last_call}"] if a.last_call else []), "--max-restarts=50",
               os.path.join(HERE, "torch_train.py"),
               "--model-bytes", str(a.model_bytes), "--compute-ms", str(a.compute_ms),
               "--ckpt", os.path.join(ckdir, "model.pt")]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        lines.follow(p.stdout, f"agent{i}")
        agents.append(p)

    try:
        agent(0)  # the first agent hosts the c10d store; it is never the one killed
        time.sleep(1)
        for i in range(1, 4):
            agent(i)
        lines.wait_step(4, 0, 180, count=3)
        t0 = time.time()
        agent(4)
        add = lines.wait_step(5, t0, 180) - t0
        lines.wait_step(5, 0, 180, count=3)
        t0 = time.time()
        for pid in tree(agents[2].pid):  # the agent and its worker (in a session of its own)
            os.kill(pid, signal.SIGKILL)
        lost = lines.wait_step(4, t0, 180) - t0
        return {"add": add, "lost": lost}
    finally:
        stop(agents)
        shutil.rmtree(ckdir, ignore_errors=True)


def load():
    return os.getloadavg()[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--warren", default=os.path.join(ROOT, "target", "release", "warren"))
    p.add_argument("--model-bytes", type=int, default=64 << 20)
    p.add_argument("--compute-ms", type=int, default=0)
    p.add_argument("--rejoin-timeout", type=float, default=1.0)
    p.add_argument("--last-call", type=int, default=1, help="torch's rendezvous last_call_timeout (s)")
    p.add_argument("--baseline", help="another warren binary (an older build) run the same way, alternating, "
                   "as a reference measured in the same run")
    p.add_argument("--log-dir", help="keep each Warren job's log lines (stdout, stderr) there")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--impls", default="warren,torch", help="which to run (both for ratios)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                 time.strftime("resize-%Y%m%dT%H%M%SZ.jsonl", time.gmtime())))
    a = p.parse_args()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    changes = ("add", "restart", "lost", "remove")
    res = {(n, c): [] for n in ("warren", "torch", "baseline") for c in changes}
    jobs = [("warren", warren_job), ("torch", torch_job)]
    if a.baseline:
        jobs.append(("baseline", lambda a: warren_job(a, a.baseline)))
    load_before = load()
    with open(a.out, "a") as out:
        for i in range(a.repeat):
            for name, job in jobs:
                if name not in a.impls.split(",") and not (name == "baseline" and a.baseline):
                    continue
                l0 = load()
                took = job(a)
                rec = {"bench": "resize", "impl": name, "rep": i, "model_bytes": a.model_bytes,
                       **{f"{c}_s": round(v, 3) for c, v in took.items()},
                       "load1_before": l0, "load1_after": load(), "nice": os.nice(0)}
                if name == "baseline":
                    rec["warren"] = a.baseline
                if name in ("warren", "baseline"):
                    rec["rejoin_timeout_s"] = a.rejoin_timeout
                else:
                    rec["last_call_timeout_s"] = a.last_call
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
                for c, v in took.items():
                    res[(name, c)].append(v)
    med = {k: statistics.median(v) for k, v in res.items() if v}
    summary = {"bench": "resize_summary", "repeat": a.repeat, "load1_before": load_before, "load1_after": load(),
               **{f"{k[0]}_{k[1]}_median_s": round(v, 3) for k, v in med.items()}}
    with open(a.out, "a") as out:
        out.write(json.dumps(summary) + "\n")
    if a.baseline and ("warren", "add") in med:
        print(f"\nWarren against the baseline {a.baseline}, median of {a.repeat} (load {load_before:.1f} -> {load():.1f})")
        print("| change | Warren (s) | baseline (s) | baseline / Warren |")
        print("|---|---|---|---|")
        for change in changes:
            w, b = med[("warren", change)], med[("baseline", change)]
            print(f"| {change} | {w:.3f} | {b:.3f} | {b / w:.2f}x |")
    if ("torch", "add") not in med or ("warren", "add") not in med:
        return 0
    print(f"\nresize latency, median of {a.repeat} (model {a.model_bytes >> 20} MiB; load {load_before:.1f} -> {load():.1f})")
    print("| change | Warren (s) | torchrun (s) | torchrun / Warren |")
    print("|---|---|---|---|")
    for change, what in (("add", "add 1 worker to 4"), ("restart", "kill 1 of 5, re-run it"),
                         ("lost", "lose 1 worker of 5"), ("remove", "remove 1 of 4")):
        w, t = med[("warren", change)], med.get(("torch", change))
        if t is None:
            print(f"| {what} | {w:.2f} | - | - |")
        else:
            print(f"| {what} | {w:.2f} | {t:.2f} | {t / w:.1f}x |")


if __name__ == "__main__":
    sys.exit(main())

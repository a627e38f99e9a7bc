#!/usr/bin/env python3
"""Allreduce reference: XGBoost's collective (Rabit communicator over TCP).

    python3 bench/xgboost_allreduce.py -n N --bytes B --iters K [--dtype f32] [--op sum]

Starts an `xgboost.tracker.RabitTracker` on 127.0.0.1 in this process, launches N
worker processes (this script again, with --worker), each joins the communicator
with `xgboost.collective.CommunicatorContext(**tracker.worker_args())` and runs
float32-sum allreduce on a numpy array of B bytes. Rank 0 times every iteration;
the launcher prints rank 0's ONE JSON line (format: bench/benchstats.py).

--api inplace (default) calls the C entry point that `xgboost.collective.allreduce`
wraps (XGCommunicatorAllreduce) directly on the array, in place, like MPI.IN_PLACE.
--api python calls `xgboost.collective.allreduce(arr, Op.SUM)`, which also makes
a copy of the input array on every call (a Python-side memcpy of B bytes).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchstats  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--workers", type=int, default=2)
    p.add_argument("--bytes", type=int, default=4, help="bytes per rank (multiple of 4)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up iterations (default 5)")
    p.add_argument("--dtype", default="f32", choices=["f32"])
    p.add_argument("--op", default="sum", choices=["sum"])
    p.add_argument("--api", default="inplace", choices=["inplace", "python"])
    p.add_argument("--timeout", type=int, default=240, help="seconds before the workers are killed")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(args):
    import ctypes

    import numpy as np
    import xgboost
    from xgboost import collective
    from xgboost.core import _LIB, _check_call

    env = json.loads(os.environ["WARREN_BENCH_XGB_ARGS"])
    count = benchstats.check_bytes(args.bytes)
    warmup = args.warmup if args.warmup is not None else benchstats.default_warmup(args.iters)
    f32 = collective._map_dtype(np.dtype(np.float32))  # xgboost's dtype code for float32

    with collective.CommunicatorContext(**env):
        rank = collective.get_rank()
        n = collective.get_world_size()
        assert n == args.workers, (n, args.workers)

        if args.api == "inplace":
            def allreduce(a):
                _check_call(_LIB.XGCommunicatorAllreduce(
                    a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.size), f32,
                    int(collective.Op.SUM)))
                return a
        else:
            def allreduce(a):
                return collective.allreduce(a, collective.Op.SUM)

        # Zeros: repeated in-place sums stay finite (no inf/NaN, no denormals).
        buf = np.zeros(count, dtype=np.float32)
        for _ in range(warmup):
            buf = allreduce(buf)
        times = []
        clock = time.perf_counter
        for _ in range(args.iters):
            t0 = clock()
            buf = allreduce(buf)
            times.append(clock() - t0)

        # Correctness: every element must equal 1 + 2 + ... + n.
        chk = np.full(count, rank + 1, dtype=np.float32)
        chk = allreduce(chk)
        expect = n * (n + 1) / 2
        ok = bool(np.all(chk == expect))

    if rank == 0:
        rec = benchstats.summarize(
            "xgboost", n, args.bytes, times, warmup, args.dtype, args.op,
            check="ok" if ok else f"FAILED: expected {expect}, got {chk[:4].tolist()}",
            api=args.api, version=xgboost.__version__,
            omp_num_threads=os.environ.get("OMP_NUM_THREADS"))
        benchstats.emit(rec)
    return 0 if ok else 1


def launch(args):
    from xgboost.tracker import RabitTracker

    benchstats.check_bytes(args.bytes)
    tracker = RabitTracker(n_workers=args.workers, host_ip="127.0.0.1", sortby="task",
                           timeout=args.timeout)
    tracker.start()
    wargs = tracker.worker_args()
    procs = []
    for rank in range(args.workers):
        env = dict(os.environ)
        # One process per rank on a 2-core machine: no OpenMP thread pool per rank
        # (kept if the caller set it).
        env.setdefault("OMP_NUM_THREADS", "1")
        env["WARREN_BENCH_XGB_ARGS"] = json.dumps(
            dict(wargs, dmlc_task_id=str(rank), dmlc_timeout=args.timeout))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(rank),
               "-n", str(args.workers), "--bytes", str(args.bytes), "--iters", str(args.iters),
               "--dtype", args.dtype, "--op", args.op, "--api", args.api,
               "--timeout", str(args.timeout)]
        if args.warmup is not None:
            cmd += ["--warmup", str(args.warmup)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))

    deadline = time.monotonic() + args.timeout
    outs, rcs = [], []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outs.append(out)
            rcs.append(p.returncode)
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        print(f"xgboost_allreduce: workers did not finish within {args.timeout} s", file=sys.stderr)
        return 124
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    tracker.wait_for(10)
    lines = [ln for out in outs for ln in out.splitlines() if ln.startswith("{")]
    for ln in lines:
        print(ln, flush=True)
    if any(rcs) or len(lines) != 1:
        print(f"xgboost_allreduce: worker exit codes {rcs}, {len(lines)} result lines",
              file=sys.stderr)
        return 1
    return 0


def main():
    args = parse_args()
    if args.worker is not None:
        return worker(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())

"""Shared timing statistics and JSON line format for the allreduce references.

Every implementation (Warren's `warren bench allreduce`, bench/xgboost_allreduce.py,
bench/mpi_allreduce.py) prints ONE JSON line per run with at least:

    workers, bytes, iters, median_s, p99_s, algbw_gbps, busbw_gbps

Definitions (the same for every implementation):
  * float32 sum, in place, `bytes` per rank (bytes / 4 elements);
  * a few untimed warm-up iterations, no barrier, then `iters` back-to-back
    allreduce calls, each timed on rank 0 (wall clock, time.perf_counter);
  * median_s / p99_s: median and nearest-rank 99th percentile of those times;
  * algbw_gbps = bytes / median_s / 1e9;
  * busbw_gbps = algbw_gbps * 2 (n - 1) / n (the NCCL convention).
"""

import json
import math
import os
import platform
import sys


def percentile(sorted_times, p):
    """Nearest-rank percentile of an ascending list."""
    n = len(sorted_times)
    k = max(0, min(n - 1, math.ceil(p / 100.0 * n) - 1))
    return sorted_times[k]


def median(sorted_times):
    n = len(sorted_times)
    mid = n // 2
    if n % 2:
        return sorted_times[mid]
    return 0.5 * (sorted_times[mid - 1] + sorted_times[mid])


def summarize(impl, workers, nbytes, times, warmup, dtype="f32", op="sum", **extra):
    """Build the JSON record from the per-iteration times measured on rank 0."""
    t = sorted(times)
    med = median(t)
    algbw = nbytes / med / 1e9 if med > 0 else 0.0
    busbw = algbw * 2.0 * (workers - 1) / workers
    rec = {
        "impl": impl,
        "workers": workers,
        "bytes": nbytes,
        "dtype": dtype,
        "op": op,
        "iters": len(t),
        "warmup": warmup,
        "median_s": med,
        "p99_s": percentile(t, 99.0),
        "min_s": t[0],
        "mean_s": sum(t) / len(t),
        "algbw_gbps": algbw,
        "busbw_gbps": busbw,
    }
    rec.update(extra)
    return rec


def emit(rec):
    sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def check_bytes(nbytes):
    if nbytes <= 0 or nbytes % 4:
        raise SystemExit(f"--bytes must be a positive multiple of 4 (float32), got {nbytes}")
    return nbytes // 4


def default_warmup(iters):
    """'A few' untimed warm-up iterations: 5, or fewer if iters is tiny."""
    return max(1, min(5, iters))


def host_info():
    return {"python": platform.python_version(), "nproc": os.cpu_count()}

#!/usr/bin/env python3
"""Table of bench/shm_lend.sh's results: per mode (plain or robust), N and size, the median over the repetitions of
each implementation's median call time, and the ratios of the same repetition (vader's time
over Warren's: above 1, Warren is faster), their median and range."""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    by = defaultdict(dict)  # (robust, workers, bytes, rep) -> impl -> seconds
    for r in runs:
        if r.get("median_s") is not None:
            by[(int(r.get("robust", 0)), r["workers"], r["bytes"], r["rep"])][r["impl"]] = r["median_s"]
    cells = defaultdict(lambda: defaultdict(list))
    for (robust, n, b, _), t in by.items():
        for impl, s in t.items():
            cells[(robust, n, b)][impl].append(s)
        if {"mpi-shm", "warren-rings", "warren-lend"} <= t.keys():
            cells[(robust, n, b)]["vader/rings"].append(t["mpi-shm"] / t["warren-rings"])
            cells[(robust, n, b)]["vader/lend"].append(t["mpi-shm"] / t["warren-lend"])
            cells[(robust, n, b)]["rings/lend"].append(t["warren-rings"] / t["warren-lend"])
    print("| mode | N | size | Open MPI vader | Warren rings | Warren loans | vader / rings | vader / loans | rings / loans |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (robust, n, b), c in sorted(cells.items()):
        ms = lambda k: f"{statistics.median(c[k]) * 1e3:.2f} ms" if c[k] else "-"
        ratio = lambda k: f"{statistics.median(c[k]):.2f} ({min(c[k]):.2f}-{max(c[k]):.2f})" if c[k] else "-"
        print(f"| {'robust' if robust else 'plain'} | {n} | {b >> 20} MiB | {ms('mpi-shm')} | {ms('warren-rings')} | {ms('warren-lend')} | "
              f"{ratio('vader/rings')} | {ratio('vader/lend')} | {ratio('rings/lend')} |")
    loads = [r[k] for r in runs for k in ("load_start", "load_end")]
    print(f"\n1-min load {min(loads)}-{max(loads)}, {max(r['rep'] for r in runs)} repetitions, {path}")


if __name__ == "__main__":
    main(sys.argv[1])

"""Side-by-side table of any implementations in a bench/allreduce.sh results file.

    python3 bench/pairs_report.py RESULTS.jsonl [--ref mpi] [--impls warren-robust,warren,mpi]

For every (N, size) it gives each implementation's median over the sweep's runs of the run
median (the runs were back to back, so load hit them alike), its busbw, and the ratios of
busbw to the reference implementation's (above 1: more bandwidth than the reference) and of
median time to the first implementation's (robust vs plain, say). Failed runs are counted
and left out. bench/report.py makes the Warren / XGBoost / Open MPI report; this one is for
runs with IMPLS set (e.g. warren-robust next to warren and mpi).
"""

import argparse
import json
import statistics
from collections import defaultdict


def fmt_time(s):
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def fmt_size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--ref", default="mpi", help="busbw ratios against this implementation")
    ap.add_argument("--impls", help="comma-separated, in column order (default: as found)")
    a = ap.parse_args()
    runs, failed, order = defaultdict(list), defaultdict(int), []
    for line in open(a.results):
        r = json.loads(line)
        impl = r.get("impl")
        if impl in (None, "meta") or "workers" not in r or "stream" in impl or "pingpong" in impl or impl == "iperf3":
            continue
        if impl not in order:
            order.append(impl)
        key = (impl, r["workers"], r["bytes"])
        if "median_s" in r:
            runs[key].append(r["median_s"])
        else:
            failed[key] += 1
    impls = a.impls.split(",") if a.impls else order
    cells = sorted({(n, b) for (_, n, b) in runs})
    head = ["N", "size"] + [f"{i} median (runs) / busbw" for i in impls]
    head += [f"busbw {i}/{a.ref}" for i in impls if i != a.ref] + [f"time {i}/{impls[0]}" for i in impls[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for n, b in cells:
        med = {i: statistics.median(runs[(i, n, b)]) for i in impls if runs.get((i, n, b))}
        bus = {i: b / m / 1e9 * 2 * (n - 1) / n for i, m in med.items()}
        row = [str(n), fmt_size(b)]
        for i in impls:
            ok, bad = len(runs.get((i, n, b), [])), failed.get((i, n, b), 0)
            row.append(f"{fmt_time(med[i])} ({ok}/{ok + bad}) / {bus[i]:.2f} GB/s" if i in med else "—")
        for i in impls:
            if i != a.ref:
                row.append(f"{bus[i] / bus[a.ref]:.2f}×" if i in bus and a.ref in bus else "—")
        for i in impls[1:]:
            row.append(f"{med[i] / med[impls[0]]:.2f}×" if i in med and impls[0] in med else "—")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

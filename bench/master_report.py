#!/usr/bin/env python3
"""Turns a bench/master_service.sh results file into a Markdown table: completions/s per
label and client count, the new/ref ratios of runs made in the same session, and the load.

    python3 bench/master_report.py [RESULTS.jsonl]

RESULTS defaults to the newest bench/results/master_service-*.jsonl.
"""

import glob
import json
import sys

COLUMNS = [
    "file", "file-durable-hand-outs", "ref", "etcd", "etcd-durable-hand-outs", "etcd-ref", "etcd-2-flushes",
    "file-combined", "etcd-combined", "snapshot",
]
RATIOS = [
    ("file", "ref"), ("file", "file-durable-hand-outs"), ("etcd", "etcd-ref"), ("etcd", "etcd-durable-hand-outs"),
    ("etcd-2-flushes", "etcd"), ("etcd-combined", "etcd"),
]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else max(glob.glob("bench/results/master_service-*.jsonl"))
    rows = {}
    loads = {}
    for line in open(path):
        r = json.loads(line)
        c = r["clients"]
        rows.setdefault(c, {})[r["label"]] = r
        loads.setdefault(c, []).append(r["load1"])
    labels = [l for l in COLUMNS if any(l in by for by in rows.values())]
    ratios = [(a, b) for a, b in RATIOS if any(a in by and b in by for by in rows.values())]
    head = ["clients"] + labels + [f"{a} / {b}" for a, b in ratios] + ["load"]
    print(f"Results: `{path}` (completions/s; p50 / p99 of one completion in brackets)\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * (len(head) - 1) + "---|")
    for c in sorted(rows):
        by = rows[c]
        cells = [str(c)]
        for l in labels:
            r = by.get(l)
            if r is None:
                cells.append("-")
            else:
                rate = r["completions_per_s"]
                text = f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"
                cells.append(f"{text} ({r['p50_us'] / 1000:.1f} / {r['p99_us'] / 1000:.1f} ms)")
        for a, b in ratios:
            if a in by and b in by:
                cells.append(f"{by[a]['completions_per_s'] / by[b]['completions_per_s']:.2f}")
            else:
                cells.append("-")
        cells.append(f"{min(loads[c]):.1f}-{max(loads[c]):.1f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

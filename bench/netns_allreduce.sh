#!/usr/bin/env bash
# Allreduce in a simulated network: one worker per network namespace ("host"), each host's
# link limited to a configured rate with `tc tbf` (native/warren-cli/tests/it/support/netns.rs),
# busbw against that rate (target >= 0.9x at 64 MiB). Needs root (`ip netns`, `tc`).
#
#   bash bench/netns_allreduce.sh     # builds the tests in release mode, ~2 min of runs
#
# Knobs (environment): WARREN_NETNS_MBIT=1000 (link rate, Mbit/s), WARREN_NETNS_WORKERS="2 4",
# WARREN_NETNS_BYTES=67108864 (per rank), WARREN_NETNS_ITERS=10, WARREN_NETNS_REPEAT=3,
# OUT=bench/results/netns-<date>.jsonl, PROFILE=release (the cargo profile; `test` reuses the
# debug build of the tests: the links, not the reductions, are the bottleneck here).
# Each line: `warren bench allreduce`'s JSON (plain mode, float32 sum) plus run, link_gbit,
# busbw_gbit (busbw in Gbit/s) and busbw_over_link.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results/netns-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
mkdir -p "$(dirname "$OUT")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --profile "${PROFILE:-release}" -p warren-cli --test it -- --ignored --exact \
  netns::bench_allreduce_busbw_against_the_link_rate --nocapture --test-threads 1 >"$log" 2>&1 ||
  { tail -40 "$log" >&2; exit 1; }
grep -o 'NETNS_BENCH {.*}' "$log" | sed 's/^NETNS_BENCH //' | tee "$OUT"
python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for n in sorted({r["workers"] for r in rows}):
    best = max((r for r in rows if r["workers"] == n), key=lambda r: r["busbw_gbit"])
    runs = ", ".join(f'{r["busbw_over_link"]:.3f}' for r in rows if r["workers"] == n)
    print(f'N = {n}: best busbw {best["busbw_gbit"]:.3f} Gbit/s = {best["busbw_over_link"]:.3f}x '
          f'the {best["link_gbit"]} Gbit/s link (median {best["median_s"]*1e3:.1f} ms); every run: {runs}')
PY
echo "results: $OUT"

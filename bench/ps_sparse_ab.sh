#!/usr/bin/env bash
# Two Warren builds on the sparse parameter-server benchmark, alternating (docs/benchmarks-ps.md):
# PAIRS times, `warren bench ps --model sparse` of WARREN_REF then of this build, each under
# `perf stat -e task-clock` when perf is installed (CPU time of the whole run: a step is
# CPU-bound on a 2-core machine, and CPU time is steadier than the step time under other load).
# One JSON line per run in bench/results/ps_sparse_ab-<time>.jsonl, then the means and ratios.
#
#   WARREN_REF=/path/to/earlier/warren bench/ps_sparse_ab.sh     PAIRS=6 STEPS=200 MODE=sync BAGS=0
# (BAGS=1: the bagged model, `--bags`)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${WARREN_REF:?WARREN_REF=<an earlier warren binary> (e.g. a release build of main, copied aside)}"
NEW=${WARREN:-target/release/warren}
[ -x "$NEW" ] || cargo build --release -p warren-cli
PAIRS=${PAIRS:-6} STEPS=${STEPS:-200} MODE=${MODE:-sync}
ARGS=(bench ps --model sparse --keys "${KEYS:-1048576}" --width "${WIDTH:-16}" --batch "${BATCH:-4096}"
  --features "${FEATURES:-8}" --trainers "${TRAINERS:-2}" --servers "${SERVERS:-2}" --steps "$STEPS"
  --warmup 5 --mode "$MODE")
[ "${BAGS:-0}" = 1 ] && ARGS+=(--bags)
mkdir -p bench/results
OUT=bench/results/ps_sparse_ab-$(date -u +%Y%m%dT%H%M%S).jsonl
one() { # build-name binary
  local out cpu=null
  if command -v perf >/dev/null; then
    out=$(perf stat -x, -e task-clock "$2" "${ARGS[@]}" 2>&1)
    cpu=$(echo "$out" | awk -F, '/task-clock/ {print $1 / 1000}')
  else
    out=$("$2" "${ARGS[@]}" 2>&1)
  fi
  local line
  line=$(echo "$out" | grep '"bench":"ps_sparse"' | tail -1)
  [ -n "$line" ] || { echo "$out" >&2; echo "no result from $2" >&2; exit 1; }
  echo "${line%\}},\"build\":\"$1\",\"cpu_s\":$cpu,\"load1\":$(cut -d' ' -f1 /proc/loadavg)}" | tee -a "$OUT"
}
for _ in $(seq "$PAIRS"); do
  one ref "$WARREN_REF"
  one new "$NEW"
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def mean(build, key):
    xs = [r[key] for r in runs if r["build"] == build and r.get(key) is not None]
    return statistics.mean(xs) if xs else None
for key, unit in (("step_s", "s a step"), ("cpu_s", "s of CPU a run")):
    ref, new = mean("ref", key), mean("new", key)
    if ref and new:
        print(f"{key}: ref {ref:.4f}, new {new:.4f} {unit}: new is {ref / new:.2f}x faster")
print(f"results: {sys.argv[1]}")
PY

#!/usr/bin/env bash
# What the parameter servers' log costs (docs/benchmarks-ps.md): the bagged sparse model
# (`warren bench ps --model sparse --bags`, KEYS keys x WIDTH floats, batches of BATCH x
# FEATURES keys), 2 trainers against 2 server processes (`warren ps --servers 2
# --checkpoint-dir D`, a fresh directory each run, a checkpoint every EVERY steps), in each
# MODE. Variants, alternating within each of PAIRS rounds, so that they share the machine's
# load:
#   none   this build, no --checkpoint-dir (nothing logged, nothing checkpointed);
#   ref    WARREN_REF (a build without the log, e.g. from before it) with --checkpoint-dir:
#          periodic checkpoints only (optional: skipped when WARREN_REF is unset);
#   write  this build, --log-sync write (answered once the record is written to the kernel);
#   fsync  this build, --log-sync fsync (answered once the record is on disk).
# One JSON line per run in bench/results/ps_log_cost-<time>.jsonl (with the load and the
# servers' CPU time per step over the timed steps, steadier than the step time on a loaded
# machine), then
# the medians of each variant and their ratios to `ref` (or to `none` without a ref).
#
#   WARREN_REF=/path/to/warren-before-the-log bench/ps_log_cost.sh
#       PAIRS=3 STEPS=80 WARMUP=20 MODES="async sync" EVERY=10 KEYS=1048576 WIDTH=16 BATCH=4096 FEATURES=8
#       VARIANTS="none write" (a subset, in this order)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-3} STEPS=${STEPS:-80} WARMUP=${WARMUP:-20} MODES=${MODES:-"async sync"} EVERY=${EVERY:-10}
NEW=${WARREN:-target/release/warren}
[ -x "$NEW" ] || cargo build --release -p warren-cli
REF=${WARREN_REF:-}
mkdir -p bench/results
OUT=bench/results/ps_log_cost-$(date -u +%Y%m%dT%H%M%S).jsonl
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
export WARREN_JOB_SECRET=bench-ps-log WARREN_LOG=${WARREN_LOG:-warn}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
one() { # variant mode
  local bin=$NEW args=()
  case $1 in
    none) ;;
    ref) bin=$REF; args=(--checkpoint-dir "$WORK/ckpt") ;;
    write | fsync) args=(--checkpoint-dir "$WORK/ckpt" --log-sync "$1") ;;
  esac
  [ ${#args[@]} -eq 0 ] || args+=(--checkpoint-every-steps "$EVERY" --checkpoint-every-s "${EVERY_S:-0}")
  rm -rf "$WORK/ckpt"
  local p0 p1 s0 s1
  p0=$(port) p1=$(port)
  "$bin" ps --servers 2 --index 0 --port "$p0" "${args[@]}" >"$WORK/server-0.log" 2>&1 & s0=$!
  "$bin" ps --servers 2 --index 1 --port "$p1" "${args[@]}" >"$WORK/server-1.log" 2>&1 & s1=$!
  PIDS=("$s0" "$s1")
  local load line sampler
  load=$(cut -d' ' -f1 /proc/loadavg)
  : >"$WORK/steps"
  python3 - "$WORK/steps" $((2 * WARMUP)) $((2 * (WARMUP + STEPS))) "$s0" "$s1" >"$WORK/cpu" <<'PY' &
# The servers' CPU time (user + system) over the timed steps only: sampled when the step log
# has the warm-up's lines, and again when it has every line.
import os, sys, time
log, first, last, pids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def lines():
    with open(log) as f:
        return sum(1 for _ in f)
def ticks():
    return sum(sum(int(x) for x in open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[11:13]) for p in pids)
samples = []
for want in (first, last):
    while lines() < want:
        time.sleep(0.002)
    samples.append(ticks())
print((samples[1] - samples[0]) / os.sysconf("SC_CLK_TCK") / (last - first) * 2)
PY
  sampler=$!
  if ! line=$("$bin" bench ps --uris "127.0.0.1:$p0,127.0.0.1:$p1" --model sparse --bags \
    --keys "${KEYS:-1048576}" --width "${WIDTH:-16}" --batch "${BATCH:-4096}" --features "${FEATURES:-8}" \
    --trainers 2 --servers 2 --steps "$STEPS" --warmup "$WARMUP" --mode "$2" --step-log "$WORK/steps" \
    2>"$WORK/bench.log" | tail -1); then
    cat "$WORK/bench.log" "$WORK"/server-*.log >&2
    exit 1
  fi
  wait "$sampler"
  local cpu
  cpu=$(python3 -c "print(round($(cat "$WORK/cpu"), 5))")
  kill "$s0" "$s1" 2>/dev/null || true
  wait "$s0" "$s1" 2>/dev/null || true
  PIDS=()
  echo "${line%\}},\"variant\":\"$1\",\"server_cpu_step_s\":$cpu,\"load1\":$load}" | tee -a "$OUT"
}
DEFAULT_VARIANTS="none write fsync"
[ -n "$REF" ] && DEFAULT_VARIANTS="none ref write fsync"
VARIANTS=${VARIANTS:-$DEFAULT_VARIANTS}
for _ in $(seq "$PAIRS"); do
  for mode in $MODES; do
    for v in $VARIANTS; do one "$v" "$mode"; done
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for mode in sorted({r["mode"] for r in rows}):
    step, cpu = {}, {}
    for r in rows:
        if r["mode"] == mode:
            step.setdefault(r["variant"], []).append(r["step_s"])
            cpu.setdefault(r["variant"], []).append(r["server_cpu_step_s"])
    step = {v: statistics.median(s) for v, s in step.items()}
    cpu = {v: statistics.median(s) for v, s in cpu.items()}
    base = "ref" if "ref" in step else "none"
    for v in step:
        print(f"{mode:5} {v:5} median step {step[v]:.4f} s ({step[v] / step[base]:.2f} x {base}),"
              f" servers' CPU a step {cpu[v] * 1e3:.2f} ms ({cpu[v] / cpu[base]:.2f} x {base})")
PY
echo "results: $OUT"

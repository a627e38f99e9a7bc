#!/usr/bin/env bash
# Parameter server, sync vs SSP(k) vs async (docs/benchmarks-ps.md): TRAINERS trainers x
# SERVERS servers (threads, loopback TCP), a dense model of BYTES, each step a pull and a push
# of the whole model plus a random 0..COMPUTE_MS ms of "compute" (uneven, as real trainers
# are); time per pass (STEPS steps of every trainer) in each mode, in one run, with the load.
# One JSON line per mode in bench/results/ps_modes-<time>.jsonl.
#
#   bench/ps_modes.sh         TRAINERS=4 SERVERS=2 BYTES=4194304 STEPS=40 COMPUTE_MS=100 KS="1 4"
set -euo pipefail
cd "$(dirname "$0")/.."
TRAINERS=${TRAINERS:-4} SERVERS=${SERVERS:-2} BYTES=${BYTES:-4194304} STEPS=${STEPS:-40}
COMPUTE_MS=${COMPUTE_MS:-100} KS=${KS:-1 4}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
mkdir -p bench/results
OUT=bench/results/ps_modes-$(date -u +%Y%m%dT%H%M%S).jsonl
run() { # mode staleness
  local l; l=$(cut -d' ' -f1 /proc/loadavg)
  WARREN_LOG=warn "$B" bench ps --bytes "$BYTES" --trainers "$TRAINERS" --servers "$SERVERS" --steps "$STEPS" \
    --warmup 1 --compute-ms "$COMPUTE_MS" --mode "$1" --staleness "$2" |
    sed "s/}\$/,\"pass_s\":PASS,\"load1\":$l}/" | python3 -c '
import json, sys
line = sys.stdin.read().replace("PASS", "0")
r = json.loads(line); r["pass_s"] = round(r["step_s"] * r["steps"], 3); print(json.dumps(r))' | tee -a "$OUT"
}
run sync 0
for k in $KS; do run ssp "$k"; done
run async 0
echo "results in $OUT"

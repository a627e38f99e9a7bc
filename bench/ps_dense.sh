#!/usr/bin/env bash
# Parameter server, dense push + pull of a whole model (`warren bench ps`): T trainers x S
# servers (threads of one process, real loopback TCP connections), each step a pull of the
# whole model and a push of a gradient of the whole model, against one loopback TCP stream
# measured in the same run (the ratio is what docs/benchmarks-ps.md reports). Async and sync,
# interleaved, REPEAT times each. With WARREN_REF=/path/to/other/warren, that binary's runs
# are interleaved too (e.g. a build of the previous commit, for a before/after ratio).
# One JSON line per run in bench/results/ps_dense-<time>.jsonl, with the 1-minute load average.
#
#   bench/ps_dense.sh [BYTES]        (default 67108864: 64 MiB)
#   STEPS=5 TRAINERS=2 SERVERS=2 REPEAT=3 MODES="async sync"
set -euo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-67108864}
STEPS=${STEPS:-5} TRAINERS=${TRAINERS:-2} SERVERS=${SERVERS:-2} REPEAT=${REPEAT:-3} MODES=${MODES:-async sync}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
mkdir -p bench/results
OUT=bench/results/ps_dense-$(date -u +%Y%m%dT%H%M%S).jsonl
run() { # label, binary, mode
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  WARREN_LOG=warn "$2" bench ps --bytes "$BYTES" --trainers "$TRAINERS" --servers "$SERVERS" --steps "$STEPS" \
    --mode "$3" | sed "s/^{/{\"label\":\"$1\",\"load1\":$load,/" | tee -a "$OUT"
}
for _ in $(seq "$REPEAT"); do
  for mode in $MODES; do
    run this "$B" "$mode"
    if [ -n "${WARREN_REF:-}" ]; then run ref "$WARREN_REF" "$mode"; fi
  done
done
echo "results in $OUT"

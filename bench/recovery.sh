#!/usr/bin/env bash
# Recovery benchmarks (issue: retry-one recovery), all measured in one run as ratios:
#  (a) robust-mode overhead on allreduce latency (4 B, 1 MiB; N = 2) vs plain mode;
#  (b) added job time of one recovery (kill of one worker) against the checkpoint size;
#  (c) total time of the same job with 0, 1 and 3 failures under retry-one vs fail-all.
# Reproduce: make build && bash bench/recovery.sh     (about 3 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WARREN:-target/release/warren}
REPEAT=${REPEAT:-3}
OUT=${OUT:-bench/results/recovery-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
mkdir -p "$(dirname "$OUT")"
[ -x "$W" ] || { echo "build first: cargo build --release -p warren-cli" >&2; exit 1; }
export WARREN_LOG=warn WARREN_BOOTSTRAP_CACHE=1

median() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# (a) robust vs plain
for bytes in 4 1048576; do
  iters=$([ "$bytes" = 4 ] && echo 3000 || echo 300)
  for mode in 0 1; do
    vals=()
    for _ in $(seq "$REPEAT"); do
      vals+=("$(WARREN_ROBUST=$mode "$W" bench allreduce -n 2 --bytes "$bytes" --iters "$iters" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_s"])')")
    done
    echo "{\"bench\":\"robust_overhead\",\"bytes\":$bytes,\"robust\":$mode,\"median_s\":$(median "${vals[@]}")}" | tee -a "$OUT"
  done
done

# One training job: prints its wall time in seconds.
job() { # job N MODEL_BYTES ITERS COMPUTE_MS RECOVERY MOCK [extra env...]
  local n=$1 bytes=$2 iters=$3 compute=$4 recovery=$5 mock=$6; shift 6
  local t0 t1
  t0=$(date +%s.%N)
  env "$@" WARREN_MOCK="$mock" "$W" run -n "$n" --max-restarts 10 --recovery "$recovery" -- \
    "$W" example train --iters "$iters" --model-bytes "$bytes" --compute-ms "$compute" >/tmp/warren-bench-job.out 2>/dev/null
  t1=$(date +%s.%N)
  grep -q '"status":"ok"' /tmp/warren-bench-job.out || { echo "job failed: $*" >&2; exit 1; }
  python3 -c "print($t1 - $t0)"
}

# (b) added time of one recovery vs checkpoint (model) size
for bytes in 1048576 67108864; do
  base=(); fail=()
  for _ in $(seq "$REPEAT"); do
    base+=("$(job 4 "$bytes" 20 0 retry-one "")")
    fail+=("$(job 4 "$bytes" 20 0 retry-one "2,10,1,0")")
  done
  b=$(median "${base[@]}"); f=$(median "${fail[@]}")
  echo "{\"bench\":\"recovery_time\",\"model_bytes\":$bytes,\"failure_free_s\":$b,\"one_failure_s\":$f,\"added_s\":$(python3 -c "print($f-$b)")}" | tee -a "$OUT"
done

# (c) retry-one vs fail-all: 4 workers, 4 MiB model, 30 ms compute per iteration, 60
# iterations; in-memory checkpoint every iteration; durable checkpoints (fail-all) every 10.
ITERS=60; BYTES=4194304; COMPUTE=30
one="1,25,1,0"; three="1,15,1,0;3,35,2,0;0,48,0,0"
# Under fail-all every worker's attempt number grows at each restart.
three_all="1,15,1,0;3,35,2,1;0,48,0,2"
for _ in $(seq "$REPEAT"); do
  ckdir=$(mktemp -d)
  t0=$(job 4 $BYTES $ITERS $COMPUTE retry-one "")
  r1=$(job 4 $BYTES $ITERS $COMPUTE retry-one "$one")
  f1=$(job 4 $BYTES $ITERS $COMPUTE fail-all "$one" WARREN_CHECKPOINT_DIR="$ckdir/1" WARREN_DURABLE_EVERY=10)
  r3=$(job 4 $BYTES $ITERS $COMPUTE retry-one "$three")
  f3=$(job 4 $BYTES $ITERS $COMPUTE fail-all "$three_all" WARREN_CHECKPOINT_DIR="$ckdir/3" WARREN_DURABLE_EVERY=10)
  rm -rf "$ckdir"
  echo "{\"bench\":\"strategies\",\"failure_free_s\":$t0,\"retry_one_1_s\":$r1,\"fail_all_1_s\":$f1,\"retry_one_3_s\":$r3,\"fail_all_3_s\":$f3}" | tee -a "$OUT"
done
echo "results: $OUT"

#!/usr/bin/env bash
# Parameter server vs TensorFlow's ParameterServerStrategy (docs/benchmarks-ps.md): the sparse
# embedding model (KEYS hashed keys x WIDTH floats, batches of BATCH examples of FEATURES keys,
# logistic loss, SGD on the servers), TRAINERS trainers x SERVERS servers on this machine, in
# one run: `warren bench ps --model sparse` (async, as TensorFlow's PS training is, and sync)
# and bench/ps_tf.py (tensorflow-cpu from PyPI in .bench-venv, installed here if missing).
# One JSON line per system in bench/results/ps_sparse-<time>.jsonl, with the load and the ratio.
#
#   bench/ps_sparse.sh        KEYS=1048576 WIDTH=16 BATCH=4096 FEATURES=8 TRAINERS=2 SERVERS=2 STEPS=50
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1048576} WIDTH=${WIDTH:-16} BATCH=${BATCH:-4096} FEATURES=${FEATURES:-8}
TRAINERS=${TRAINERS:-2} SERVERS=${SERVERS:-2} STEPS=${STEPS:-50} WARMUP=${WARMUP:-5}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
VENV=${BENCH_VENV:-.bench-venv}
if ! "$VENV/bin/python" -c 'import tensorflow' 2>/dev/null; then
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q tensorflow-cpu
fi
mkdir -p bench/results
OUT=bench/results/ps_sparse-$(date -u +%Y%m%dT%H%M%S).jsonl
ARGS=(--keys "$KEYS" --width "$WIDTH" --batch "$BATCH" --features "$FEATURES")
load() { cut -d' ' -f1 /proc/loadavg; }
l=$(load); tf=$("$VENV/bin/python" bench/ps_tf.py "${ARGS[@]}" --workers "$TRAINERS" --ps "$SERVERS" \
  --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null | tail -1)
echo "${tf%\}}, \"load1\": $l}" | tee -a "$OUT"
tf_s=$(echo "$tf" | sed 's/.*"step_s": \([0-9.]*\).*/\1/')
for mode in async sync; do
  l=$(load)
  w=$(WARREN_LOG=warn "$B" bench ps --model sparse "${ARGS[@]}" --trainers "$TRAINERS" --servers "$SERVERS" \
    --steps "$STEPS" --warmup "$WARMUP" --mode "$mode")
  w_s=$(echo "$w" | sed 's/.*"step_s":\([0-9.]*\).*/\1/')
  ratio=$(python3 -c "print(round($tf_s / $w_s, 2))")
  echo "${w%\}},\"load1\":$l,\"tf_step_s\":$tf_s,\"speedup_vs_tf\":$ratio}" | tee -a "$OUT"
done
echo "results in $OUT"

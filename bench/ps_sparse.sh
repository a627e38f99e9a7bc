#!/usr/bin/env bash
# Parameter server vs TensorFlow's ParameterServerStrategy (docs/benchmarks-ps.md): the sparse
# embedding model (KEYS hashed keys x WIDTH floats, batches of BATCH examples of FEATURES keys,
# logistic loss, SGD on the servers), TRAINERS trainers x SERVERS servers on this machine, in
# one run: `warren bench ps --model sparse` (async, as TensorFlow's PS training is, and sync)
# and bench/ps_tf.py (tensorflow-cpu from PyPI in .bench-venv, installed here if missing).
# One JSON line per system in bench/results/ps_sparse-<time>.jsonl, with the load and the ratio.
# Each Warren line also has, measured in the same run, what any design moving these bytes
# over loopback TCP must spend on this machine (the floor): the kernel's copies of a step's
# bytes over the same connections (`loopback_cpu_step_s`), the servers' row work alone on one
# thread (`rows_cpu_step_s`, `cargo bench --bench ps_rows`), the trainers' model alone
# (`model_cpu_step_s`); `floor_step_s` is their sum over the cores (nproc), as if no core were
# ever idle, and `tf_over_floor` the most any such design could be faster than TensorFlow here.
# PADDLE=1 adds PaddlePaddle's parameter-server mode (bench/ps_paddle.py, in .bench-venv-paddle):
# off by default, as its install is heavy (a 195 MB wheel, 590 MB installed) and pinned old:
# paddlepaddle 2.6.2 is the newest PyPI release whose CPU wheel has the PS runtime (3.x's lack
# it), with the protobuf and numpy it works with. Then every other line gets the ratio to it.
#
# BAGS=1 (the default) also runs the model with each example's keys as one bag, both ways:
# TensorFlow's tf.nn.embedding_lookup_sparse (combiner mean), Warren's bagged pull and push
# (`--bags`: the servers sum a bag's rows, and take one gradient row per example). The same
# model and data; each bagged Warren line has its ratio to TensorFlow's bagged run and to the
# faster of TensorFlow's two (`speedup_vs_best_tf`).
#
# Both are timed in steady state, after WARMUP untimed steps: TensorFlow makes its embedding
# variable whole before the first step, Warren makes a row on its first pull, and with 65 K
# random keys a step over 1 M keys most rows are made in the first ~50 steps. Warren is not
# faster for it: with WARMUP=5 its steps were 1.1x faster (a table still filling has fewer
# rows, more of them in the caches), so the default times it with its table full, as in a
# long job.
#
#   bench/ps_sparse.sh        KEYS=1048576 WIDTH=16 BATCH=4096 FEATURES=8 TRAINERS=2 SERVERS=2 STEPS=100 WARMUP=60 PADDLE=0 BAGS=1
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1048576} WIDTH=${WIDTH:-16} BATCH=${BATCH:-4096} FEATURES=${FEATURES:-8}
TRAINERS=${TRAINERS:-2} SERVERS=${SERVERS:-2} STEPS=${STEPS:-100} WARMUP=${WARMUP:-60}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
VENV=${BENCH_VENV:-.bench-venv}
if ! "$VENV/bin/python" -c 'import tensorflow' 2>/dev/null; then
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q tensorflow-cpu
fi
PADDLE=${PADDLE:-0}
PVENV=${PADDLE_VENV:-.bench-venv-paddle}
if [ "$PADDLE" = 1 ] && ! "$PVENV/bin/python" -c 'import paddle' 2>/dev/null; then
  python3 -m venv "$PVENV" && "$PVENV/bin/pip" install -q paddlepaddle==2.6.2 'protobuf>=4.21,<5' 'numpy<2'
fi
mkdir -p bench/results
OUT=bench/results/ps_sparse-$(date -u +%Y%m%dT%H%M%S).jsonl
ARGS=(--keys "$KEYS" --width "$WIDTH" --batch "$BATCH" --features "$FEATURES")
load() { cut -d' ' -f1 /proc/loadavg; }
l=$(load); tf=$("$VENV/bin/python" bench/ps_tf.py "${ARGS[@]}" --workers "$TRAINERS" --ps "$SERVERS" \
  --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null | tail -1)
tf="${tf%\}}, \"load1\": $l}"
tf_s=$(echo "$tf" | sed 's/.*"step_s": \([0-9.]*\).*/\1/')
ratio() { python3 -c "print(round($1 / $2, 2))"; }
BAGS=${BAGS:-1}
if [ "$BAGS" = 1 ]; then
  l=$(load); tfb=$("$VENV/bin/python" bench/ps_tf.py "${ARGS[@]}" --workers "$TRAINERS" --ps "$SERVERS" \
    --steps "$STEPS" --warmup "$WARMUP" --bags 2>/dev/null | tail -1)
  tfb="${tfb%\}}, \"load1\": $l}"
  tfb_s=$(echo "$tfb" | sed 's/.*"step_s": \([0-9.]*\).*/\1/')
  best_tf_s=$(python3 -c "print(min($tf_s, $tfb_s))")
fi
vs_paddle=""
if [ "$PADDLE" = 1 ]; then
  plog=${OUT%.jsonl}-paddle.log  # Paddle's own (glog) output, kept to read a failure
  l=$(load)
  if ! pd=$("$PVENV/bin/python" bench/ps_paddle.py "${ARGS[@]}" --trainers "$TRAINERS" --servers "$SERVERS" \
    --steps "$STEPS" --warmup "$WARMUP" 2>"$plog" | tail -1); then
    echo "bench/ps_paddle.py failed: $(tail -1 "$plog") (all of it in $plog)" >&2
    exit 1
  fi
  pd_s=$(echo "$pd" | sed 's/.*"step_s": \([0-9.]*\).*/\1/')
  tf="${tf%\}}, \"paddle_step_s\": $pd_s, \"speedup_vs_paddle\": $(ratio "$pd_s" "$tf_s")}"
  echo "$tf" | tee -a "$OUT"
  echo "${pd%\}}, \"load1\": $l, \"tf_step_s\": $tf_s, \"speedup_vs_tf\": $(ratio "$tf_s" "$pd_s")}" | tee -a "$OUT"
  vs_paddle=",\"paddle_step_s\":$pd_s"
else
  echo "$tf" | tee -a "$OUT"
fi
[ "$BAGS" = 1 ] && echo "$tfb" | tee -a "$OUT"
ROWS_ARGS=($((KEYS / SERVERS)) 100 "$TRAINERS" $((BATCH * FEATURES / SERVERS)) "$WIDTH")
rows=$(cargo bench -q -p warren --bench ps_rows -- "${ROWS_ARGS[@]}" 2>/dev/null | grep '"bench":"ps_rows"')
rows_s=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['step_ms'] * $SERVERS / 1000)" "$rows")
RUNS=("async" "sync")
[ "$BAGS" = 1 ] && RUNS+=("async --bags" "sync --bags")
for run in "${RUNS[@]}"; do
  read -r mode bags <<<"$run"
  l=$(load)
  w=$(WARREN_LOG=warn "$B" bench ps --model sparse "${ARGS[@]}" --trainers "$TRAINERS" --servers "$SERVERS" \
    --steps "$STEPS" --warmup "$WARMUP" --mode "$mode" $bags)
  w_s=$(echo "$w" | sed 's/.*"step_s":\([0-9.]*\).*/\1/')
  extra=""
  if [ -n "$bags" ]; then
    extra=",\"tf_bags_step_s\":$tfb_s,\"speedup_vs_tf_bags\":$(ratio "$tfb_s" "$w_s"),\"speedup_vs_best_tf\":$(ratio "$best_tf_s" "$w_s")"
  fi
  [ -n "$vs_paddle" ] && extra="$extra$vs_paddle,\"speedup_vs_paddle\":$(ratio "$pd_s" "$w_s")"
  floor=$(python3 -c "import json,sys,os; w=json.loads(sys.argv[1]); c=w['loopback_cpu_step_s']+$rows_s+w['model_cpu_step_s']
f=c/os.cpu_count(); print(f',\"rows_cpu_step_s\":{$rows_s:.4f},\"floor_cpu_step_s\":{c:.4f},\"floor_step_s\":{f:.4f},\"tf_over_floor\":{$tf_s/f:.2f}')" "$w")
  echo "${w%\}},\"load1\":$l,\"tf_step_s\":$tf_s,\"speedup_vs_tf\":$(ratio "$tf_s" "$w_s")$extra$floor}" | tee -a "$OUT"
done
echo "results in $OUT"

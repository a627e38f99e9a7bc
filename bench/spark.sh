#!/usr/bin/env bash
# Spark benchmark: one spark-submit run on one local-cluster (io.warren.examples.SparkBench):
#  (a) time per iteration of the Warren logistic-regression example vs Spark MLlib's
#      LogisticRegression (L-BFGS, tol 0, no regularization) on the same rows;
#  (b) the Warren stage's total time without failures and with one failure (an executor halted,
#      a task throwing), under retry-one, fail-all (spark.warren.recovery=fail-all) and elastic
#      (spark.warren.elastic=true: the others go on without a lost worker after the rejoin timeout).
#      BENCH_SPARK_ARGS=--recovery-only runs (b) alone.
# Reproduce: make bench-spark      (BENCH_SPARK_ARGS="--rows 200000" to scale; ~12 minutes at the default)
#   EXECUTORS=N executor JVMs (default 4) of CORES task slots each (default 1); WORKERS=M Warren
#   workers = MLlib partitions (default EXECUTORS x CORES; fewer leaves spare slots, so a re-run
#   task need not wait for a new executor JVM).
# Writes bench/results/spark-<time>.json and the generated section of docs/benchmarks-spark.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EXECUTORS=${EXECUTORS:-4}
CORES=${CORES:-1}
WORKERS=${WORKERS:-$((EXECUTORS * CORES))}
[ "$WORKERS" -le $((EXECUTORS * CORES)) ] || { echo "WORKERS ($WORKERS) exceeds the task slots (EXECUTORS x CORES)" >&2; exit 1; }
ARGS=${BENCH_SPARK_ARGS:-}
OUT=${OUT:-bench/results/spark-$(date -u +%Y%m%dT%H%M%SZ).json}
LOG=${OUT%.json}.log
mkdir -p "$(dirname "$OUT")"
JARS=jvm/warren-core/target/warren-core-0.1.0-SNAPSHOT.jar,jvm/warren-runner/target/warren-runner-0.1.0-SNAPSHOT.jar,jvm/warren-scala/target/warren-scala_2.13-0.1.0-SNAPSHOT.jar,jvm/warren-spark/target/warren-spark_2.13-0.1.0-SNAPSHOT.jar
APP=spark-examples/target/warren-spark-examples_2.13-0.1.0-SNAPSHOT.jar
for j in ${JARS//,/ } $APP; do [ -f "$j" ] || { echo "build first: make bench-spark (missing $j)" >&2; exit 1; }; done
SPARK_HOME="$(scripts/setup-spark.sh | sed -n 's/^SPARK_HOME=//p')"
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1

# Fail-all's durable checkpoints (each run writes its own subdirectory, removed when it ends).
FAIL_ALL_DIR=$(mktemp -d /tmp/warren-bench-failall.XXXXXX)
trap 'rm -rf "$FAIL_ALL_DIR"' EXIT
ARGS="$ARGS --fail-all-dir $FAIL_ALL_DIR"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# Executors of 1 core and 2 GiB (the data: 8 bytes x rows x features, in Warren's arrays and in
# MLlib's cached DataFrame); the driver only holds models.
# shellcheck disable=SC2086
timeout 3600 "$SPARK_HOME/bin/spark-submit" --master "local-cluster[$EXECUTORS,$CORES,2048]" \
  --conf spark.executor.memory=1800m --driver-memory 2g --conf spark.ui.enabled=false \
  --conf spark.warren.progressInterval=0 \
  --class io.warren.examples.SparkBench --jars "$JARS" "$APP" --workers "$WORKERS" $ARGS >"$LOG" 2>&1 ||
  { tail -40 "$LOG" >&2; echo "spark-submit failed; log: $LOG" >&2; exit 1; }
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
grep '^BENCH ' "$LOG" || true
sed -n 's/^BENCH_JSON //p' "$LOG" >"$OUT"
[ -s "$OUT" ] || { echo "no BENCH_JSON line in $LOG" >&2; exit 1; }
python3 bench/spark_report.py "$OUT" docs/benchmarks-spark.md \
  --commit "$(git rev-parse --short HEAD)" --load "$LOAD_BEFORE" --load-after "$LOAD_AFTER" \
  --spark "$(basename "$(ls "$SPARK_HOME"/jars/spark-core_*.jar)" .jar)" --root "$ROOT"
echo "results: $OUT; docs/benchmarks-spark.md updated"

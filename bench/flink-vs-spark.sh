#!/usr/bin/env bash
# Flink vs Spark, in one run: the per-iteration time of the logistic-regression
# example on Flink (jvm/flink-examples, `flink run` on a standalone cluster of one TaskManager
# JVM per worker, scripts/flink-standalone.sh) against the same example on Spark
# (spark-examples, spark-submit on local-cluster[W,1,1024]: one executor JVM per worker): the
# same data, arithmetic and number of workers (both print the same MODEL_HASH, checked here),
# REPEATS runs of each, alternated. The figure is ITER_MS, rank 0's gradient loop (gradient,
# allreduce, checkpoint) wall time over its iterations, so JVM start-up, job submission and data
# generation are left out; the report gives each side's median and the ratio Flink / Spark
# (target <= 1.1).
#
# Reproduce: make bench-flink-spark
#   BENCH_FLINK_SPARK_ARGS='REPEATS [example arguments]' (default: 5 --workers 3 --rows 1000000
#   --features 20 --iters 40). Writes bench/results/flink-vs-spark.md (and prints it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
read -r -a ARGV <<<"${BENCH_FLINK_SPARK_ARGS:-5}"
REPEATS=${ARGV[0]:-5}
EXTRA=("${ARGV[@]:1}")
ARGS=(--workers 3 --rows 1000000 --features 20 --iters 40 "${EXTRA[@]}")
WORKERS=3
for ((i = 0; i < ${#ARGS[@]}; i++)); do [ "${ARGS[$i]}" = --workers ] && WORKERS=${ARGS[$((i + 1))]}; done
V=0.1.0-SNAPSHOT
CORE=jvm/warren-core/target/warren-core-$V.jar
RUNNER=jvm/warren-runner/target/warren-runner-$V.jar
SCALA=jvm/warren-scala/target/warren-scala_2.13-$V.jar
SPARK=jvm/warren-spark/target/warren-spark_2.13-$V.jar
FLINK=jvm/warren-flink/target/warren-flink-$V.jar
SPARK_APP=spark-examples/target/warren-spark-examples_2.13-$V.jar
FLINK_APP=jvm/flink-examples/target/warren-flink-examples-$V.jar
for j in $CORE $RUNNER $SCALA $SPARK $FLINK $SPARK_APP $FLINK_APP; do
  [ -f "$j" ] || { echo "build first: make bench-flink-spark (missing $j)" >&2; exit 1; }
done
OUT=bench/results/flink-vs-spark.md
mkdir -p bench/results
SPARK_HOME="$(scripts/setup-spark.sh | sed -n 's/^SPARK_HOME=//p')"
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1
WORK=$(mktemp -d /tmp/warren-flink-vs-spark.XXXXXX)
trap 'scripts/flink-standalone.sh stop "$WORK/flink" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
scripts/flink-standalone.sh start "$WORK/flink" "$WORKERS" 1 -- "$ROOT/$CORE" "$ROOT/$RUNNER" "$ROOT/$FLINK" >"$WORK/flink.out"
FLINK_HOME_CLUSTER=$(sed -n 's/^FLINK_HOME=//p' "$WORK/flink.out")

# one_run SIDE N: runs one job, prints "ITER_MS HASH"
one_run() {
  local side=$1 n=$2 log="$WORK/$1-$2"
  if [ "$side" = spark ]; then
    timeout 1800 "$SPARK_HOME/bin/spark-submit" --master "local-cluster[$WORKERS,1,1024]" \
      --conf spark.executor.memory=900m --conf spark.ui.enabled=false --conf spark.warren.progressInterval=0 \
      --driver-java-options "-Dlog4j2.configurationFile=file:$ROOT/spark-examples/conf/log4j2-quiet.properties -Dwarren.spark.log=$log.spark.log" \
      --jars "$CORE,$RUNNER,$SCALA,$SPARK" --class io.warren.examples.LogisticRegression "$SPARK_APP" \
      "${ARGS[@]}" >"$log.out" 2>"$log.err"
  else
    FLINK_CONF_DIR="$FLINK_HOME_CLUSTER/conf" FLINK_LOG_DIR="$WORK" timeout 1800 "$FLINK_HOME_CLUSTER/bin/flink" run \
      -c io.warren.examples.flink.LogisticRegression "$FLINK_APP" "${ARGS[@]}" --set warren.progressInterval=0 \
      >"$log.out" 2>"$log.err"
  fi || { echo "$side run $n failed; its output: $log.out $log.err" >&2; tail -20 "$log.err" >&2; exit 1; }
  echo "$(sed -n 's/^ITER_MS //p' "$log.out") $(sed -n 's/^MODEL_HASH //p' "$log.out")"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
spark_ms=() flink_ms=() hashes=()
one_run flink 0 >/dev/null # warm-up: the cluster's first job loads the classes
for r in $(seq "$REPEATS"); do
  read -r ms h < <(one_run spark "$r"); spark_ms+=("$ms"); hashes+=("$h")
  read -r ms h < <(one_run flink "$r"); flink_ms+=("$ms"); hashes+=("$h")
  echo "repeat $r: spark ${spark_ms[-1]} ms, flink ${flink_ms[-1]} ms per iteration" >&2
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "${ARGS[*]}" "$REPEATS" "$LOAD_BEFORE" "$LOAD_AFTER" "${spark_ms[*]}" "${flink_ms[*]}" "${hashes[*]}" <<'EOF'
import statistics, sys, time
out, args, repeats, before, after, spark, flink, hashes = sys.argv[1:]
spark = [float(x) for x in spark.split()]
flink = [float(x) for x in flink.split()]
distinct = sorted(set(hashes.split()))
assert len(distinct) == 1, f"the two examples trained different models: {distinct}"
ms, mf = statistics.median(spark), statistics.median(flink)
lines = [
    f"Run of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: `{args}`, {repeats} runs of each side"
    f" alternated, load average {before} before and {after} after; both sides' MODEL_HASH {distinct[0][:16]}...",
    "",
    "| side | median ms per iteration | runs (ms) |",
    "|---|---|---|",
    f"| Spark (local-cluster, spark-submit) | {ms:.2f} | {', '.join(f'{x:.2f}' for x in spark)} |",
    f"| Flink (standalone, flink run) | {mf:.2f} | {', '.join(f'{x:.2f}' for x in flink)} |",
    "",
    f"Flink / Spark: {mf / ms:.3f} (target <= 1.1)",
]
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
EOF

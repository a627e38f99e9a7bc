#!/usr/bin/env bash
# `make demo`: the logistic-regression example with spark-submit on local-cluster[3,1,1024]
# (three executor JVMs), with a failure, quietly: Warren's lines on the terminal (the
# tracker, the runner's progress and recovery lines, the loss per iteration, the accuracy,
# MODEL_HASH), Spark's own log in a file this script names. It ends by comparing MODEL_HASH
# with the failure-free model recorded in spark-examples/demo-model-hash.txt, which
# tests/test_standalone_cluster.py keeps true.
#
#   DEMO_ARGS='--kill-executor 8' (default: halt the executor JVM of task 1 at iteration 8),
#   '--kill-task 8' (throw in task 1 instead), '' (no failure)
#   DEMO_LOG_DIR (default target/demo): where Spark's log goes
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=$(sed -n 's|^  <version>\(.*\)</version>|\1|p' jvm/pom.xml | head -1)
jars="jvm/warren-core/target/warren-core-$version.jar,jvm/warren-runner/target/warren-runner-$version.jar,jvm/warren-scala/target/warren-scala_2.13-$version.jar,jvm/warren-spark/target/warren-spark_2.13-$version.jar"
app="spark-examples/target/warren-spark-examples_2.13-$version.jar"
for j in ${jars//,/ } $app; do
  [ -f "$j" ] || { echo "demo: $j is missing (make demo builds it)" >&2; exit 1; }
done
read -r -a job < <(sed -n 's/^args //p' spark-examples/demo-model-hash.txt)
want=$(sed -n 's/^hash //p' spark-examples/demo-model-hash.txt)
failure=(${DEMO_ARGS---kill-executor 8})

log_dir="${DEMO_LOG_DIR:-$root/target/demo}"
mkdir -p "$log_dir"
log="$log_dir/spark.log"
: >"$log"
out="$log_dir/stdout"
quiet="-Dlog4j2.configurationFile=file:$root/spark-examples/conf/log4j2-quiet.properties -Dwarren.spark.log=$log"

SPARK_HOME="$(scripts/setup-spark.sh | sed -n 's/^SPARK_HOME=//p')"
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1
echo "== Warren on Spark: logistic regression, ${job[*]}, ${failure[*]:-no failure}"
echo "== Spark's own log: $log (the executors' output: $SPARK_HOME/work/)"
start=$(date +%s)
# The JVM's own start-up warning is not a log line; everything else on stderr is Warren's.
"$SPARK_HOME/bin/spark-submit" --master 'local-cluster[3,1,1024]' --conf spark.ui.enabled=false \
  --driver-java-options "$quiet" --conf "spark.executor.extraJavaOptions=$quiet" \
  --conf spark.warren.progressInterval=2 \
  --class io.warren.examples.LogisticRegression --jars "$jars" "$app" "${job[@]}" "${failure[@]}" \
  2> >(grep --line-buffered -v '^WARNING: Using incubator modules' >&2) | tee "$out"
got=$(sed -n 's/^MODEL_HASH //p' "$out")
echo "== finished in $(($(date +%s) - start)) s"
if [ "$got" = "$want" ]; then
  echo "== MODEL_HASH equals the failure-free model's (spark-examples/demo-model-hash.txt)"
else
  echo "== MODEL_HASH DIFFERS from the failure-free model's: $got vs $want (spark-examples/demo-model-hash.txt)" >&2
  exit 1
fi

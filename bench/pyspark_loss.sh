#!/usr/bin/env bash
# One lost executor in a PySpark training job: xgboost.spark against warren.spark.train, each
# without a failure and with one executor JVM SIGKILLed halfway through the fit, on
# local-cluster[3,1,1024] (bench/pyspark_loss.py). Installs the Python side into
# .bench-venv-pyspark (xgboost and its Spark dependencies, pinned here; Warren's package from
# this checkout); needs the jars of `make jvm`.
# Reproduce: bash bench/pyspark_loss.sh      (about 6 minutes; KILL_AT=F kills at F x the clean fit's time)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.bench-venv-pyspark
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check numpy==2.4.6 xgboost==3.2.0 pandas==3.1.1 \
  pyarrow==26.0.1 scikit-learn==1.9.1 ./
SPARK_HOME="$(scripts/setup-spark.sh | sed -n 's/^SPARK_HOME=//p')"
exec "$venv/bin/python" bench/pyspark_loss.py --spark-home "$SPARK_HOME" --python "$PWD/$venv/bin/python" \
  --kill-at "${KILL_AT:-0.5}"

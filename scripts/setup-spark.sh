#!/usr/bin/env bash
# Installs Spark 4.3 (the pyspark 4.3.0 wheel, a full distribution with Scala 2.13 jars) into a
# virtualenv and makes a SPARK_HOME of symlinks to its bin/, jars/ and sbin/, so that what
# local-cluster mode writes (work/, logs/) stays out of site-packages. Idempotent: a second run
# only prints the SPARK_HOME. Used by `make demo`, the Spark tests and .ci/run.
#
#   scripts/setup-spark.sh          # prints SPARK_HOME=<dir> as its last line
#
# WARREN_SPARK_DIR (default <repo>/.spark) holds the venv and the SPARK_HOME;
# WARREN_SPARK_VERSION (default 4.3.0) picks another pyspark, e.g. 3.5.9 (Scala 2.12 jars)
# for the Spark 3.5 build, in a directory of its own:
#   WARREN_SPARK_DIR=.spark-3.5 WARREN_SPARK_VERSION=3.5.9 scripts/setup-spark.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${WARREN_SPARK_DIR:-$root/.spark}"
version=4.3.0
# WARREN_SPARK_VERSION picks another (scripts/setup.sh reads the default from the line above).
spark_version="${WARREN_SPARK_VERSION:-$version}"
home="$dir/home"
venv="$dir/venv"
if [ ! -x "$home/bin/spark-submit" ] || [ ! -f "$dir/.pyspark-$spark_version" ]; then
  mkdir -p "$dir"
  if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2; then
    "$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$spark_version" >&2
    pkg="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
  else
    # No venv module (Debian without python3-venv): a plain target directory.
    rm -rf "$venv"
    python3 -m pip install -q --disable-pip-version-check --target "$dir/site" "pyspark==$spark_version" >&2
    pkg="$dir/site/pyspark"
  fi
  rm -rf "$home"
  mkdir -p "$home"
  for d in bin jars sbin; do
    ln -s "$pkg/$d" "$home/$d"
  done
  [ -d "$pkg/python" ] && ln -s "$pkg/python" "$home/python"
  touch "$dir/.pyspark-$spark_version"
fi
echo "SPARK_HOME=$home"

#!/usr/bin/env bash
# Installs Flink 2.3 (the apache-flink and apache-flink-libraries 2.3.0 wheels, which carry a
# full distribution: lib/ with Flink's jars, bin/, conf/, opt/, plugins/) into a virtualenv,
# without PyFlink's Python dependencies (only the JVM distribution is used), and makes a
# FLINK_HOME of symlinks to it, so that nothing is written into site-packages. Idempotent: a
# second run only prints the FLINK_HOME. Used by scripts/flink-standalone.sh, the standalone
# Flink test (tests/test_flink_standalone.py) and the Flink-vs-Spark benchmark.
#
#   scripts/setup-flink.sh          # prints FLINK_HOME=<dir> as its last line
#
# WARREN_FLINK_DIR (default <repo>/.flink) holds the venv and the FLINK_HOME.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${WARREN_FLINK_DIR:-$root/.flink}"
version=2.3.0
home="$dir/home"
venv="$dir/venv"
if [ ! -x "$home/bin/flink" ] || [ ! -f "$dir/.apache-flink-$version" ]; then
  mkdir -p "$dir"
  pkgs=("apache-flink==$version" "apache-flink-libraries==$version")
  if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2; then
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "${pkgs[@]}" >&2
    python="$venv/bin/python"
  else
    # No venv module (Debian without python3-venv): a plain target directory.
    rm -rf "$venv"
    python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dir/site" "${pkgs[@]}" >&2
    python="env PYTHONPATH=$dir/site python3"
  fi
  # find_spec does not run pyflink/__init__.py (which would want the Python dependencies).
  pkg="$($python -c 'import importlib.util as u; print(u.find_spec("pyflink").submodule_search_locations[0])')"
  rm -rf "$home"
  mkdir -p "$home"
  for d in bin lib opt plugins conf; do
    [ -e "$pkg/$d" ] && ln -s "$pkg/$d" "$home/$d"
  done
  [ -x "$home/bin/flink" ] || { echo "setup-flink: $pkg has no bin/flink" >&2; exit 1; }
  touch "$dir/.apache-flink-$version"
fi
echo "FLINK_HOME=$home"

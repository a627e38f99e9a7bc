#!/usr/bin/env bash
# RecordIO read throughput (none / snappy / gzip) next to raw reads of the same files.
# Prints one JSON line per compressor; see native/warren/examples/recordio_read_bench.rs.
#
#   bench/recordio_read.sh [--mib 256] [--dir DIR] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p warren --example recordio_read_bench -- "$@"

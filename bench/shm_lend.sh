#!/usr/bin/env bash
# Large allreduces over same-host shared memory: Warren's rings only (WARREN_SHM_CMA=0),
# Warren with single-copy loans (the default) and Open MPI's shared-memory transport
# (--mca btl self,vader, which copies large messages with the same system call), back to back.
#
#   bash bench/shm_lend.sh          # then: python3 bench/shm_lend_report.py <the results file>
#
# For every repetition, N in $WORKERS and size in $SIZES: mpi4py's comm.Allreduce under
# mpirun, then `warren bench allreduce` (WARREN_TRANSPORT=auto, plain mode unless
# WARREN_ROBUST=1) with WARREN_SHM_CMA=0 and =1; float32 sum, $ITERS timed calls each. One JSON
# line per run with the 1-min load at its start and end, in $OUT (default
# bench/results/shm-lend-<date>.jsonl). Loans are used only while the host has a core per worker
# (N = 2 on a 2-core machine: at N = 4 both Warren runs use the rings).
# Needs bench/setup.sh (Open MPI, mpi4py) and a release build (cargo build --release -p warren-cli).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
WARREN="${WARREN:-target/release/warren}"
WORKERS="${WORKERS:-2}"
SIZES="${SIZES:-16777216 67108864}"
REPEAT="${REPEAT:-5}"
ITERS="${ITERS:-60}"
ROBUST="${WARREN_ROBUST:-0}"
PYTHON="${PYTHON:-python3}"
mkdir -p bench/results
OUT="${OUT:-bench/results/shm-lend-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl}"
load() { cut -d' ' -f1 /proc/loadavg; }
for rep in $(seq 1 "$REPEAT"); do
  for n in $WORKERS; do
    for bytes in $SIZES; do
      for impl in mpi-shm warren-rings warren-lend; do
        start=$(load)
        case $impl in
          mpi-shm)
            line=$(timeout 300 mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader -n "$n" \
              "$PYTHON" bench/mpi_allreduce.py -n "$n" --bytes "$bytes" --iters "$ITERS" --dtype f32 --op sum 2>/dev/null \
              | grep median_s || true) ;;
          *)
            cma=0; [ "$impl" = warren-lend ] && cma=1
            line=$(WARREN_SHM_CMA=$cma WARREN_TRANSPORT=auto WARREN_ROBUST=$ROBUST timeout 300 "$WARREN" bench allreduce \
              -n "$n" --bytes "$bytes" --iters "$ITERS" --dtype f32 --op sum 2>/dev/null | grep median_s || true) ;;
        esac
        med=$(grep -o '"median_s":[0-9.e-]*' <<<"$line" | cut -d: -f2 || true)
        printf '{"rep":%s,"impl":"%s","workers":%s,"bytes":%s,"iters":%s,"robust":%s,"median_s":%s,"load_start":%s,"load_end":%s}\n' \
          "$rep" "$impl" "$n" "$bytes" "$ITERS" "$ROBUST" "${med:-null}" "$start" "$(load)" | tee -a "$OUT"
      done
    done
  done
done
echo "results: $OUT" >&2

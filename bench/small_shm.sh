#!/usr/bin/env bash
# The 4-byte allreduce over same-host shared memory: this build, an earlier build and Open MPI's
# shared-memory transport (--mca btl self,vader), back to back in one run.
#
#   WARREN_REF=/path/to/earlier/warren bash bench/small_shm.sh
#
# For every repetition and N in $WORKERS: Warren (this build, then the reference) in plain
# and robust mode with WARREN_TRANSPORT=auto, and mpi4py's comm.Allreduce under mpirun with
# the vader BTL; float32 sum, $ITERS timed calls each. One JSON line per run, with the 1-min
# load average at the start and the end, in $OUT (default bench/results/small-shm-<date>.jsonl).
# Needs bench/setup.sh (Open MPI, mpi4py) and a release build (cargo build --release -p warren-cli).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
WARREN="${WARREN:-target/release/warren}"
WARREN_REF="${WARREN_REF:-}"
WORKERS="${WORKERS:-4 2}"
REPEAT="${REPEAT:-3}"
ITERS="${ITERS:-2000}"
PYTHON="${PYTHON:-python3}"
mkdir -p bench/results
OUT="${OUT:-bench/results/small-shm-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl}"
impls=(new-plain mpi-shm new-robust)
[ -n "$WARREN_REF" ] && impls=(new-plain ref-plain mpi-shm new-robust ref-robust)
load() { cut -d' ' -f1 /proc/loadavg; }
for rep in $(seq 1 "$REPEAT"); do
  for n in $WORKERS; do
    for impl in "${impls[@]}"; do
      start=$(load)
      case $impl in
        mpi-shm)
          line=$(timeout 120 mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader -n "$n" \
            "$PYTHON" bench/mpi_allreduce.py -n "$n" --bytes 4 --iters "$ITERS" --dtype f32 --op sum 2>/dev/null | grep median_s || true) ;;
        *)
          bin=$WARREN; [ "${impl%%-*}" = ref ] && bin=$WARREN_REF
          robust=0; [ "${impl#*-}" = robust ] && robust=1
          line=$(WARREN_TRANSPORT=auto WARREN_ROBUST=$robust timeout 120 "$bin" bench allreduce -n "$n" --bytes 4 \
            --iters "$ITERS" --dtype f32 --op sum 2>/dev/null | grep median_s || true) ;;
      esac
      med=$(grep -o '"median_s":[0-9.e-]*' <<<"$line" | cut -d: -f2 || true)
      printf '{"rep":%s,"impl":"%s","workers":%s,"bytes":4,"iters":%s,"median_s":%s,"load_start":%s,"load_end":%s}\n' \
        "$rep" "$impl" "$n" "$ITERS" "${med:-null}" "$start" "$(load)" | tee -a "$OUT"
    done
  done
done
echo "results: $OUT" >&2

#!/usr/bin/env bash
# Allreduce benchmark: Warren vs XGBoost's collective vs Open MPI (TCP), side by side.
#
#   bash bench/setup.sh        # once: Open MPI, iperf3, pinned xgboost/numpy/mpi4py
#   bash bench/allreduce.sh    # the sweep, then bench/report.py -> docs/benchmarks.md
#
# For every N in $WORKERS and every size in $SIZES it runs Warren, XGBoost and MPI back
# to back (same size, same minute, so machine noise hits all three alike; the order is
# rotated from size to size), float32 sum, iteration counts scaled by size; the whole
# sweep runs $REPEAT times (~1.5 min each on 2 cores without Warren). Every run
# has a timeout; a failed or missing implementation becomes an error row, never a crash.
# Results: bench/results/allreduce-<UTC date-time>.jsonl (one JSON line per run).
#
# Environment knobs:
#   WARREN=path        warren binary (default target/release/warren; missing -> "pending")
#   WORKERS="2 4"      world sizes
#   SIZES="4 1024 65536 1048576 16777216 67108864"   bytes per rank (multiple of 4)
#   ITER_SCALE=1       multiply every iteration count (e.g. 0.05 for a smoke test)
#   REPEAT=3           whole sweeps; the report keeps, per cell, the run with the median
#                      median (a burst of load from other users then spoils one run only)
#   TIMEOUT=300        seconds per run
#   IMPLS="warren warren-robust warren-lent xgboost mpi warren-shm mpi-shm"   which to run:
#                      warren, xgboost and mpi over TCP (warren with WARREN_TRANSPORT=tcp);
#                      warren-robust (Warren in robust mode, WARREN_ROBUST=1, the default for
#                      users) and warren-lent (robust, the allreduce that lends its result,
#                      `--lent`) over TCP next to plain Warren; warren-shm (Warren's same-host
#                      shared-memory links, WARREN_TRANSPORT=auto) and mpi-shm (Open MPI's shared
#                      memory, --mca btl self,vader); warren-tls for Warren's TCP links under TLS
#                      (WARREN_TLS=1)
#   REPORT=1           run bench/report.py at the end (0: only collect)
#   OUT=path           results file
#   QUIET_LOAD=x       before starting, wait (up to QUIET_WAIT=900 s) until the 1-min load
#                      average is below x: other users' builds on a shared machine
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
PYTHON="${PYTHON:-python3}"
WARREN="${WARREN:-target/release/warren}"
# Warren in plain mode, like the references (no result buffering); robust-mode overhead is
# measured separately by bench/recovery.sh.
export WARREN_ROBUST="${WARREN_ROBUST:-0}"
WORKERS="${WORKERS:-2 4}"
SIZES="${SIZES:-4 1024 65536 1048576 16777216 67108864}"
ITER_SCALE="${ITER_SCALE:-1}"
REPEAT="${REPEAT:-3}"
TIMEOUT="${TIMEOUT:-300}"
read -r -a impls <<<"${IMPLS:-warren warren-robust warren-lent xgboost mpi warren-shm mpi-shm}"
REPORT="${REPORT:-1}"
mkdir -p bench/results
OUT="${OUT:-bench/results/allreduce-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl}"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,tcp
        --mca btl_tcp_if_include lo)
MPIRUN_SHM=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
reproduce="bash bench/setup.sh && bash bench/allreduce.sh"

log() { printf '[allreduce %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Iterations by size: ~2000 for tiny messages down to 20 for 64 MiB.
iters_for() {
  local b=$1 k
  if   [ "$b" -le 4096 ];     then k=2000
  elif [ "$b" -le 262144 ];   then k=1000
  elif [ "$b" -le 4194304 ];  then k=200
  elif [ "$b" -le 33554432 ]; then k=50
  else                             k=20
  fi
  "$PYTHON" -c "import sys; print(max(3, round($k * float(sys.argv[1]))))" "$ITER_SCALE"
}

# run_one IMPL N BYTES ITERS CMD...: runs CMD under timeout, appends one record to $OUT.
run_one() {
  local impl=$1 n=$2 b=$3 k=$4; shift 4
  local rc t0 t1
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$TIMEOUT" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  t1=$(date +%s.%N)
  "$PYTHON" bench/record.py run --impl "$impl" -n "$n" --bytes "$b" --iters "$k" --rc "$rc" \
      --timeout "$TIMEOUT" --stdout "$tmp/out" --stderr "$tmp/err" --cmd "$*" >>"$OUT"
  log "$(printf '%-8s n=%s bytes=%-9s iters=%-5s rc=%s %5.1fs  %s' "$impl" "$n" "$b" "$k" "$rc" \
        "$(awk "BEGIN{print $t1 - $t0}")" "$(tail -1 "$OUT" | cut -c1-150)")"
}

warren_ok=1
if [ ! -x "$WARREN" ]; then
  warren_ok=0
  log "WARNING: warren binary not found or not executable at '$WARREN'."
  log "         Build it with 'cargo build --release -p warren-cli' or set WARREN=/path/to/warren."
  log "         Warren's cells will read 'pending'; the references run anyway."
fi
for tool in mpirun "$PYTHON"; do
  command -v "$tool" >/dev/null || log "WARNING: '$tool' not found: run bench/setup.sh first (its rows will be errors)."
done

if [ -n "${QUIET_LOAD:-}" ]; then
  waited=0
  until awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v q="$QUIET_LOAD" 'BEGIN{exit !(l < q)}'; do
    if [ "$waited" -ge "${QUIET_WAIT:-900}" ]; then
      log "load average still $(cut -d' ' -f1 /proc/loadavg) after ${waited} s; starting anyway"
      break
    fi
    [ $((waited % 60)) = 0 ] && log "waiting for load average < $QUIET_LOAD (now $(cut -d' ' -f1 /proc/loadavg))"
    sleep 10; waited=$((waited + 10))
  done
fi

log "results -> $OUT"
"$PYTHON" bench/record.py meta --phase start --warren "$WARREN" --command "$reproduce" >>"$OUT"

# Loopback TCP ceiling: one stream, 4-byte ping-pong (blocking and busy-poll).
# Run before and after the sweep: the spread shows how much the machine moved.
tcp_ceiling() {
  run_one tcp-stream 2 0 0 bench/tcp/tcpprobe stream --seconds 3
  # Blocking ping-pong is bimodal on a VM: two processes on one CPU wake each other
  # with a context switch, on two CPUs with a cross-CPU wake-up; pin both placements.
  local pp=(bench/tcp/tcpprobe pingpong --bytes 4 --iters 20000)
  if [ "$(nproc)" -ge 2 ]; then
    run_one tcp-pingpong 2 4 20000 "${pp[@]}" --cpus 0,1
    run_one tcp-pingpong-samecpu 2 4 20000 "${pp[@]}" --cpus 0,0
    run_one tcp-pingpong-spin 2 4 20000 "${pp[@]}" --spin --cpus 0,1
  else
    run_one tcp-pingpong 2 4 20000 "${pp[@]}"
  fi
  if command -v iperf3 >/dev/null; then
    local port=$((20000 + RANDOM % 20000)) ipid irc
    iperf3 -s -B 127.0.0.1 -p "$port" -1 >/dev/null 2>&1 &
    ipid=$!
    sleep 0.5
    timeout 30 iperf3 -c 127.0.0.1 -p "$port" -t 3 -J >"$tmp/iperf.json" 2>&1
    irc=$?
    "$PYTHON" - "$tmp/iperf.json" "$irc" >"$tmp/out" 2>"$tmp/err" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["end"]["sum_received"]
print(json.dumps({"impl": "iperf3", "test": "stream", "streams": 1,
                  "bytes_total": s["bytes"], "seconds": round(s["seconds"], 3),
                  "gbps": s["bits_per_second"] / 8e9}))
PY
    "$PYTHON" bench/record.py run --impl iperf3 -n 2 --bytes 0 --iters 0 --rc $? \
        --stdout "$tmp/out" --stderr "$tmp/err" --cmd "iperf3 -c 127.0.0.1 -t 3" >>"$OUT"
    kill "$ipid" 2>/dev/null; wait "$ipid" 2>/dev/null
  fi
}
make -s -C bench/tcp >/dev/null 2>"$tmp/make.err" || log "WARNING: could not build bench/tcp/tcpprobe: $(tail -1 "$tmp/make.err")"
tcp_ceiling

for rep in $(seq 1 "$REPEAT"); do
[ "$REPEAT" -gt 1 ] && log "sweep $rep of $REPEAT"
for n in $WORKERS; do
  i=$((rep - 1))
  for b in $SIZES; do
    k=$(iters_for "$b")
    for j in "${!impls[@]}"; do
      impl=${impls[$(( (i + j) % ${#impls[@]} ))]}
      case $impl in
        warren-robust)
          run_one warren-robust "$n" "$b" "$k" env WARREN_ROBUST=1 WARREN_TRANSPORT=tcp "$WARREN" bench allreduce \
            -n "$n" --bytes "$b" --iters "$k" --dtype f32 --op sum ;;
        warren-lent)
          run_one warren-lent "$n" "$b" "$k" env WARREN_ROBUST=1 WARREN_TRANSPORT=tcp "$WARREN" bench allreduce \
            -n "$n" --bytes "$b" --iters "$k" --dtype f32 --op sum --lent ;;
        warren-tls)
          run_one warren-tls "$n" "$b" "$k" env WARREN_TLS=1 WARREN_TRANSPORT=tcp "$WARREN" bench allreduce \
            -n "$n" --bytes "$b" --iters "$k" --dtype f32 --op sum ;;
        warren-shm)
          run_one warren-shm "$n" "$b" "$k" env WARREN_TRANSPORT=auto "$WARREN" bench allreduce -n "$n" --bytes "$b" \
            --iters "$k" --dtype f32 --op sum ;;
        mpi-shm)
          run_one mpi-shm "$n" "$b" "$k" "${MPIRUN_SHM[@]}" -n "$n" "$PYTHON" bench/mpi_allreduce.py -n "$n" \
            --bytes "$b" --iters "$k" --dtype f32 --op sum ;;
        warren)
          if [ "$warren_ok" = 1 ]; then
            run_one warren "$n" "$b" "$k" env WARREN_TRANSPORT=tcp "$WARREN" bench allreduce -n "$n" --bytes "$b" \
              --iters "$k" --dtype f32 --op sum
          else
            printf '{"impl":"warren","workers":%s,"bytes":%s,"iters":%s,"error":"pending: warren binary not found at %s"}\n' \
              "$n" "$b" "$k" "$WARREN" >>"$OUT"
          fi ;;
        xgboost)
          run_one xgboost "$n" "$b" "$k" "$PYTHON" bench/xgboost_allreduce.py -n "$n" --bytes "$b" --iters "$k" \
            --dtype f32 --op sum --timeout "$((TIMEOUT - 20))" ;;
        mpi)
          run_one mpi "$n" "$b" "$k" "${MPIRUN[@]}" -n "$n" "$PYTHON" bench/mpi_allreduce.py -n "$n" --bytes "$b" \
            --iters "$k" --dtype f32 --op sum ;;
      esac
    done
    i=$((i + 1))
  done
done
done

tcp_ceiling
"$PYTHON" bench/record.py meta --phase end >>"$OUT"
log "done: $OUT"
if [ "$REPORT" = 1 ]; then
  "$PYTHON" bench/report.py "$OUT" --docs docs/benchmarks.md
fi

#!/usr/bin/env bash
# Warren against an earlier build of itself, in the same run: has a change made the
# collectives or the parameter server slower?
#
#   bash bench/regression.sh                      # this tree vs the commit before HEAD
#   REF=main~3 bash bench/regression.sh           # vs any commit (built into .bench-ref/)
#   WARREN_REF=/path/to/old/warren bash bench/regression.sh   # vs a binary you built
#
# For every mode (plain, robust), N in $WORKERS and size in $SIZES it runs the new and the
# reference binary back to back (the order alternates from run to run, so load on the
# shared machine hits both alike), $REPEAT times. The report (bench/regression_report.py)
# gives each side's median of the per-run medians and the ratio new/ref (below 1: faster).
# Results: bench/results/regression-<UTC date-time>.jsonl; the table goes to stdout and,
# with DOCS=path, into that Markdown file between `<!-- regression:begin/end -->` markers.
#
# Then, alternating the same way, the sparse parameter-server model (`warren bench ps --model
# sparse --bags`: 2 trainers, 2 servers in the benchmark's process, PS_STEPS timed steps after
# PS_WARMUP) in each of $PS_MODES; its cells compare the median step time.
#
# Knobs: WARREN (new binary, default target/release/warren), REF / WARREN_REF, WORKERS="2 4",
# SIZES="4 65536 1048576 16777216 67108864", REPEAT=5, MODES="plain robust", TIMEOUT=120,
# TRANSPORT=tcp (WARREN_TRANSPORT of both sides: builds without shared-memory links ignore it,
# so `auto` only compares like with like when the reference has them too), PS_MODES="async sync"
# ("" for none), PS_STEPS=100, PS_WARMUP=60.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
WARREN="${WARREN:-target/release/warren}"
WORKERS="${WORKERS:-2 4}"
SIZES="${SIZES:-4 65536 1048576 16777216 67108864}"
REPEAT="${REPEAT:-5}"
MODES="${MODES:-plain robust}"
TIMEOUT="${TIMEOUT:-120}"
PS_MODES="${PS_MODES-async sync}"
PS_STEPS="${PS_STEPS:-100}"
PS_WARMUP="${PS_WARMUP:-60}"
mkdir -p bench/results
OUT="${OUT:-bench/results/regression-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl}"
log() { printf '[regression %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[ -x "$WARREN" ] || { log "no $WARREN: run 'cargo build --release -p warren-cli' first"; exit 1; }
if [ -z "${WARREN_REF:-}" ]; then
  ref="${REF:-HEAD~1}"
  rev="$(git rev-parse --verify "$ref^{commit}")"
  dir="$root/.bench-ref"
  log "building the reference $ref ($rev) in $dir"
  if [ -d "$dir/.git" ] || [ -f "$dir/.git" ]; then
    git -C "$dir" checkout -q --detach "$rev"
  else
    git worktree add -f --detach "$dir" "$rev" >/dev/null
  fi
  # Reuse this tree's compiled dependencies on the first build of the reference.
  [ -d "$dir/target" ] || { [ -d target/release ] && mkdir -p "$dir/target" && cp -a target/release "$dir/target/"; }
  (cd "$dir" && cargo build --release -q -p warren-cli)
  WARREN_REF="$dir/target/release/warren"
fi
[ -x "$WARREN_REF" ] || { log "reference binary $WARREN_REF is missing"; exit 1; }

iters_for() {
  local b=$1
  if   [ "$b" -le 4096 ];     then echo 2000
  elif [ "$b" -le 262144 ];   then echo 1000
  elif [ "$b" -le 4194304 ];  then echo 200
  elif [ "$b" -le 33554432 ]; then echo 50
  else                             echo 20
  fi
}

run() { # run SIDE BINARY MODE N BYTES ITERS
  local side=$1 bin=$2 mode=$3 n=$4 b=$5 k=$6 robust line
  robust=$([ "$mode" = robust ] && echo 1 || echo 0)
  if line="$(WARREN_ROBUST=$robust WARREN_TRANSPORT="${TRANSPORT:-tcp}" WARREN_LOG=warn timeout --kill-after=5 "$TIMEOUT" \
        "$bin" bench allreduce -n "$n" --bytes "$b" --iters "$k" --dtype f32 --op sum 2>/dev/null | tail -1)" \
     && [ -n "$line" ]; then
    printf '{"side":"%s","mode":"%s","run":%s}\n' "$side" "$mode" "$line" >>"$OUT"
  else
    printf '{"side":"%s","mode":"%s","run":{"workers":%s,"bytes":%s,"error":"failed or timed out"}}\n' \
      "$side" "$mode" "$n" "$b" >>"$OUT"
  fi
}

ps_run() { # ps_run SIDE BINARY MODE
  local side=$1 bin=$2 mode=$3 line
  if line="$(WARREN_LOG=warn timeout --kill-after=5 "$TIMEOUT" "$bin" bench ps --model sparse --bags \
        --trainers 2 --servers 2 --steps "$PS_STEPS" --warmup "$PS_WARMUP" --mode "$mode" 2>/dev/null | tail -1)" \
     && [ -n "$line" ]; then
    printf '{"side":"%s","mode":"ps-%s","run":%s}\n' "$side" "$mode" "$line" >>"$OUT"
  else
    printf '{"side":"%s","mode":"ps-%s","run":{"bench":"ps_sparse","error":"failed or timed out"}}\n' \
      "$side" "$mode" >>"$OUT"
  fi
}

log "new: $WARREN; ref: $WARREN_REF; results -> $OUT"
printf '{"meta":{"new":"%s","ref":"%s","date":"%s","load":"%s","nproc":%s}}\n' \
  "$WARREN" "$WARREN_REF" "$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" >>"$OUT"
flip=0
for rep in $(seq 1 "$REPEAT"); do
  log "sweep $rep of $REPEAT"
  for mode in $MODES; do
    for n in $WORKERS; do
      for b in $SIZES; do
        k=$(iters_for "$b")
        if [ $flip = 0 ]; then
          run new "$WARREN" "$mode" "$n" "$b" "$k"; run ref "$WARREN_REF" "$mode" "$n" "$b" "$k"
        else
          run ref "$WARREN_REF" "$mode" "$n" "$b" "$k"; run new "$WARREN" "$mode" "$n" "$b" "$k"
        fi
        flip=$((1 - flip))
      done
    done
  done
  for mode in $PS_MODES; do
    if [ $flip = 0 ]; then
      ps_run new "$WARREN" "$mode"; ps_run ref "$WARREN_REF" "$mode"
    else
      ps_run ref "$WARREN_REF" "$mode"; ps_run new "$WARREN" "$mode"
    fi
    flip=$((1 - flip))
  done
done
python3 bench/regression_report.py "$OUT" ${DOCS:+--docs "$DOCS"}

#!/usr/bin/env bash
# Parameter server, a killed server with a 64 MiB shard (docs/benchmarks-ps.md): two server
# processes (`warren ps --index I`, checkpointing every EVERY steps), a sync job of two trainers
# (`warren bench ps --uris`, a dense model of 2 x SHARD bytes, each step a pull and a push of
# the whole model), SIGKILL of server 1 after KILL_AT steps, its replacement started PAUSE
# seconds later on the same port and checkpoint directory. Measured: replacement start ->
# the first step every trainer completes afterwards (the trainers push again what the
# checkpoint lacks). One JSON line in bench/results/ps_recovery-<time>.jsonl, with the load.
#
#   bench/ps_recovery.sh            SHARD=67108864 STEPS=12 KILL_AT=5 EVERY=2 PAUSE=1 REPEAT=1
#
# KEEP_LOGS=DIR keeps each repetition's server and trainer logs and step log there (rep-N/).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARD=${SHARD:-67108864} STEPS=${STEPS:-12} KILL_AT=${KILL_AT:-5} EVERY=${EVERY:-2} PAUSE=${PAUSE:-1}
REPEAT=${REPEAT:-1}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
mkdir -p bench/results
OUT=bench/results/ps_recovery-$(date -u +%Y%m%dT%H%M%S).jsonl
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
export WARREN_JOB_SECRET=bench-ps-recovery WARREN_LOG=${WARREN_LOG:-warn}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
server() { # index port -> pid
  WARREN_LOG=info "$B" ps --servers 2 --index "$1" --port "$2" --checkpoint-dir "$WORK/ckpt" --checkpoint-every-steps "$EVERY" \
    --checkpoint-every-s 0 >>"$WORK/server-$1.log" 2>&1 &
  echo $!
}
steps_done() { [ -s "$WORK/steps" ] && awk '{print $2}' "$WORK/steps" | sort -n | tail -1 || echo -1; }
for _rep in $(seq "$REPEAT"); do
  rm -rf "$WORK/ckpt" "$WORK/steps"
  P0=$(port) P1=$(port)
  S0=$(server 0 "$P0"); S1=$(server 1 "$P1"); PIDS=("$S0" "$S1")
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$B" bench ps --uris "127.0.0.1:$P0,127.0.0.1:$P1" --bytes $((2 * SHARD)) --trainers 2 --servers 2 \
    --steps "$STEPS" --warmup 0 --mode sync --step-log "$WORK/steps" >"$WORK/bench.json" 2>"$WORK/bench.log" &
  BENCH=$!; PIDS+=("$BENCH")
  deadline=$((SECONDS + 600))
  until [ "$(steps_done)" -ge "$KILL_AT" ]; do
    [ $SECONDS -lt $deadline ] || { echo "no step $KILL_AT within 600 s" >&2; exit 1; }
    kill -0 "$BENCH" 2>/dev/null || { cat "$WORK/bench.log" >&2; exit 1; }
    sleep 0.05
  done
  kill -KILL "$S1"; wait "$S1" 2>/dev/null || true
  killed_after=$(steps_done)
  sleep "$PAUSE"
  T0=$(date +%s.%N)
  S1=$(server 1 "$P1"); PIDS=("$S0" "$S1" "$BENCH")
  if ! timeout 900 tail --pid="$BENCH" -f /dev/null; then echo "the trainers did not finish" >&2; exit 1; fi
  wait "$BENCH" || { cat "$WORK/bench.log" >&2; exit 1; }
  # The first step each trainer completed after the replacement started; resumed = the
  # later of the two (every trainer back).
  resume=$(awk -v t0="$T0" '$3 > t0 { if (!($1 in f) || $3 < f[$1]) f[$1] = $3 }
    END { m = 0; n = 0; for (t in f) { n++; if (f[t] - t0 > m) m = f[t] - t0 }; if (n < 2) print -1; else printf "%.3f", m }' "$WORK/steps")
  step_s=$(sed 's/.*"step_s":\([0-9.]*\).*/\1/' "$WORK/bench.json")
  ckpt_ms=$(grep -ho "written in [0-9.]*[mµ]*s" "$WORK"/server-*.log | tail -1 || true)
  echo "{\"bench\":\"ps_recovery\",\"shard_bytes\":$SHARD,\"trainers\":2,\"servers\":2,\"mode\":\"sync\",\"checkpoint_every_steps\":$EVERY,\"killed_after_step\":$killed_after,\"step_s\":$step_s,\"resume_s\":$resume,\"last_checkpoint\":\"$ckpt_ms\",\"load1\":$load}" | tee -a "$OUT"
  kill "$S0" "$S1" 2>/dev/null || true; wait "$S0" "$S1" 2>/dev/null || true
  if [ -n "${KEEP_LOGS:-}" ]; then
    keep="$KEEP_LOGS/rep-$_rep"; mkdir -p "$keep"
    cp "$WORK"/server-*.log "$WORK"/bench.log "$WORK"/steps "$keep"/ && echo "replacement started at $T0" >"$keep/t0"
  fi
  rm -f "$WORK"/server-*.log
done
echo "results in $OUT"

#!/usr/bin/env bash
# The cost of the reduction order: a 16 MiB float32 sum allreduce of four workers (robust
# mode, the default; ROBUST=0: plain) under WARREN_REDUCTION_ORDER=ranks and =hosts,
# alternating, in the same run:
#   - on one machine over loopback, hosts simulated with WARREN_HOST_ID: all four on one
#     host, two hosts with ranks 0-1 and 2-3 ("contiguous"), two hosts with ranks 0,2 and
#     1,3 ("alternating");
#   - between two simulated hosts (network namespaces, links limited with `tc tbf`, needs
#     root): the same two placements (native/warren-cli/tests/it/netns.rs,
#     bench_reduction_orders_between_two_hosts).
#
#   bash bench/reduction_order.sh     # builds in release mode; ~5 min of runs on a quiet machine
#
# Knobs (environment): REPEAT=5 (runs of each order and placement), ITERS=10 (timed calls per
# run), BYTES=16777216, WARREN_NETNS_MBIT=1000, ROBUST=1, LOOPBACK=1 and NETNS=1 (0: skip the
# loopback runs or the namespaces),
# OUT=bench/results/reduction-order-<date>.jsonl. Each line: `warren bench allreduce`'s JSON
# plus run, setup and order. The summary: per setup, the median over runs of each order's
# median call time, and the median of the per-run ratios ranks / hosts.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
ITERS=${ITERS:-10}
BYTES=${BYTES:-16777216}
ROBUST=${ROBUST:-1}
MODE=$([ "$ROBUST" = 0 ] && echo plain || echo robust)
OUT=${OUT:-bench/results/reduction-order-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
cargo build --release -p warren-cli >/dev/null 2>&1 || cargo build --release -p warren-cli
WARREN=$PWD/target/release/warren
echo "load before: $(uptime)" >&2

# One loopback run: 4 workers, host of task $t from the shell expression $2, order $3.
loopback() {
  local setup="$1, $MODE" hosts=$2 order=$3 run=$4
  local line
  line=$(WARREN_ROBUST=$ROBUST WARREN_REDUCTION_ORDER=$order WARREN_LOG=warn "$WARREN" run -n 4 -- sh -c \
    "t=\$WARREN_TASK_ID; WARREN_HOST_ID=h\$(($hosts)) exec \"\$0\" bench allreduce --worker --workers 4 \
     --bytes $BYTES --iters $ITERS --warmup 2 --dtype f32 --op sum" "$WARREN" | grep '^{' | tail -n 1)
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(run=int(sys.argv[2]), setup=sys.argv[3], order=sys.argv[4]); print(json.dumps(r))' \
    "$line" "$run" "$setup" "$order" | tee -a "$OUT"
}

for run in $(seq 0 $((REPEAT - 1))); do
  [ "${LOOPBACK:-1}" = 1 ] || break
  for p in "loopback, 1 host|0" "loopback, 2 hosts, contiguous|t / 2" "loopback, 2 hosts, alternating|t % 2"; do
    for order in ranks hosts; do
      loopback "${p%%|*}" "${p#*|}" "$order" "$run"
    done
  done
done

if [ "${NETNS:-1}" = 1 ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  WARREN_NETNS_ROBUST=$ROBUST WARREN_NETNS_REPEAT=$REPEAT WARREN_NETNS_ITERS=$ITERS WARREN_NETNS_BYTES=$BYTES \
    cargo test --profile release -p warren-cli --test it -- --ignored --exact \
    netns::bench_reduction_orders_between_two_hosts --nocapture --test-threads 1 >"$log" 2>&1 ||
    { tail -40 "$log" >&2; exit 1; }
  grep -o 'ORDER_BENCH {.*}' "$log" | sed 's/^ORDER_BENCH //' | tee -a "$OUT"
fi
echo "load after: $(uptime)" >&2

python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| setup | ranks: median ms | hosts: median ms | ranks / hosts (median of runs) |")
print("|---|---|---|---|")
for setup in dict.fromkeys(r["setup"] for r in rows):
    by = {o: {r["run"]: r["median_s"] for r in rows if r["setup"] == setup and r["order"] == o} for o in ("ranks", "hosts")}
    runs = sorted(set(by["ranks"]) & set(by["hosts"]))
    ratios = [by["ranks"][k] / by["hosts"][k] for k in runs]
    med = {o: statistics.median(by[o].values()) * 1e3 for o in by}
    print(f'| {setup} | {med["ranks"]:.1f} | {med["hosts"]:.1f} | {statistics.median(ratios):.2f} '
          f'({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} runs) |')
PY
echo "results: $OUT"

#!/usr/bin/env bash
# Allreduce between simulated hosts, Warren against Open MPI in the same namespaces: HOSTS
# network namespaces on one bridge (a switch), each host's link limited with `tc tbf` on both
# ends of its veth pair, PER_HOST workers on each host, float32 sum. Warren runs its flat ring
# (WARREN_REDUCTION_ORDER=ranks, the default) and its hierarchy of hosts (`hosts`), plain and
# robust; Open MPI runs over its TCP BTL (mpirun in a namespace of its own, its daemons started
# in the hosts' namespaces by an `ip netns exec` launch agent). The implementations alternate
# in a rotating order for every size and repeat, so load from other work hits them alike.
# Needs root (`ip netns`, `tc`) and bench/setup.sh (Open MPI, mpi4py).
#
#   bash bench/setup.sh && bash bench/netns_compare.sh
#
# Knobs (environment): HOSTS=16, PER_HOST=2, MBIT=1000 (each host's link, Mbit/s; 0: no
# limit), SIZES="16777216 67108864" (bytes per rank), ITERS=5 (timed calls), WARMUP=10 (untimed
# calls first: robust mode keeps each call's result until the next checkpoint, every 8 calls
# here, and its first 8 calls also allocate those buffers),
# REPEAT=3, IMPLS="warren-ring warren-hosts warren-ring-robust mpi" (also warren-hosts-robust and
# warren-ring-lent: robust, the allreduce that lends its result; mpi-ring: Open MPI with its ring
# algorithm forced instead of its own choice), WARREN=target/release/warren,
# PYTHON=python3, TIMEOUT=600 (seconds per run), OUT=bench/results/netns-compare-<date>.jsonl.
# Each line: the implementation's JSON line plus impl, hosts, per_host, link_mbit, run and
# busbw_over_link. A summary table (median busbw per cell, ratio to Open MPI) ends the run.
set -uo pipefail
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-16}
PER_HOST=${PER_HOST:-2}
MBIT=${MBIT:-1000}
SIZES=${SIZES:-16777216 67108864}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-10}
REPEAT=${REPEAT:-3}
TIMEOUT=${TIMEOUT:-600}
WARREN=$(realpath "${WARREN:-target/release/warren}")
PYTHON=$(command -v "${PYTHON:-python3}")
read -r -a impls <<<"${IMPLS:-warren-ring warren-hosts warren-ring-robust mpi}"
OUT=${OUT:-bench/results/netns-compare-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
mkdir -p "$(dirname "$OUT")"
N=$((HOSTS * PER_HOST))
P=wcmp$$                      # prefix of every name this run makes
SUBNET=10.81.0
SECRET=netns-compare-secret
tmp=$(mktemp -d)

log() { printf '[netns %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P"); do ip netns del "$ns"; done
  ip link del "${P}br" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# One bridge; host i is namespace ${P}h$i at $SUBNET.(i+2); the tracker's and mpirun's
# namespace ${P}t at $SUBNET.1 is not limited.
burst=$(( MBIT * 1000000 / 8 / 250 )); [ "$burst" -lt 98304 ] && burst=98304
ip link add "${P}br" type bridge && ip link set "${P}br" up || { log "needs root and ip netns"; exit 1; }
add_host() { # name address limit?
  local ns=$1 addr=$2 limit=$3 o i
  o="${ns}o" i="${ns}i"
  ip netns add "$ns"
  ip link add "$o" type veth peer name "$i"
  ip link set "$i" netns "$ns"
  ip link set "$o" master "${P}br" up
  ip -n "$ns" addr add "$addr/24" dev "$i"
  ip -n "$ns" link set "$i" up
  ip -n "$ns" link set lo up
  if [ "$limit" = 1 ] && [ "$MBIT" != 0 ]; then
    ip -n "$ns" link set "$i" txqueuelen 1000
    tc -n "$ns" qdisc add dev "$i" root tbf rate "${MBIT}mbit" burst "$burst" latency 20ms
    tc qdisc add dev "$o" root tbf rate "${MBIT}mbit" burst "$burst" latency 20ms
  fi
}
add_host "${P}t" "$SUBNET.1" 0
hostlist=""
for h in $(seq 0 $((HOSTS - 1))); do
  add_host "${P}h$h" "$SUBNET.$((h + 2))" 1
  hostlist="$hostlist${hostlist:+,}${P}h$h:$PER_HOST"
done

# Open MPI's launch agent: "agent [options] HOST COMMAND": COMMAND in HOST's namespace.
cat >"$tmp/agent" <<'AGENT'
#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
exec ip netns exec "$host" sh -c "$*"
AGENT
chmod +x "$tmp/agent"

port=20000
run_warren() { # order robust bytes [extra bench flags]
  local order=$1 robust=$2 bytes=$3 extra=${4:-} pids=() rc=0 h w task
  port=$((port + 1))
  ip netns exec "${P}t" env WARREN_JOB_SECRET=$SECRET WARREN_LOG=error "$WARREN" tracker -n "$N" \
    --host "$SUBNET.1" --port "$port" >"$tmp/tracker" 2>&1 &
  local tracker=$!
  for h in $(seq 0 $((HOSTS - 1))); do
    for w in $(seq 0 $((PER_HOST - 1))); do
      task=$((h * PER_HOST + w))
      ip netns exec "${P}h$h" env WARREN_TRACKER_URI="$SUBNET.1:$port" WARREN_NUM_WORKERS=$N \
        WARREN_JOB_SECRET=$SECRET WARREN_TASK_ID=$task WARREN_ATTEMPT=0 WARREN_TIMEOUT_S=120 \
        WARREN_CONNECT_TIMEOUT_S=60 WARREN_HOST_ID="host$h" WARREN_ROBUST="$robust" \
        WARREN_REDUCTION_ORDER="$order" WARREN_LOG=warn \
        timeout "$TIMEOUT" "$WARREN" bench allreduce --worker --warmup "$WARMUP" --dtype f32 --op sum \
        --workers "$N" --bytes "$bytes" --iters "$ITERS" $extra >"$tmp/w$task" 2>"$tmp/e$task" &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  kill "$tracker" 2>/dev/null; wait "$tracker" 2>/dev/null
  [ "$rc" = 0 ] || { log "warren failed (rc $rc): $(tail -3 "$tmp/e0" "$tmp/e1" 2>/dev/null | tr '\n' ' ')"; return 1; }
  grep -h '^{' "$tmp"/w* | head -1
}
run_mpi() { # bytes [extra mpirun options]: the JSON line; a run that fails is tried again once
  local try
  for try in 1 2; do
    mpi_once "$@" && return 0
    log "mpi failed (try $try): $(tail -3 "$tmp/mpierr" | tr '\n' ' ' | cut -c1-300)"
  done
  return 1
}
mpi_once() {
  local bytes=$1; shift
  local session; session=$(mktemp -d "$tmp/ompi.XXXXXX")
  # Between back-to-back runs PMIx's shared-memory store ("PMIX ERROR ... dstore_base.c") and
  # the session directory ("orte_session_dir failed") failed now and then: the hash store and
  # a session directory per run do not. A daemon that cannot reach mpirun ("ORTE was unable to
  # reliably start one or more daemons") still happens in about one run of six.
  ip netns exec "${P}t" env PMIX_MCA_gds=hash timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe \
    --mca plm_rsh_agent "$tmp/agent" --host "$hostlist" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
    --mca orte_tmpdir_base "$session" "$@" -n "$N" \
    "$PYTHON" bench/mpi_allreduce.py -n "$N" --bytes "$bytes" --iters "$ITERS" --warmup "$WARMUP" \
    --dtype f32 --op sum 2>"$tmp/mpierr" | grep '^{' | tail -1
}

log "$HOSTS hosts x $PER_HOST workers, links ${MBIT} Mbit/s, sizes $SIZES, $REPEAT repeats -> $OUT"
k=0
for run in $(seq 0 $((REPEAT - 1))); do
  for bytes in $SIZES; do
    for j in "${!impls[@]}"; do
      impl=${impls[$(( (j + k) % ${#impls[@]} ))]}
      t0=$(date +%s)
      case $impl in
        warren-ring) line=$(run_warren ranks 0 "$bytes") ;;
        warren-hosts) line=$(run_warren hosts 0 "$bytes") ;;
        warren-ring-robust) line=$(run_warren ranks 1 "$bytes") ;;
        warren-hosts-robust) line=$(run_warren hosts 1 "$bytes") ;;
        warren-ring-lent) line=$(run_warren ranks 1 "$bytes" --lent) ;;
        mpi) line=$(run_mpi "$bytes") ;;
        mpi-ring) line=$(run_mpi "$bytes" --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4) ;;
        *) log "unknown implementation $impl"; exit 2 ;;
      esac || line=""
      if [ -n "$line" ]; then
        echo "$line" | "$PYTHON" -c '
import json, sys
r = json.loads(sys.stdin.read())
impl, hosts, per_host, mbit, run = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r.update(impl=impl, hosts=hosts, per_host=per_host, link_mbit=mbit, run=run)
r["busbw_over_link"] = r["busbw_gbps"] * 8000 / mbit if mbit else None
print(json.dumps(r))' "$impl" "$HOSTS" "$PER_HOST" "$MBIT" "$run" | tee -a "$OUT" | cut -c1-160
      else
        printf '{"impl":"%s","bytes":%s,"hosts":%s,"per_host":%s,"run":%s,"error":"failed"}\n' \
          "$impl" "$bytes" "$HOSTS" "$PER_HOST" "$run" >>"$OUT"
      fi
      log "$impl $bytes B: $(( $(date +%s) - t0 )) s"
    done
    k=$((k + 1))
  done
done
"$PYTHON" - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in rows if "busbw_gbps" in r]
cells = {}
for r in ok:
    cells.setdefault((r["bytes"], r["impl"]), []).append(r["busbw_gbps"])
for b in sorted({k[0] for k in cells}):
    ref = statistics.median(cells.get((b, "mpi"), [float("nan")]))
    for (bb, impl), v in sorted(cells.items()):
        if bb == b:
            m = statistics.median(v)
            print(f"{b >> 20:>3} MiB {impl:<20} busbw {m:.3f} GB/s  x{m / ref:.2f} Open MPI  runs {[round(x, 3) for x in v]}")
failed = [r for r in rows if "error" in r]
if failed:
    print(f"{len(failed)} runs failed")
PY
echo "results: $OUT"

#!/usr/bin/env bash
# The data master through its network service (`warren bench master`): file store, separate
# (hand-outs answered at once, the default, and with --durable-hand-outs)
# and combined calls, against the snapshot-on-every-change store, and the etcd store (one and two
# flushes in flight, separate and combined calls; a real
# etcd started here on free ports with a temporary data directory, stopped at the end), with
# 1, 8 and 32 clients, interleaved so that every ratio compares runs made minutes apart on the
# same (shared) machine. With WARREN_REF=/path/to/other/warren, that binary's file and etcd
# runs are interleaved too (e.g. a build of the previous commit, for a before/after ratio).
# One JSON line per run in bench/results/master_service-<time>.jsonl, with the 1-minute load
# average when the run started; a table of the rates and ratios at the end (bench/master_report.py).
#
#   bench/master_service.sh [TASKS]        (default 100000)
#   ETCD=0 skips the etcd rows; CLIENTS="8" runs one client count.
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${1:-100000}
CLIENTS=${CLIENTS:-1 8 32}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
mkdir -p bench/results
OUT=bench/results/master_service-$(date -u +%Y%m%dT%H%M%S).jsonl
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  "$bin" bench master --tasks "$TASKS" "$@" 2>/dev/null | sed "s/^{/{\"label\":\"$label\",\"load1\":$load,/" | tee -a "$OUT"
}

# etcd: Debian's etcd-server, one member on 127.0.0.1, free ports, data in a temporary
# directory (on the same disk as the file store's). The dataset change of 100,000 chunks is
# ~1 MB gzipped, so requests up to 32 MiB are accepted as in the tests.
ETCD_PID= ETCD_DIR=
stop_etcd() {
  if [ -n "$ETCD_PID" ]; then kill "$ETCD_PID" 2>/dev/null || true; wait "$ETCD_PID" 2>/dev/null || true; fi
  [ -n "$ETCD_DIR" ] && rm -rf "$ETCD_DIR"
  return 0
}
trap stop_etcd EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
if [ "${ETCD:-1}" != 0 ]; then
  command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server); ETCD=0 skips it" >&2; exit 1; }
  ETCD_DIR=$(mktemp -d)
  CPORT=$(free_port) PPORT=$(free_port)
  ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name bench --data-dir "$ETCD_DIR/data" \
    --listen-client-urls "http://127.0.0.1:$CPORT" --advertise-client-urls "http://127.0.0.1:$CPORT" \
    --listen-peer-urls "http://127.0.0.1:$PPORT" --initial-advertise-peer-urls "http://127.0.0.1:$PPORT" \
    --initial-cluster "bench=http://127.0.0.1:$PPORT" --max-request-bytes 33554432 \
    >"$ETCD_DIR/etcd.log" 2>&1 &
  ETCD_PID=$!
  # Healthy (GET /health), not just listening: etcd accepts connections before it has a leader.
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$CPORT" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && grep -q '"health":"true"' <&3) \
      2>/dev/null && break
    kill -0 "$ETCD_PID" 2>/dev/null || { cat "$ETCD_DIR/etcd.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "etcd $(etcd --version | head -1 | awk '{print $3}') on 127.0.0.1:$CPORT (pid $ETCD_PID)"
fi
etcd_spec() { echo "etcd:127.0.0.1:$CPORT/bench/$(date +%s%N)"; }  # a fresh prefix per run

for c in $CLIENTS; do
  run file "$B" --clients "$c"
  run file-durable-hand-outs "$B" --clients "$c" --durable-hand-outs
  [ -n "${WARREN_REF:-}" ] && run ref "$WARREN_REF" --clients "$c"
  if [ -n "$ETCD_PID" ]; then
    run etcd "$B" --clients "$c" --store "$(etcd_spec)"
    [ -n "${WARREN_REF:-}" ] && run etcd-ref "$WARREN_REF" --clients "$c" --store "$(etcd_spec)"
    run etcd-2-flushes "$B" --clients "$c" --store "$(etcd_spec)" --etcd-flushes-in-flight 2
    run etcd-durable-hand-outs "$B" --clients "$c" --store "$(etcd_spec)" --durable-hand-outs
  fi
  run file-combined "$B" --clients "$c" --mode combined
  [ -n "$ETCD_PID" ] && run etcd-combined "$B" --clients "$c" --mode combined --store "$(etcd_spec)"
  snap=$(mktemp -d)
  run snapshot "$B" --clients "$c" --store "snapshot:$snap/s" --max-completions 50
  rm -rf "$snap"
done
echo "results: $OUT"
python3 bench/master_report.py "$OUT"

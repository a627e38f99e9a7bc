#!/usr/bin/env bash
# The data master through its network service (`warren bench master`): file store, separate
# and combined calls, against the snapshot-on-every-change store, with 1, 8 and 32 clients,
# interleaved so that every ratio compares runs made minutes apart on the same (shared)
# machine. With WARREN_REF=/path/to/other/warren, that binary's file/separate runs are
# interleaved too (e.g. a build of an earlier commit, for a before/after ratio).
# One JSON line per run in bench/results/master_service-<time>.jsonl, plus the load average.
#
#   bench/master_service.sh [TASKS]        (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
TASKS=${1:-100000}
B=${WARREN:-target/release/warren}
[ -x "$B" ] || cargo build --release -p warren-cli
mkdir -p bench/results
OUT=bench/results/master_service-$(date -u +%Y%m%dT%H%M%S).jsonl
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  "$bin" bench master --tasks "$TASKS" "$@" 2>/dev/null | sed "s/^{/{\"label\":\"$label\",\"load1\":$load,/" | tee -a "$OUT"
}
for c in 1 8 32; do
  run file "$B" --clients "$c"
  [ -n "${WARREN_REF:-}" ] && run ref "$WARREN_REF" --clients "$c"
  run file-combined "$B" --clients "$c" --mode combined
  snap=$(mktemp -d)
  run snapshot "$B" --clients "$c" --store "snapshot:$snap/s" --max-completions 50
  rm -rf "$snap"
done
echo "results: $OUT"

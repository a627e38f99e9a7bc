#!/usr/bin/env bash
# A Spark standalone cluster, a master and workers, from a Spark distribution: the pyspark
# package has no sbin/start-master.sh, so this starts the daemons with bin/spark-class. The
# docker images use the same script as their entrypoint (`master` and `worker`).
#
# On this host, in the background, on free loopback ports, each daemon with its own work dir:
#   spark-standalone.sh start DIR [WORKERS [CORES [MEMORY]]]   # default 2 workers, 2 cores, 2g each;
#                                                              # prints SPARK_MASTER_URL=spark://...
#   spark-standalone.sh add-worker DIR [CORES [MEMORY]]        # one more worker
#   spark-standalone.sh stop DIR                               # stops every daemon started under DIR
#   spark-standalone.sh run DIR [WORKERS [CORES [MEMORY]]]     # start, wait; stop on exit, Ctrl-C or TERM
# In the foreground (a container's process), on fixed ports:
#   spark-standalone.sh master                                 # SPARK_MASTER_HOST, SPARK_MASTER_PORT (7077),
#                                                              # SPARK_MASTER_WEBUI_PORT (8080)
#   spark-standalone.sh worker MASTER_URL                      # SPARK_WORKER_CORES, SPARK_WORKER_MEMORY,
#                                                              # SPARK_WORKER_DIR
#
# SPARK_HOME is the distribution (default: the one scripts/setup-spark.sh installs). DIR keeps
# master.url, the master's web UI address (master.webui), one log and one work dir per daemon,
# and their pids; `start` waits (SPARK_STANDALONE_TIMEOUT s, default 120) until every worker
# has registered, and stops what it started if that fails. The master's REST submission
# server is off (it would take the fixed port 6066); spark-submit --deploy-mode cluster uses
# the master's RPC port instead.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${SPARK_HOME:-}" ]; then
  SPARK_HOME="$("$here/setup-spark.sh" | sed -n 's/^SPARK_HOME=//p')"
fi
export SPARK_HOME
timeout_s="${SPARK_STANDALONE_TIMEOUT:-120}"
master_class=org.apache.spark.deploy.master.Master
worker_class=org.apache.spark.deploy.worker.Worker
export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=false"

die() { echo "spark-standalone: $*" >&2; exit 1; }

# wait_for FILE REGEX WHAT PID: until a line of FILE matches REGEX; fails if PID exits or after
# the deadline, naming WHAT and FILE.
wait_for() {
  local file=$1 regex=$2 what=$3 pid=$4 waited=0
  until grep -qE "$regex" "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || die "$what exited before it was ready; its log: $file"
    [ "$waited" -lt $((timeout_s * 5)) ] || die "$what not ready after ${timeout_s} s; its log: $file"
    sleep 0.2
    waited=$((waited + 1))
  done
}

# Daemons on this host listen on loopback only (the web UIs too).
host_mode() { export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"; }

start_master() {
  local dir=$1
  mkdir -p "$dir/master"
  (cd "$dir/master" && exec "$SPARK_HOME/bin/spark-class" $master_class \
    --host "$SPARK_LOCAL_IP" --port 0 --webui-port 0 >"$dir/master.log" 2>&1) &
  echo $! >"$dir/master.pid"
  wait_for "$dir/master.log" 'Starting Spark master at spark://' "the master" "$(cat "$dir/master.pid")"
  sed -n 's|.*Starting Spark master at \(spark://[^ ]*\).*|\1|p' "$dir/master.log" | head -1 >"$dir/master.url"
  wait_for "$dir/master.log" 'New state: ALIVE' "the master" "$(cat "$dir/master.pid")"
  sed -n 's|.*Bound MasterWebUI to .*started at \(http://[^ ]*\).*|\1|p' "$dir/master.log" | head -1 >"$dir/master.webui"
}

add_worker() {
  local dir=$1 cores=${2:-2} memory=${3:-2g} n=1
  [ -s "$dir/master.url" ] || die "no master under $dir (run start first)"
  while [ -e "$dir/worker-$n" ]; do n=$((n + 1)); done
  mkdir -p "$dir/worker-$n/local"
  (cd "$dir/worker-$n" && SPARK_LOCAL_DIRS="$dir/worker-$n/local" exec "$SPARK_HOME/bin/spark-class" \
    $worker_class --host "$SPARK_LOCAL_IP" --webui-port 0 --cores "$cores" --memory "$memory" \
    --work-dir "$dir/worker-$n" "$(cat "$dir/master.url")" >"$dir/worker-$n.log" 2>&1) &
  echo $! >"$dir/worker-$n.pid"
  echo "$n"
}

start() {
  local dir=$1 workers=${2:-2} cores=${3:-2} memory=${4:-2g} n
  [ ! -e "$dir/master.pid" ] || die "$dir already has a cluster (stop it first)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  # A failure (or a signal) half-way stops what was started.
  trap 'stop "$dir"' EXIT
  start_master "$dir"
  local started=()
  for _ in $(seq "$workers"); do started+=("$(add_worker "$dir" "$cores" "$memory")"); done
  for n in "${started[@]}"; do
    wait_for "$dir/worker-$n.log" 'Successfully registered with master' "worker $n" "$(cat "$dir/worker-$n.pid")"
  done
  trap - EXIT
  echo "SPARK_MASTER_URL=$(cat "$dir/master.url")"
  echo "SPARK_MASTER_WEBUI=$(cat "$dir/master.webui")"
}

# Stops the daemons under DIR: TERM (a worker then stops its executors and drivers), KILL
# after 15 s.
stop() {
  local dir=$1 pids=() pid f
  for f in "$dir"/worker-*.pid "$dir"/master.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null && pids+=("$pid") && kill -TERM "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  for _ in $(seq 75); do
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

# A signal ends the script through its EXIT trap (which stops what it started).
trap 'exit 130' INT
trap 'exit 143' TERM HUP

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  start)
    [ $# -ge 1 ] || die "usage: spark-standalone.sh start DIR [WORKERS [CORES [MEMORY]]]"
    host_mode
    start "$@" ;;
  add-worker)
    [ $# -ge 1 ] || die "usage: spark-standalone.sh add-worker DIR [CORES [MEMORY]]"
    host_mode
    dir="$(cd "$1" && pwd)"
    n=$(add_worker "$dir" "${2:-2}" "${3:-2g}")
    wait_for "$dir/worker-$n.log" 'Successfully registered with master' "worker $n" "$(cat "$dir/worker-$n.pid")"
    echo "WORKER=$n" ;;
  stop)
    [ $# -eq 1 ] || die "usage: spark-standalone.sh stop DIR"
    stop "$1" ;;
  run)
    [ $# -ge 1 ] || die "usage: spark-standalone.sh run DIR [WORKERS [CORES [MEMORY]]]"
    host_mode
    mkdir -p "$1"
    dir="$(cd "$1" && pwd)"
    start "$@"
    trap 'stop "$dir"' EXIT
    echo "cluster up; Ctrl-C stops it"
    # Returns when the master exits (or a signal ends the script).
    while kill -0 "$(cat "$dir/master.pid")" 2>/dev/null; do sleep 1; done ;;
  master)
    exec "$SPARK_HOME/bin/spark-class" $master_class --host "${SPARK_MASTER_HOST:-$(hostname)}" \
      --port "${SPARK_MASTER_PORT:-7077}" --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}" ;;
  worker)
    [ $# -eq 1 ] || die "usage: spark-standalone.sh worker MASTER_URL"
    mkdir -p "${SPARK_WORKER_DIR:-/tmp/spark-worker}"
    exec "$SPARK_HOME/bin/spark-class" $worker_class --host "${SPARK_WORKER_HOST:-$(hostname)}" \
      --webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}" --cores "${SPARK_WORKER_CORES:-2}" \
      --memory "${SPARK_WORKER_MEMORY:-2g}" --work-dir "${SPARK_WORKER_DIR:-/tmp/spark-worker}" "$1" ;;
  *)
    die "usage: spark-standalone.sh start|add-worker|stop|run DIR ... or master|worker (see the header)" ;;
esac

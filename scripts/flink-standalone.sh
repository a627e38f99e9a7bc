#!/usr/bin/env bash
# A Flink standalone session cluster on this host: a JobManager and TaskManagers, each a JVM of
# its own (bin/jobmanager.sh and bin/taskmanager.sh start-foreground, in the background), on
# loopback.
#
#   flink-standalone.sh start DIR [TASKMANAGERS [SLOTS]] [-- JAR...]
#       # default 3 TaskManagers of 1 slot; JARs (Warren's) go into the cluster's lib/;
#       # prints FLINK_HOME=DIR/home (its bin/flink submits to this cluster),
#       # FLINK_REST=http://127.0.0.1:PORT and FLINK_REST_PORT=PORT
#   flink-standalone.sh add-taskmanager DIR      # one more TaskManager; prints TASKMANAGER=N and its PID=
#   flink-standalone.sh stop DIR                 # stops every process started under DIR
#
# FLINK_HOME is the distribution (default: the one scripts/setup-flink.sh installs). DIR gets
# home/ (a FLINK_HOME: a copy of the distribution's bin/, symlinks to its opt/ and plugins/, lib/
# with symlinks to its jars and to JARs, conf/ with this cluster's config.yaml), one log per process, and their pids. The
# configuration: fixed-delay restarts, region failover, heartbeats every second (a SIGKILLed
# TaskManager is declared lost after two refused heartbeats; a frozen one after
# heartbeat.timeout: FLINK_HEARTBEAT_TIMEOUT_MS, default 30000), 1 GiB per process (no managed
# memory).
# `start` waits (FLINK_STANDALONE_TIMEOUT s, default 180) until every TaskManager has
# registered, and stops what it started if that fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${FLINK_HOME:-}" ]; then
  FLINK_HOME="$("$here/setup-flink.sh" | sed -n 's/^FLINK_HOME=//p')"
fi
timeout_s="${FLINK_STANDALONE_TIMEOUT:-180}"
# Flink 2.x on Java 17: the distribution's module flags (env.java.opts.all of its config.yaml).
read -r -a java_opens <<<"$(sed -n 's/^ *all: \(--add-.*\)$/\1/p' "$FLINK_HOME/conf/config.yaml" | head -1)"
[ ${#java_opens[@]} -gt 0 ] || { echo "flink-standalone: no env.java.opts.all in $FLINK_HOME/conf/config.yaml" >&2; exit 1; }

die() { echo "flink-standalone: $*" >&2; exit 1; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

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

# The cluster's FLINK_HOME: symlinks to the distribution, lib/ with the extra jars, own conf/.
make_home() {
  local dir=$1 slots=$2 rpc_port=$3 rest_port=$4
  shift 4
  local home="$dir/home" f
  mkdir -p "$home/lib" "$home/conf" "$home/log" "$dir/flink-log"
  # bin/ copied: its scripts take FLINK_HOME from their own physical directory.
  cp -r "$(readlink -f "$FLINK_HOME/bin")" "$home/bin"
  for f in opt plugins; do
    [ -e "$FLINK_HOME/$f" ] && ln -sfn "$(readlink -f "$FLINK_HOME/$f")" "$home/$f"
  done
  for f in "$FLINK_HOME"/lib/*.jar "$@"; do
    [ -f "$f" ] || die "no such jar: $f"
    ln -sf "$(readlink -f "$f")" "$home/lib/"
  done
  for f in "$FLINK_HOME"/conf/log4j*.properties; do
    [ -f "$f" ] && cp "$f" "$home/conf/"
  done
  cat >"$home/conf/config.yaml" <<EOF_CONF
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc_port
jobmanager.bind-host: 127.0.0.1
jobmanager.memory.process.size: 1024m
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
taskmanager.numberOfTaskSlots: $slots
taskmanager.memory.process.size: 1024m
taskmanager.memory.managed.size: 0m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest_port
parallelism.default: 1
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 3
restart-strategy.fixed-delay.delay: 1 s
jobmanager.execution.failover-strategy: region
heartbeat.interval: 1000
heartbeat.timeout: ${FLINK_HEARTBEAT_TIMEOUT_MS:-30000}
io.tmp.dirs: $dir/tmp
env.java.opts.all: ${java_opens[*]}
EOF_CONF
  mkdir -p "$dir/tmp"
}

# run_service DIR NAME SERVICE [ARGS...]: bin/SERVICE.sh start-foreground (which sizes the JVM
# from the configuration and execs it) in the background, its console in DIR/NAME.log, its pid
# in DIR/NAME.pid.
run_service() {
  local dir=$1 name=$2 service=$3
  shift 3
  (FLINK_CONF_DIR="$dir/home/conf" FLINK_LOG_DIR="$dir/flink-log" FLINK_PID_DIR="$dir" \
    exec "$dir/home/bin/$service.sh" start-foreground "$@" >"$dir/$name.log" 2>&1) &
  echo $! >"$dir/$name.pid"
}

add_taskmanager() {
  local dir=$1 n=1
  [ -s "$dir/jobmanager.pid" ] || die "no JobManager under $dir (run start first)"
  while [ -e "$dir/taskmanager-$n.pid" ] || [ -e "$dir/taskmanager-$n.log" ]; do n=$((n + 1)); done
  run_service "$dir" "taskmanager-$n" taskmanager "-Dtaskmanager.resource-id=taskmanager-$n"
  echo "$n"
}

start() {
  local dir=$1 counts=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do counts+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  local taskmanagers=${counts[0]:-3} slots=${counts[1]:-1}
  [ ! -e "$dir/jobmanager.pid" ] || die "$dir already has a cluster (stop it first)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  trap 'stop "$dir"' EXIT
  local rpc_port rest_port
  rpc_port=$(free_port)
  rest_port=$(free_port)
  make_home "$dir" "$slots" "$rpc_port" "$rest_port" "$@"
  run_service "$dir" jobmanager jobmanager
  local started=() n
  for _ in $(seq "$taskmanagers"); do started+=("$(add_taskmanager "$dir")"); done
  wait_for "$dir/jobmanager.log" 'Rest endpoint listening at' "the JobManager" "$(cat "$dir/jobmanager.pid")"
  for n in "${started[@]}"; do
    wait_for "$dir/taskmanager-$n.log" 'Successful registration at resource manager' "TaskManager $n" \
      "$(cat "$dir/taskmanager-$n.pid")"
  done
  trap - EXIT
  echo "FLINK_HOME=$dir/home"
  echo "FLINK_REST=http://127.0.0.1:$rest_port"
  echo "FLINK_REST_PORT=$rest_port"
}

# Stops the processes under DIR: TERM, KILL after 15 s.
stop() {
  local dir=$1 pids=() pid f
  for f in "$dir"/taskmanager-*.pid "$dir"/jobmanager.pid; do
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
    [ $# -ge 1 ] || die "usage: flink-standalone.sh start DIR [TASKMANAGERS [SLOTS]] [-- JAR...]"
    start "$@" ;;
  add-taskmanager)
    [ $# -eq 1 ] || die "usage: flink-standalone.sh add-taskmanager DIR"
    dir="$(cd "$1" && pwd)"
    n=$(add_taskmanager "$dir")
    wait_for "$dir/taskmanager-$n.log" 'Successful registration at resource manager' "TaskManager $n" \
      "$(cat "$dir/taskmanager-$n.pid")"
    echo "TASKMANAGER=$n"
    echo "PID=$(cat "$dir/taskmanager-$n.pid")" ;;
  stop)
    [ $# -eq 1 ] || die "usage: flink-standalone.sh stop DIR"
    stop "$1" ;;
  *)
    die "usage: flink-standalone.sh start|add-taskmanager|stop DIR ... (see the header)" ;;
esac

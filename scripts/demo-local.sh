#!/usr/bin/env bash
# The local demo: the same 4-worker training job twice, once undisturbed and once with a worker
# killed (kill -9, from outside) half-way; retry-one recovery re-runs only that worker and the
# job ends with the same model, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WARREN:-target/release/warren}
ITERS=${ITERS:-100}
JOB=(run -n 4 -- "$W" example train --iters "$ITERS" --model-bytes 4194304 --compute-ms 10)

echo "== 1/2: 4 workers, $ITERS iterations, no failure"
"$W" "${JOB[@]}" | tee /tmp/warren-demo-1.out
want=$(sed -n 's/^MODEL_HASH //p' /tmp/warren-demo-1.out)

echo "== 2/2: the same job; one worker is killed with SIGKILL after 1 s"
"$W" "${JOB[@]}" > /tmp/warren-demo-2.out &
launcher=$!
sleep 1
victim=$(pgrep -P "$launcher" | sed -n 2p)
echo "   kill -9 $victim (one of the workers)"
kill -9 "$victim"
wait "$launcher"
cat /tmp/warren-demo-2.out
got=$(sed -n 's/^MODEL_HASH //p' /tmp/warren-demo-2.out)

if [ -n "$want" ] && [ "$want" = "$got" ]; then
  echo "== the job survived the killed worker and ended with the same model: $got"
else
  echo "== MODELS DIFFER: $want vs $got" >&2
  exit 1
fi

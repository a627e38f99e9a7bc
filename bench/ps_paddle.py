"""PaddlePaddle's parameter-server mode on the sparse embedding model of `warren bench ps
--model sparse` and bench/ps_tf.py (docs/benchmarks-ps.md): an embedding of KEYS hashed keys x
WIDTH floats held by SERVERS parameter servers, TRAINERS trainers, batches of BATCH examples of
FEATURES keys each; an example's score is the mean of its rows dotted with a dense weight of
WIDTH floats, logistic loss, plain SGD, asynchronous (`a_sync=True`, as TensorFlow's PS training
is).

Paddle's own PS runtime (`paddle.distributed.fleet`, static graph): the embedding is a
`paddle.static.nn.sparse_embedding` (a distributed lookup table: rows pulled per key from the
servers, gradients pushed per key), the dense weight a dense table on the servers. Every server
and trainer is a process of its own started here, configured through Paddle's environment
variables (TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ID, ...) with 127.0.0.1
addresses only and Gloo off. This process is the conductor: the trainers run WARMUP untimed
steps, wait for every trainer to be ready, then run STEPS timed steps; a step is one batch of
every trainer (as Warren's benchmark and ps_tf.py count it). Prints one JSON line; every child
is killed on exit, after --timeout seconds, or when this process dies.

Needs paddlepaddle 2.6.2 (the 3.x CPU wheels on PyPI are built without the PS runtime) with
protobuf 4.x and numpy 1.x, and the legacy static graph (FLAGS_enable_pir_api=0). What Paddle
does here, checked against its source and by pulling rows back (docs/benchmarks-ps.md):
- the sparse table is configured as the model says (`sparse_table`: plain SGD rows, created
  uniform in [-0.01, 0.01]); Paddle creates a row on its first push, a pull of a new key
  reads zeros (TensorFlow initializes every row before the timed steps, Warren on first pull);
- its client multiplies a sparse gradient by the ids' batch size: the rows' learning rate is
  divided by it, so a row moves by exactly lr x gradient (checked);
- gradients are pushed in the background, merged per table over up to 12 steps
  (FLAGS_pserver_push_*_merge_limit) before they reach the servers; the trainer flushes them
  before the timed steps start and before they end;
- Executor.run never pulls the dense weight back (train_from_dataset's thread does): each step
  pulls it first.

    .bench-venv-paddle/bin/python bench/ps_paddle.py --steps 50 --trainers 2 --servers 2
"""

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

from pslocal import free_ports


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=1 << 20)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--steps", type=int, default=30, help="timed steps per trainer")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per trainer")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=600, help="seconds before every child is killed")
    p.add_argument("--role", choices=["conductor", "server", "trainer"], default="conductor")
    a = p.parse_args(argv)
    for name in ("keys", "width", "batch", "features", "trainers", "servers", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.warmup < 0 or a.lr <= 0 or a.timeout <= 0:
        p.error(f"--warmup must be >= 0 and --lr, --timeout > 0 (got {a.warmup}, {a.lr}, {a.timeout})")
    return a


def die_with_parent():
    """In a child, before exec: the kernel kills it if the conductor dies (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def child_env(a, role, index, server_ports, trainer_ports):
    env = dict(os.environ)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": "",
            "PADDLE_WITH_GLOO": "0",
            "TRAINING_ROLE": "PSERVER" if role == "server" else "TRAINER",
            "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(f"127.0.0.1:{q}" for q in server_ports),
            "PADDLE_PSERVER_NUMS": str(a.servers),
            "PADDLE_TRAINERS_NUM": str(a.trainers),
            "PADDLE_TRAINER_ENDPOINTS": ",".join(f"127.0.0.1:{q}" for q in trainer_ports),
            "POD_IP": "127.0.0.1",
            "OMP_NUM_THREADS": "1",
            # the PS passes rewrite the legacy ProgramDesc, not PIR (the 3.x static default)
            "FLAGS_enable_pir_api": "0",
        }
    )
    if role == "server":
        env["PADDLE_PORT"] = str(server_ports[index])
    else:
        env["PADDLE_TRAINER_ID"] = str(index)
        env["PADDLE_PORT"] = str(trainer_ports[index])
    return env


def preflight():
    """Fails early, with the reason, where Paddle's PS cannot run as this benchmark needs."""
    import paddle
    from paddle.base import core

    if not hasattr(core, "DistFleetWrapper"):
        raise SystemExit(
            f"ps_paddle: paddlepaddle {paddle.__version__} was built without its parameter-server "
            "runtime (no paddle.base.core.DistFleetWrapper, as in the 3.x CPU wheels): use "
            "paddlepaddle==2.6.2 (bench/ps_sparse.sh installs it with PADDLE=1)"
        )
    # brpc binds each trainer's client service to the address the host name resolves to
    host = socket.gethostbyname(socket.gethostname())
    if not host.startswith("127."):
        raise SystemExit(
            f"ps_paddle: the host name resolves to {host}, not a loopback address: Paddle's "
            "trainers would listen there; run it where the host name is 127.x (as in /etc/hosts here)"
        )
    return paddle.__version__


def conduct(a):
    """Starts the servers and trainers, times the trainers' steps, returns the JSON record."""
    version = preflight()
    server_ports = free_ports(a.servers)
    trainer_ports = free_ports(a.trainers)
    model = [f"--{k}={getattr(a, k)}" for k in ("keys", "width", "batch", "features", "trainers", "servers")]
    model += [f"--steps={a.steps}", f"--warmup={a.warmup}", f"--lr={a.lr}"]
    me = os.path.abspath(__file__)
    procs = []
    deadline = time.monotonic() + a.timeout
    try:
        for i in range(a.servers):
            procs.append(
                subprocess.Popen(
                    [sys.executable, me, "--role=server"] + model,
                    env=child_env(a, "server", i, server_ports, trainer_ports),
                    stdin=subprocess.DEVNULL,
                    stdout=sys.stderr,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            )
        trainers = [
            subprocess.Popen(
                [sys.executable, me, "--role=trainer"] + model,
                env=child_env(a, "trainer", i, server_ports, trainer_ports),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,  # unbuffered: a line read never leaves the next one hidden from select
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
            for i in range(a.trainers)
        ]
        procs += trainers
        wait_lines(trainers, "READY", deadline, procs)
        started = time.perf_counter()
        for t in trainers:
            t.stdin.write(b"GO\n")
            t.stdin.flush()
        done = wait_lines(trainers, "DONE", deadline, procs)
        elapsed = time.perf_counter() - started
        flush_s = max(float(line.split()[1]) for line in done)
        for t in trainers:  # let them stop their clients; the measurement is done either way
            t.stdin.close()
        for t in trainers:
            try:
                t.wait(min(10, max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass  # killed below
    finally:
        for pr in procs:
            kill_group(pr)
    return {
        "bench": "ps_sparse_paddle",
        "system": "paddle",
        "paddle": version,
        "keys": a.keys,
        "width": a.width,
        "batch": a.batch,
        "features": a.features,
        "trainers": a.trainers,
        "servers": a.servers,
        "steps": a.steps,
        "step_s": round(elapsed / a.steps, 4),
        "final_flush_s": round(flush_s, 4),
    }


def wait_lines(trainers, word, deadline, procs):
    """Waits until every trainer has printed a line starting with `word` and returns those
    lines; fails on a child's exit or at the deadline."""
    sel = selectors.DefaultSelector()
    for t in trainers:
        sel.register(t.stdout, selectors.EVENT_READ, t)
    waiting = set(trainers)
    lines = []
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit(f"ps_paddle: timed out waiting for {word} from {len(waiting)} trainer(s)")
        for pr in procs:
            if pr.poll() is not None and pr.returncode != 0:
                raise SystemExit(f"ps_paddle: child {pr.args[2]} exited with {pr.returncode} before {word}")
        for key, _ in sel.select(min(left, 1.0)):
            line = key.fileobj.readline().decode()
            if not line:
                sel.unregister(key.fileobj)
                raise SystemExit(f"ps_paddle: a trainer closed its output before {word}")
            if line.startswith(word) and key.data in waiting:
                waiting.discard(key.data)
                sel.unregister(key.fileobj)
                lines.append(line)
    sel.close()
    return lines


def kill_group(pr):
    if pr.poll() is None:
        try:
            os.killpg(pr.pid, signal.SIGTERM)
            pr.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(pr.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    pr.wait()


def build(a):
    """The model in a static program, with Paddle's PS optimizer; returns (loss, fleet)."""
    import paddle
    import paddle.distributed.fleet as fleet
    import paddle.nn.functional as F

    paddle.enable_static()
    fleet.init()  # PaddleCloudRoleMaker, from the environment set by the conductor
    # the distributed lookup table that sparse_embedding becomes wants ids of shape [n, 1]:
    # the batch's BATCH x FEATURES keys come flat, the rows are reshaped per example
    keys = paddle.static.data("keys", [-1, 1], "int64")
    labels = paddle.static.data("labels", [-1, 1], "float32")
    emb = paddle.static.nn.sparse_embedding(
        keys,
        size=[a.keys, a.width],
        param_attr=paddle.ParamAttr(name="emb", initializer=paddle.nn.initializer.Uniform(-0.01, 0.01)),
    )  # [batch * features, width]
    emb = paddle.reshape(emb, [-1, a.features, a.width])
    w = paddle.static.create_parameter(
        [a.width, 1], "float32", name="w", default_initializer=paddle.nn.initializer.Constant(0.0)
    )
    logits = paddle.matmul(paddle.mean(emb, axis=1), w)
    loss = F.binary_cross_entropy_with_logits(logits, labels)  # mean over the batch
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    sparse_table(strategy, a)
    opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=a.lr), strategy)
    opt.minimize(loss)
    return loss, fleet


def sparse_table(strategy, a):
    """Configures the embedding's table as the model says. Left to its defaults, Paddle 2.6
    applies Adam to a sparse table even under the SGD optimizer (the_one_ps.py picks
    SparseNaiveSGDRule for "sgd" and then overwrites it with SparseAdamSGDRule), initializes
    the row's first float to 0 (`zero_init`), and creates a row on its first push only with
    probability (show - click) x nonclk_coeff = 0.1."""
    t = strategy.sparse_table_configs.add()
    t.table_name = "emb"
    t.table_class = "MemorySparseTable"
    acc = t.accessor
    acc.accessor_class = "SparseAccessor"
    acc.ctr_accessor_param.zero_init = False
    acc.ctr_accessor_param.nonclk_coeff = 1.0  # every pushed key gets its row
    for rule in (acc.embed_sgd_param, acc.embedx_sgd_param):
        rule.name = "SparseNaiveSGDRule"  # w -= lr * g, per row, on the server
        # Paddle's client multiplies a sparse gradient by the ids' batch size (here BATCH x
        # FEATURES: the keys come flat) before pushing it, for its CTR accessors: divide it out
        rule.naive.learning_rate = a.lr / (a.batch * a.features)
        rule.naive.initial_range = 0.01  # uniform in [-0.01, 0.01], as ps_tf.py
        rule.naive.weight_bounds.extend([-1e30, 1e30])


def serve(a):
    _, fleet = build(a)
    fleet.init_server()
    fleet.run_server()


def train(a):
    import numpy as np
    import paddle
    from paddle.distributed.fleet import fleet as fleet_instance
    from paddle.distributed.ps.utils.public import get_the_one_recv_context

    loss, fleet = build(a)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    main = paddle.static.default_main_program()
    scope = paddle.static.global_scope()
    rng = np.random.default_rng(int(os.environ["PADDLE_TRAINER_ID"]))
    # With Executor.run in a_sync mode the program pulls the rows (distributed_lookup_table)
    # and pushes both gradients, but never pulls the dense weight back (Paddle does that in
    # train_from_dataset's pull-dense thread only): pull it before each step, as TensorFlow's
    # step and Warren's trainer read it.
    runtime = fleet_instance._runtime_handle
    dense_map = get_the_one_recv_context(runtime.context)

    def step():
        runtime._pull_all_dense([scope], runtime._send_ctx, dense_map)
        feed = {
            "keys": rng.integers(0, a.keys, size=(a.batch * a.features, 1), dtype=np.int64),
            "labels": rng.integers(0, 2, size=(a.batch, 1)).astype(np.float32),
        }
        exe.run(main, feed=feed, fetch_list=[loss])

    # Pushes are queued and merged by Paddle's client and sent in the background: flush them
    # before the timed steps start and before they count as done.
    for _ in range(a.warmup):
        step()
    runtime._worker.client_flush()
    print("READY", flush=True)
    sys.stdin.readline()
    for _ in range(a.steps):
        step()
    flush_started = time.perf_counter()
    runtime._worker.client_flush()  # polls every 100 ms until the queues are empty
    print(f"DONE {time.perf_counter() - flush_started:.4f}", flush=True)
    sys.stdin.readline()  # the conductor closes stdin once every trainer is done
    fleet.stop_worker()


def main():
    a = parse_args()
    if a.role == "server":
        return serve(a)
    if a.role == "trainer":
        return train(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run conduct's cleanup
    print(json.dumps(conduct(a)), flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""TensorFlow's ParameterServerStrategy on the sparse embedding model of `warren bench ps
--model sparse` (docs/benchmarks-ps.md): an embedding of KEYS hashed keys x WIDTH floats,
split over PS parameter servers, WORKERS trainers, batches of BATCH examples of FEATURES keys
each; an example's score is the mean of its rows dotted with a dense weight of WIDTH floats,
logistic loss, plain SGD applied on the servers as each trainer's step arrives (TensorFlow's
PS training is asynchronous).

The cluster is local: the workers and parameter servers are `tf.distribute.Server`s in
processes of their own on 127.0.0.1 ports, this process is the coordinator (chief) through a
`SimpleClusterResolver`. Prints one JSON line: seconds per step, a step being one batch of every
trainer (total steps scheduled / WORKERS), as Warren's benchmark counts it.

    .bench-venv/bin/python bench/ps_tf.py --steps 30 --workers 2 --ps 2
"""

import argparse
import json
import multiprocessing
import os
import sys
import time

from pslocal import free_ports


def serve(cluster, job, index):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name=job, task_index=index, protocol="grpc", start=True
    )
    server.join()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=1 << 20)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--steps", type=int, default=30, help="timed steps per trainer")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per trainer")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument(
        "--bags",
        action="store_true",
        help="look each example's keys up as one bag (tf.nn.embedding_lookup_sparse, combiner mean), "
        "TensorFlow's own op for it, as `warren bench ps --bags` pulls sums of bags",
    )
    a = p.parse_args()

    ports = free_ports(a.workers + a.ps + 1)
    addr = [f"127.0.0.1:{q}" for q in ports]
    cluster = {
        "worker": addr[: a.workers],
        "ps": addr[a.workers : a.workers + a.ps],
        "chief": addr[a.workers + a.ps :],
    }
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=serve, args=(cluster, "worker", i), daemon=True) for i in range(a.workers)]
    procs += [ctx.Process(target=serve, args=(cluster, "ps", i), daemon=True) for i in range(a.ps)]
    for pr in procs:
        pr.start()
    try:
        result = coordinate(a, cluster)
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            pr.join(10)
    print(json.dumps(result), flush=True)


def coordinate(a, cluster):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), rpc_layer="grpc", task_type="chief", task_id=0
    )
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    rows = -(-a.keys // a.ps)
    with strategy.scope():
        # One shard per server (variables are placed round-robin on the servers); key k is
        # row k // PS of shard k % PS, as tf.nn.embedding_lookup's "mod" strategy reads it.
        shards = [
            tf.Variable(tf.random.uniform([rows, a.width], -0.01, 0.01, seed=i), name=f"emb{i}")
            for i in range(a.ps)
        ]
        w = tf.Variable(tf.zeros([a.width, 1]), name="w")
    lr = a.lr
    # Example e's keys are entries (e, 0..FEATURES) of a sparse tensor of ids: its bag.
    bag_of = tf.constant([[e, f] for e in range(a.batch) for f in range(a.features)], dtype=tf.int64)

    def embed(keys):
        if not a.bags:
            emb = tf.nn.embedding_lookup(shards, keys)  # [batch, features, width]
            return tf.reduce_mean(emb, axis=1)
        ids = tf.SparseTensor(bag_of, tf.reshape(keys, [-1]), [a.batch, a.features])
        return tf.nn.embedding_lookup_sparse(shards, ids, None, combiner="mean")

    @tf.function
    def step():
        keys = tf.random.uniform([a.batch, a.features], maxval=a.keys, dtype=tf.int64)
        labels = tf.cast(tf.random.uniform([a.batch, 1], maxval=2, dtype=tf.int32), tf.float32)
        with tf.GradientTape() as tape:
            logits = tf.matmul(embed(keys), w)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, shards + [w])
        for var, g in zip(shards, grads[:-1]):
            var.scatter_sub(tf.IndexedSlices(lr * g.values, g.indices, g.dense_shape))
        w.assign_sub(lr * grads[-1])
        return loss

    for _ in range(a.warmup * a.workers):
        coordinator.schedule(step)
    coordinator.join()
    started = time.perf_counter()
    for _ in range(a.steps * a.workers):
        coordinator.schedule(step)
    coordinator.join()
    elapsed = time.perf_counter() - started
    return {
        "bench": "ps_sparse_tf",
        "tensorflow": tf.__version__,
        "keys": a.keys,
        "width": a.width,
        "batch": a.batch,
        "features": a.features,
        "bags": a.bags,
        "trainers": a.workers,
        "servers": a.ps,
        "steps": a.steps,
        "step_s": round(elapsed / a.steps, 4),
    }


if __name__ == "__main__":
    sys.exit(main())

"""A PySpark job of tests/test_pyspark.py, run by spark-submit: gradient steps on a float64
model with warren.spark.train over the partitions of a small DataFrame, the gradient
allreduced in place, a checkpoint per iteration; prints the final model's hash.

Arguments: OUT_DIR ITERS SLEEP_S JOBS, JOBS a comma-separated list of jobs run one after the
other in the same application: `clean`, `paused` (the same with `peerTimeout` 10 s, for a
test that freezes an executor), `mismatch` (rank 1 allreduces one element more at iteration
2: a final error) or `badsetting` (an invalid setting, refused on the driver).
Each task attempt of job J leaves `start-<task>-<attempt>-<pid>` in OUT_DIR/J, rank 0 its
progress (checkpoints committed) in OUT_DIR/J/progress, and every worker its recoveries
counter in OUT_DIR/J/recoveries-<rank>. SLEEP_S pauses each iteration (so that a test can
kill a worker mid-training). The driver prints `MODEL_HASH <hex>` per
job that trained, and `WARREN_SPARK_ERROR <message>` for a job whose train raised.
"""

import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np
from pyspark.sql import SparkSession

import warren.spark

DIM = 256
WORKERS = 3


def main() -> None:
    spark = SparkSession.builder.appName("warren-pyspark-test").getOrCreate()
    for job in sys.argv[4].split(","):
        run_job(spark, Path(sys.argv[1]) / job, int(sys.argv[2]), float(sys.argv[3]), job)
    spark.stop()


def run_job(spark, out: Path, iters: int, sleep_s: float, mode: str) -> None:
    out.mkdir(parents=True, exist_ok=True)

    def fit(comm, rows):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        (out / f"start-{ctx.partitionId()}-{ctx.attemptNumber()}-{os.getpid()}").touch()
        x = np.array([r.id for r in rows], dtype=np.float64)  # this partition's rows, in order
        version, model, _ = comm.load_checkpoint()
        w = np.zeros(DIM) if model is None else np.frombuffer(model, dtype=np.float64).copy()
        for it in range(version, iters):
            g = np.sin(np.arange(DIM) * x.sum() + it) * (w - 1.0)
            if mode == "mismatch" and it == 2 and comm.rank == 1:
                g = np.append(g, 0.0)
            comm.allreduce(g)
            w -= 0.1 * g / comm.world_size
            comm.checkpoint(w.tobytes())
            if comm.rank == 0:
                (out / "progress").write_text(str(it + 1))
            time.sleep(sleep_s)
        (out / f"recoveries-{comm.rank}").write_text(str(comm.recoveries))
        return w.tobytes()

    # Three partitions of ten rows each, the same on every attempt (no shuffle).
    df = spark.range(0, 10 * WORKERS, 1, WORKERS)
    try:
        settings = {"timeout": "ten"} if mode == "badsetting" else {"peerTimeout": "10"} if mode == "paused" else None
        models = warren.spark.train(df, fit, num_workers=WORKERS, settings=settings)
    except warren.spark.WarrenSparkError as e:
        print(f"WARREN_SPARK_ERROR {e}", flush=True)
        return
    assert len({bytes(m) for m in models}) == 1, "every rank ends with the same model"
    print(f"MODEL_HASH {hashlib.sha256(models[0]).hexdigest()}", flush=True)


if __name__ == "__main__":
    main()

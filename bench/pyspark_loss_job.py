"""The job of bench/pyspark_loss.py, run by spark-submit: one model trained on three PySpark
tasks by xgboost.spark (`xgboost`) or by warren.spark.train (`warren`, logistic regression,
the gradient allreduced per iteration), on the same generated data.

Arguments: MODE OUT_DIR. The driver writes OUT_DIR/fit-started when training starts, and
prints `FIT_SECONDS s` and `MODEL_HASH hex` when it ends, or `FIT_FAILED s message` when the
fit raises.
"""

import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from pyspark.sql import SparkSession

WORKERS, ROWS, FEATURES = 3, 60_000, 20
XGB_ROUNDS, XGB_DEPTH = 300, 6
LR_ITERS = 300


def data(spark):
    """ROWS rows of FEATURES normal features and a label of a fixed linear rule, in WORKERS
    partitions that are the same on every attempt (no shuffle)."""
    rng = np.random.default_rng(11)
    truth = rng.normal(size=FEATURES)
    x = rng.normal(size=(ROWS, FEATURES))
    y = (x @ truth + rng.normal(scale=0.5, size=ROWS) > 0).astype(float)
    rows = [(float(y[i]), [float(v) for v in x[i]]) for i in range(ROWS)]
    return spark.sparkContext.parallelize(rows, WORKERS).toDF("label double, features array<double>")


def fit_xgboost(df) -> bytes:
    from xgboost.spark import SparkXGBClassifier

    model = SparkXGBClassifier(num_workers=WORKERS, n_estimators=XGB_ROUNDS, max_depth=XGB_DEPTH,
                               features_col="features", label_col="label").fit(df)
    return bytes(model.get_booster().save_raw("ubj"))


def fit_warren(df) -> bytes:
    import warren.spark

    def fit(comm, rows):
        part = list(rows)
        x = np.array([r.features for r in part])
        y = np.array([r.label for r in part])
        version, model, _ = comm.load_checkpoint()
        w = np.zeros(FEATURES) if model is None else np.frombuffer(model).copy()
        for _ in range(version, LR_ITERS):
            p = 1 / (1 + np.exp(-(x @ w)))
            g = np.concatenate([x.T @ (p - y), [len(y)]])
            comm.allreduce(g)
            w -= 0.5 * g[:FEATURES] / g[FEATURES]
            comm.checkpoint(w.tobytes())
            time.sleep(0.05)  # about as long as the xgboost fit, for a kill mid-training
        return w.tobytes()

    return warren.spark.train(df, fit, num_workers=WORKERS)[0]


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    spark = SparkSession.builder.appName(f"pyspark-loss-{mode}").getOrCreate()
    df = data(spark).cache()
    df.count()
    (out / "fit-started").touch()
    start = time.monotonic()
    try:
        model = fit_xgboost(df) if mode == "xgboost" else fit_warren(df)
    except Exception as e:  # what the library raised: the benchmark reports it
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"FIT_FAILED {time.monotonic() - start:.2f} {type(e).__name__}: {first[:300]}", flush=True)
        spark.stop()
        return
    print(f"FIT_SECONDS {time.monotonic() - start:.2f}", flush=True)
    print(f"MODEL_HASH {hashlib.sha256(model).hexdigest()}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()

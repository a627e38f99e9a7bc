"""A worker of the Python binding's tests (tests/test_python_binding.py), run by
`warren run -n N -- python train.py`: gradient steps on a float64 model, the gradient
allreduced in place, a checkpoint per iteration; prints the final model's hash.

Environment (the test's, not Warren's): TRAIN_ITERS, TRAIN_DIM, TRAIN_SLEEP_S (a pause per
iteration, so a test can kill a worker mid-run), TRAIN_DIR (where each attempt leaves
`start-<task>-<pid>` and rank 0's progress), TRAIN_BAD_INPUT=1 (bad calls at iteration 3,
their messages printed as BAD_INPUT lines), TRAIN_MISMATCH=1 (rank 1 allreduces one element
more at iteration 2). Each worker writes its final model to TRAIN_DIR/model-<rank> and its
recoveries counter to TRAIN_DIR/recoveries-<rank>.
"""

import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

import warren

ITERS = int(os.environ.get("TRAIN_ITERS", "30"))
DIM = int(os.environ.get("TRAIN_DIM", "1000"))
SLEEP_S = float(os.environ.get("TRAIN_SLEEP_S", "0"))
OUT = Path(os.environ["TRAIN_DIR"]) if "TRAIN_DIR" in os.environ else None


def gradient(rank: int, it: int, w: np.ndarray) -> np.ndarray:
    """This rank's gradient at iteration `it` (deterministic: the test computes it again)."""
    x = np.sin(np.arange(DIM, dtype=np.float64) * (rank + 1) + it)
    return x * (w - 1.0) + 0.01 * (rank + 1)


def bad_calls(comm: warren.Communicator) -> None:
    read_only = np.ones(DIM)
    read_only.flags.writeable = False
    for what, array in [("read-only", read_only), ("float16", np.ones(DIM, dtype=np.float16))]:
        try:
            comm.allreduce(array)
            line = f"BAD_INPUT {what} accepted\n"
        except (TypeError, ValueError) as e:
            line = f"BAD_INPUT {what} {type(e).__name__}: {e}\n"
        sys.stdout.write(line)
        sys.stdout.flush()


def main() -> None:
    if OUT is not None:
        (OUT / f"start-{os.environ['WARREN_TASK_ID']}-{os.getpid()}").touch()
    with warren.Communicator() as comm:
        version, model, _ = comm.load_checkpoint()
        w = np.zeros(DIM) if model is None else np.frombuffer(model, dtype=np.float64).copy()
        for it in range(version, ITERS):
            g = gradient(comm.rank, it, w)
            if it == 2 and comm.rank == 1 and os.environ.get("TRAIN_MISMATCH") == "1":
                g = np.append(g, 0.0)
            address = g.ctypes.data
            out = comm.allreduce(g)
            assert out is g and g.ctypes.data == address, "allreduce returned another array"
            w -= 0.1 * g / comm.world_size
            if it == 3 and os.environ.get("TRAIN_BAD_INPUT") == "1":
                bad_calls(comm)
            comm.checkpoint(w.tobytes())
            if OUT is not None and comm.rank == 0:
                (OUT / "progress").write_text(str(it + 1))
            time.sleep(SLEEP_S)
        if OUT is not None:
            (OUT / f"model-{comm.rank}").write_bytes(w.tobytes())
            (OUT / f"recoveries-{comm.rank}").write_text(str(comm.recoveries))
        # One write: the workers share the launcher's stdout.
        sys.stdout.write(f"MODEL_HASH {hashlib.sha256(w.tobytes()).hexdigest()}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

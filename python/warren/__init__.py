"""Warren's communicator for Python: fault-tolerant allreduce, broadcast and allgather.

A worker started by ``warren run -n N -- python script.py`` joins its job with
``warren.Communicator()`` (settings from its ``WARREN_*`` environment). When a worker is lost
only that worker is re-run; the survivors serve it the last checkpoint and the results it
replays.

Importing this package sets the exit status of a worker that ends on an uncaught
``WarrenError`` the way ``warren run`` reads it: 3 when a re-run cannot succeed
(``error.final``: the launcher stops the job), 0 for a ``LeftError`` (an elastic task that is
no member of the job any more has nothing to do), and Python's usual 1 otherwise (the
launcher re-runs this worker alone).

``warren.spark.train`` runs a function once per partition of a PySpark RDD or DataFrame, each
Spark task a worker, with the tracker in the driver (see that module).
"""

from __future__ import annotations

import os
import sys

from warren._native import (  # noqa: F401
    AbortedError,
    AuthError,
    CallMismatchError,
    ClosedError,
    Communicator,
    ConfigError,
    CorruptDataError,
    DatasetMismatchError,
    FencedError,
    InvalidArgumentError,
    InvalidChangeError,
    JobFailedError,
    LeftError,
    MasterError,
    PeerLostError,
    ProtocolError,
    RecoveryImpossibleError,
    RelinkSupersededError,
    RolledBackError,
    StoreCorruptError,
    StoreFailedError,
    TrackerError,
    WarrenError,
    WarrenIOError,
    WarrenTimeoutError,
    __version__,
)

#: Exit status of a worker whose error a re-run cannot fix (as the ``warren`` command's).
FINAL_EXIT = 3

_previous_hook = sys.excepthook


def exit_status(error: BaseException) -> int | None:
    """The exit status ``warren run`` expects for a worker ending on ``error``, or ``None``
    for Python's own (1: the launcher re-runs the worker)."""
    if isinstance(error, LeftError):
        return 0
    if isinstance(error, WarrenError) and getattr(error, "final", False):
        return FINAL_EXIT
    return None


def _excepthook(kind, error, tb):
    _previous_hook(kind, error, tb)
    status = exit_status(error)
    if status is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


sys.excepthook = _excepthook

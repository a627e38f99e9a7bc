"""Warren jobs on PySpark: ``train`` runs a Python function once per partition of an RDD or
DataFrame, each Spark task a Warren worker, with the tracker in the driver.

.. code-block:: python

    import warren.spark

    def fit(comm, rows):
        data = np.array(list(rows))
        version, model, _ = comm.load_checkpoint()    # after a failure: the last checkpoint
        w = np.zeros(DIM) if model is None else np.frombuffer(model).copy()
        for it in range(version, ITERS):
            g = gradient(data, w)
            comm.allreduce(g)
            w -= 0.1 * g / comm.world_size
            comm.checkpoint(w.tobytes())
        return w

    models = warren.spark.train(df, fit, num_workers=3)   # one result per worker, by task id

The stage is an ordinary (non-barrier) one, so Spark re-runs only a failed task: the new
attempt joins with the same task id (its partition index) and recovers from its peers, which
wait in their current call, serve it the last checkpoint and the results it replays, and go
on. The tracker is the JVM one (``io.warren.Tracker``, started through warren-runner's
``JobPlan`` exactly as the Scala adapter does), so warren-core's and warren-runner's jars must
be on the driver's class path (``spark-submit --jars``); with warren-spark's and warren-scala's
too, a worker the tracker fences (a frozen executor) has its task attempt killed and re-run at
once. Every Python worker needs this package installed (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator

#: The prefix of Warren's settings in the Spark conf, as for the Scala adapter.
PREFIX = "spark.warren."

# Settings of the Scala adapter's other modes, which warren.spark.train does not run.
_ELASTIC_KEYS = frozenset({"elastic", "minWorkers", "rejoinTimeout"})
_PS_PREFIX = "ps."

# How often the driver asks the tracker whether a worker failed for good, and shows the
# tracker's lines in an interactive session (seconds).
_WATCH_POLL_S = 0.5

# The labels of this driver's jobs in the progress lines: 1, 2, ...
_JOB_LABELS = itertools.count(1)

# The local property naming a run in its Spark jobs (warren-spark's JobWatch.RunKey).
_RUN_KEY = "warren.run.id"
_WARNED_NO_FENCE_WATCH = False


class WarrenSparkError(RuntimeError):
    """A Warren job on Spark failed, or could not start: the message names the setting, the
    failed task or the contract that was broken, and the fix."""


def train(
    data: Any,
    fn: Callable[[Any, Iterator[Any]], Any],
    num_workers: int | None = None,
    settings: dict[str, str] | None = None,
) -> list[Any]:
    """Runs ``fn(comm, rows)`` once per partition of ``data`` in one Spark stage, each task a
    Warren worker with its own ``warren.Communicator``, and returns the results in task-id
    (partition, and so rank) order.

    :param data: a pyspark ``RDD`` or ``DataFrame`` (its ``.rdd``: rows are ``Row`` objects);
        task ``i`` reads partition ``i``. More partitions than workers are coalesced (no
        shuffle, order kept), fewer are repartitioned (a shuffle, whose row order can differ
        between attempts: sort the rows in ``fn`` if bit-identical recovery matters).
    :param fn: the worker body: the joined communicator (do not finalize it) and the
        partition's rows; returns a picklable result. It must be deterministic given its rows
        for a recovered job to end with the model of a run without failures.
    :param num_workers: the number of workers, default the number of partitions.
    :param settings: ``spark.warren.*`` settings (the prefix is optional) overriding the
        Spark conf's: ``timeout``, ``connectTimeout``, ``peerTimeout``, ``trackerHost``,
        ``setting.WARREN_*``, ... (docs/spark.md lists them).
    :raises WarrenSparkError: a setting is invalid, speculation is on, there are too few free
        task slots, a worker failed with an error that cannot succeed on retry (the job is
        stopped at once), or a task failed more often than ``spark.task.maxFailures`` allows.
    """
    rdd = _as_rdd(data)
    sc = rdd.context
    n = _worker_count(rdd, num_workers)
    jvm = sc._jvm
    _require_jars(jvm)
    runner = _parse_settings(jvm, _merged(sc, settings or {}))
    _check_not_speculative(sc)
    engine = _engine(sc)
    _runner_call(lambda: jvm.io.warren.runner.JobPlan.check(runner, n, False, 1, engine))
    _await_slots(sc, n, runner.slotWaitTimeout())
    plan = _runner_call(lambda: jvm.io.warren.runner.JobPlan.start(runner, n, 1, None, engine))
    try:
        base = {str(k): str(v) for k, v in plan.workerSettings().get(0).items()}
        progress = (str(next(_JOB_LABELS)), float(runner.progressInterval()))
        return _run(sc, _fit_partitions(rdd, n), n, base, fn, plan.trackers(), progress)
    finally:
        plan.close()
        plan.closeDirectory()


def task_settings(base: dict[str, str], task_id: int, attempt: int) -> dict[str, str]:
    """The worker settings of one task, as the JVM adapters give theirs (warren-runner's
    ``WorkerRun.taskSettings``): ``base`` (the tracker's and the job's) with the task's
    identity, ``WARREN_TASK_ID`` (the partition index) and ``WARREN_ATTEMPT`` (Spark's attempt
    number of the task)."""
    return {**base, "WARREN_TASK_ID": str(task_id), "WARREN_ATTEMPT": str(attempt)}


def run_worker(
    settings: dict[str, str],
    fn: Callable[[Any, Iterator[Any]], Any],
    rows: Iterator[Any],
    progress: tuple[str, float] | None = None,
) -> Any:
    """One worker's life: joins the job with ``settings``, runs ``fn(comm, rows)``, and leaves
    with ``finalize`` when it returns or with ``abort`` when it raises (never ``finalize``,
    which would tell the tracker the worker finished and make it refuse the replacement).

    :param progress: ``(job label, seconds between lines)``: rank 0 then sends progress lines
        (``Progress``) meanwhile and a last one when ``fn`` returns; ``None`` or 0 s for none.
    """
    from warren import Communicator

    comm = Communicator(settings)
    reporter = Progress(comm, *progress) if progress and progress[1] > 0 and comm.rank == 0 else None
    try:
        result = fn(comm, rows)
    except BaseException:
        if reporter:
            reporter.stop()
        comm.abort()
        raise
    if reporter:
        reporter.finish()
    comm.finalize()
    return result


def progress_line(what: str, label: str, version: int, recoveries: int, seconds: float, stats: str) -> str:
    """The text of one progress line, as the JVM adapters send theirs (warren-runner's
    ``Progress.line``): ``progress: job 3, checkpoint version 7, recoveries 1, 12.4 s;
    allreduce(tree): n=9 p50=2100us ...``."""
    return (f"{what}: job {label}, checkpoint version {version}, recoveries {recoveries}, {seconds:.1f} s; "
            + (stats if stats else "no collective calls yet"))


class Progress:
    """Rank 0's progress lines: a daemon thread sends one every ``interval_s`` seconds through
    the tracker (``Communicator.print``; the driver logs it, and shows it in an interactive
    session), with the checkpoint version, the recoveries this worker took part in and the
    latency of its collective calls. A line waits for the worker's running call to return
    (the communicator's calls are serialised), so a long call delays it."""

    def __init__(self, comm: Any, label: str, interval_s: float):
        self._comm, self._label, self._interval = comm, label, interval_s
        self._started = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="warren-progress", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._report("progress")
            except Exception as e:  # the communicator failed: the worker's own call says why
                print(f"warren job {self._label}: progress reports stopped: {e}", file=sys.stderr)
                return

    def _report(self, what: str) -> None:
        c = self._comm
        line = progress_line(what, self._label, c.version, c.recoveries, time.monotonic() - self._started, c.stats())
        c.print(line)

    def stop(self) -> None:
        """Stops the thread, waiting (up to 5 s) for a line being sent."""
        self._stopped.set()
        self._thread.join(timeout=5)

    def finish(self) -> None:
        """Stops the thread and sends the last line (``finished``); a failure to send it is
        printed, not raised: the work succeeded."""
        self.stop()
        try:
            self._report("finished")
        except Exception as e:
            print(f"warren job {self._label}: the last progress line was not sent: {e}", file=sys.stderr)


def _as_rdd(data: Any):
    """The RDD of ``data`` (a DataFrame's ``.rdd``), or a ``TypeError`` naming what it got."""
    from pyspark import RDD

    if isinstance(data, RDD):
        return data
    rdd = getattr(data, "rdd", None)
    if isinstance(rdd, RDD):
        return rdd
    raise TypeError(f"warren.spark.train needs a pyspark RDD or DataFrame, got {type(data).__name__}")


def _worker_count(rdd, num_workers: int | None) -> int:
    n = rdd.getNumPartitions() if num_workers is None else num_workers
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"num_workers must be a positive int (or None: one per partition), got {num_workers!r}")
    return n


def _fit_partitions(rdd, n: int):
    """``rdd`` with ``n`` partitions: coalesced without a shuffle, or repartitioned."""
    parts = rdd.getNumPartitions()
    if parts == n:
        return rdd
    return rdd.coalesce(n, shuffle=False) if parts > n else rdd.repartition(n)


def _merged(sc, settings: dict[str, str]) -> dict[str, str]:
    """The Spark conf's ``spark.warren.*`` settings with ``settings`` over them, unprefixed."""
    merged = {k[len(PREFIX):]: v for k, v in sc.getConf().getAll() if k.startswith(PREFIX)}
    for k, v in settings.items():
        merged[k[len(PREFIX):] if k.startswith(PREFIX) else k] = str(v)
    return merged


def _parse_settings(jvm, raw: dict[str, str]):
    """warren-runner's ``RunnerSettings`` of the job, checked on the driver before anything
    starts; a mode warren.spark.train does not run fails naming the setting."""
    if raw.get("elastic", "false").strip().lower() == "true":
        raise WarrenSparkError(
            f"{PREFIX}elastic=true is not supported by warren.spark.train: it runs retry-one jobs "
            "of a fixed size; use the Scala adapter (io.warren.spark.WarrenSpark.train) for elastic jobs")
    neutral = {k: v for k, v in raw.items() if k not in _ELASTIC_KEYS and not k.startswith(_PS_PREFIX)}
    jmap = jvm.java.util.HashMap()
    for k, v in neutral.items():
        jmap.put(k, v)
    runner = _runner_call(lambda: jvm.io.warren.runner.RunnerSettings.parse(jmap, PREFIX))
    if runner.recovery().name() != "RETRY_ONE":
        raise WarrenSparkError(
            f"{PREFIX}recovery={raw.get('recovery')} is not supported by warren.spark.train, which runs "
            f"retry-one jobs only (Spark re-runs a failed task, which recovers from its peers): remove the "
            f"setting, or use the Scala adapter for fail-all")
    return runner


def _require_jars(jvm) -> None:
    """Fails naming the jars the driver needs if its JVM lacks warren-core's or
    warren-runner's classes (py4j answers a missing class with a package)."""
    from py4j.java_gateway import JavaClass

    classes = [("warren-core", jvm.io.warren.Tracker), ("warren-runner", jvm.io.warren.runner.JobPlan)]
    missing = [name for name, found in classes if not isinstance(found, JavaClass)]
    if missing:
        raise WarrenSparkError(
            f"warren.spark.train needs warren-core's and warren-runner's jars on the driver's class path, and "
            f"{' and '.join(missing)} is missing: pass them with spark-submit --jars "
            "warren-core-<version>.jar,warren-runner-<version>.jar (or spark.jars)")


def _runner_call(call: Callable[[], Any]) -> Any:
    """``call()``, with warren-runner's ``RunnerException`` as a ``WarrenSparkError`` of its
    message."""
    from py4j.protocol import Py4JJavaError

    try:
        return call()
    except Py4JJavaError as e:
        if e.java_exception.getClass().getName() == "io.warren.runner.RunnerException":
            raise WarrenSparkError(e.java_exception.getMessage()) from None
        raise


def _check_not_speculative(sc) -> None:
    if sc.getConf().get("spark.speculation", "false").strip().lower() == "true":
        raise WarrenSparkError(
            "Warren needs spark.speculation=false: a speculative copy of a worker task would register "
            "the same task id and hold a slot while the original runs")


def _engine(sc):
    """warren-runner's ``JobPlan.Engine`` of a Spark job (retry-one: no run directory)."""
    jvm = sc._jvm
    engine_class = getattr(jvm.io.warren.runner, "JobPlan$Engine")
    return engine_class(
        PREFIX,
        "a directory every executor can read and write",
        "the driver and every executor",
        sc.applicationId,
        None,
        None,
        sc.getConf().get("spark.driver.host", "127.0.0.1"),
    )


def _free_slots(sc) -> tuple[int, int]:
    """The free task slots and all of them, as the driver's scheduler sees them now."""
    jsc = sc._jsc.sc()
    total = jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile())
    busy = sum(e.numRunningTasks() for e in jsc.statusTracker().getExecutorInfos())
    return total - busy, total


def _await_slots(sc, n: int, wait_s: float) -> None:
    """Waits up to ``wait_s`` seconds for ``n`` free task slots (executors still registering),
    else fails: the workers wait for each other, so all must run at once."""
    deadline = time.monotonic() + wait_s
    free, total = _free_slots(sc)
    while free < n and time.monotonic() < deadline:
        time.sleep(0.1)
        free, total = _free_slots(sc)
    if free < n:
        raise WarrenSparkError(
            f"Warren needs {n} task slots running at once but the cluster has {free} free (of {total}): its "
            "workers wait for each other, so they cannot run in turns. Use fewer workers, more executors or "
            f"cores, or {PREFIX}slotWaitTimeout to wait for executors that are still registering")


def _run(sc, rdd, n: int, base: dict[str, str], fn, trackers, progress: tuple[str, float]) -> list[Any]:
    """Runs the workers' stage, tagged so that a final failure the tracker reports stops it at
    once, and watched so that a fenced worker's attempt is killed; returns the results in
    task-id order."""
    tag = f"warren-{uuid.uuid4()}"
    watch = _FinalWatch(sc, trackers.tracker(0), tag, _console_lines(sc))

    def body(index: int, rows: Iterable[Any]):
        from pyspark import TaskContext

        attempt = TaskContext.get().attemptNumber()
        yield index, run_worker(task_settings(base, index, attempt), fn, iter(rows), progress)

    workers = rdd.mapPartitionsWithIndex(body)
    fences = _fence_watch(sc, trackers, tag, workers)
    sc.addJobTag(tag)
    sc.setLocalProperty(_RUN_KEY, tag)
    watch.start()
    try:
        results = workers.collect()
    except Exception as e:
        raise _failure(sc, n, watch, e) from e
    finally:
        watch.stop()
        if fences is not None:
            fences.close()
        sc.setLocalProperty(_RUN_KEY, None)
        sc.removeJobTag(tag)
    return [r for _, r in sorted(results, key=lambda kv: kv[0])]


def _fence_watch(sc, trackers, run_id: str, workers):
    """warren-spark's watch of the run (``io.warren.spark.PythonRun``): a worker the tracker
    fenced has its task attempt killed, and its executor killed and replaced if it does not
    end it, so that Spark runs the task again now. Without warren-spark's jar on the driver's
    class path: ``None``, and a warning (once) that a frozen executor's task then waits for
    Spark's own timeout."""
    from py4j.java_gateway import JavaClass

    python_run = sc._jvm.io.warren.spark.PythonRun
    if not isinstance(python_run, JavaClass):
        global _WARNED_NO_FENCE_WATCH
        if not _WARNED_NO_FENCE_WATCH:
            _WARNED_NO_FENCE_WATCH = True
            logging.getLogger("warren.spark").warning(
                "warren-spark's jar is not on the driver's class path: a worker the tracker fences (its executor "
                "paused, frozen or cut off) keeps its task slot until Spark gives the executor up "
                "(spark.network.timeout). Add warren-spark_<scala version>-<version>.jar to --jars to have its "
                "attempt killed and re-run at once.")
        return None
    return python_run.watch(sc._jsc.sc(), trackers, run_id, workers._jrdd.rdd().id())


def _failure(sc, n: int, watch: _FinalWatch, error: Exception) -> WarrenSparkError:
    """The error a failed job ends with: the failure that cannot succeed on retry, if a worker
    had one; else Spark's, with the task retry limit."""
    if watch.final is not None:
        return WarrenSparkError(
            f"Warren job of {n} workers (retry-one) failed with an error that cannot succeed on retry, "
            f"and the job was stopped: {watch.final}")
    limit = sc.getConf().get("spark.task.maxFailures", "4")
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return WarrenSparkError(
        f"Warren job of {n} workers (retry-one) failed: a task failed more often than Spark retries it "
        f"(spark.task.maxFailures={limit}; in local mode, local[N,F] allows F): {first}")


def _console_lines(sc):
    """In an interactive session (``spark.ui.showConsoleProgress``, which the pyspark shell
    and a ``SparkSession.builder`` in a notebook set), whose console shows only warnings, the
    tracker's lines collected for the watch to print (``NativeLog.collectTrackerLines``);
    ``None`` elsewhere, where they are in the driver's log."""
    if sc.getConf().get("spark.ui.showConsoleProgress", "false").strip().lower() != "true":
        return None
    return sc._jvm.io.warren.NativeLog.collectTrackerLines()


class _FinalWatch:
    """A driver thread that asks the tracker, every half second, whether the job failed for
    good: a worker's error that cannot succeed on retry (a call mismatch, a recovery that is
    impossible) is reported to the tracker, which holds every re-run of a task from then on.
    The watch then cancels the job's Spark jobs (by tag) instead of letting them wait. Given
    the tracker's ``lines``, it prints them to standard error as ``[warren] <line>`` (workers
    arriving, recoveries, rank 0's progress, the end) until the job ends."""

    def __init__(self, sc, tracker, tag: str, lines=None):
        self._sc, self._tracker, self._tag, self._lines = sc, tracker, tag, lines
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="warren-final-watch", daemon=True)
        self.final: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=30)
        if self._lines is not None:
            self._show_lines()
            self._lines.close()

    def _show_lines(self) -> None:
        if self._lines is None:
            return
        try:
            for line in self._lines.drain():
                print(f"[warren] {line}", file=sys.stderr, flush=True)
        except Exception:  # the gateway is shutting down: nothing to show any more
            pass

    def _loop(self) -> None:
        try:
            self._watch()
        finally:
            self._show_lines()

    def _watch(self) -> None:
        from py4j.protocol import Py4JJavaError

        poll = self._sc._jvm.java.time.Duration.ofMillis(int(_WATCH_POLL_S * 1000))
        while not self._stopped.is_set():
            self._show_lines()
            try:
                self._tracker.awaitCompletion(poll)
                return  # every worker finished
            except Py4JJavaError as e:
                if e.java_exception.getClass().getName() == "io.warren.WarrenTimeoutException":
                    continue
                if self._stopped.is_set():
                    return
                self.final = str(e.java_exception.getMessage())
                self._sc.cancelJobsWithTag(self._tag)
                return
            except Exception:  # the gateway is shutting down: nothing to watch any more
                return

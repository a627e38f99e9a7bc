"""The logistic-regression example on a real Spark standalone cluster (a master and three
Worker daemons started by scripts/spark-standalone.sh, executors in their own JVMs): without
failures it gives the model recorded for the demo; with an executor JVM and then a whole
Worker process killed by SIGKILL from outside, Spark re-runs the lost tasks, Warren's
retry-one recovery slots them back in and the job ends with the same model; and the same in
--deploy-mode cluster, where the driver (and so the tracker) runs on a worker. RecordIO training
keeps its data master's queue in a real etcd (as in docker/compose.yml, whose image has the JNI
library with its etcd feature) and reads every record once per pass with a task killed."""

from __future__ import annotations

import re
import time

from conftest import CORES, MEMORY
from sparkjob import (RECORDIO_CLASS, RUNNER_JAR, SCALA_JAR, SPARK_JAR, Cluster, Result, alive, cmdline, core_jar_with_etcd, demo_job, etcd,
                      etcd_keys, executor_pid, parent_pid, sigkill, submit)

# One executor per core, and one spare executor beyond the job's three workers, so that a
# re-run task finds a slot at once.
EXECUTORS = {"spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "4"}
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def test_failure_free_run_gives_the_recorded_model(full_cluster, spark, tmp_path):
    args, recorded = demo_job()
    job = submit(spark, full_cluster.url, args, tmp_path, conf=EXECUTORS)
    r = job.finish(timeout=300)
    assert r.model_hash == recorded, "the demo's failure-free model changed: update spark-examples/demo-model-hash.txt"
    assert r.recoveries == 0
    assert len(r.losses) == 20 and r.losses == sorted(r.losses, reverse=True)
    assert r.accuracy > 0.9


def progress_version(job, at_least: int, after: int = 0, timeout: float = 180) -> re.Match:
    """Waits for rank 0's progress line showing checkpoint version >= at_least."""
    deadline = time.monotonic() + timeout
    while True:
        m = job.wait_for(r"\[rank 0\] progress: .*checkpoint version (\d+), recoveries (\d+)",
                         max(1.0, deadline - time.monotonic()), after)
        if int(m.group(1)) >= at_least:
            return m
        after = m.end()


def busy_executors_and_their_worker(job, timeout: float = 30) -> tuple[list[int], int]:
    """The pids of the executor JVMs running a task and the Worker daemon of one of them. Asked
    again until both are seen (the REST API may list no busy executor for a moment, and a
    just-killed executor for a while, under load)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = []
        for e in job.busy_executor_ids():
            try:
                busy.append(executor_pid(e))
            except AssertionError:  # gone since the REST API answered
                pass
        for p in busy:
            try:
                w = parent_pid(p)
            except FileNotFoundError:  # gone meanwhile
                continue
            if WORKER_CLASS in cmdline(w):
                return busy, w
        assert time.monotonic() < deadline, f"no busy executor with a Worker parent in {timeout} s: {busy}"
        time.sleep(0.5)


def test_sigkill_an_executor_then_a_worker_recovers_the_failure_free_model(full_cluster: Cluster, spark, tmp_path):
    args, recorded = demo_job()
    # 0.6 s per iteration: time to kill twice while the workers train (the model does not change).
    job = submit(spark, full_cluster.url, [*args, "--pause-ms", "600"], tmp_path, conf=EXECUTORS, ui=True)
    killed_worker = False
    try:
        # 1. SIGKILL one executor JVM that runs a Warren task, a few iterations in.
        m = progress_version(job, 2)
        sigkill(executor_pid(job.busy_executor_ids()[0]))
        m = job.wait_for(r"task of partition \d+ attempt 0 failed \(ExecutorLostFailure", 60, m.end())
        # The re-run task registers again and the workers re-link and go on.
        m = job.wait_for(r"tracker: re-link round \d+ complete", 120, m.end())
        m = job.wait_for(r"\[rank 0\] progress: .*checkpoint version (\d+)", 60, m.end())

        # 2. SIGKILL a whole Worker daemon that hosts a busy executor: its executors die with it.
        m = progress_version(job, int(m.group(1)) + 1, m.end())
        busy, worker = busy_executors_and_their_worker(job)
        orphans = [p for p in busy if parent_pid(p) == worker]
        sigkill(worker)
        # Leave the cluster as the other tests expect it, whatever happens next.
        killed_worker = True
        m = job.wait_for(r"task of partition \d+ attempt \d+ failed", 90, m.end())
        job.wait_for(r"tracker: re-link round \d+ complete", 120, m.end())

        r = job.finish(timeout=300)
    finally:
        job.kill()
        if killed_worker:
            full_cluster.add_worker(CORES, MEMORY)
    assert r.model_hash == recorded
    # Two lost attempts (the second kill may hit the first one's re-run), two recoveries.
    assert len(re.findall(r"attempt \d+ failed \(ExecutorLostFailure", job.stderr)) >= 2, job.stderr[-3000:]
    total = re.search(r"tracker: all 3 workers finished in \S+ \((\d+) recoveries\)", job.stderr)
    assert total and int(total.group(1)) >= 2, job.stderr[-3000:]
    assert re.search(r"warren\.recoveries = [2-9]", job.stderr), job.stderr[-3000:]
    # The killed Worker's executor JVMs did not outlive it.
    deadline = time.monotonic() + 60
    while any(alive(p) for p in orphans) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(alive(p) for p in orphans), f"executors {orphans} outlived their Worker"


def test_cluster_deploy_mode_runs_the_driver_and_tracker_on_a_worker(full_cluster: Cluster, spark, tmp_path):
    args, recorded = demo_job()
    started = time.time()
    job = submit(
        spark, full_cluster.url, [*args, "--kill-executor", "8"], tmp_path,
        conf={**EXECUTORS, "spark.standalone.submit.waitAppCompletion": "true",
              "spark.driver.cores": "1", "spark.driver.memory": "768m"},
        deploy_mode="cluster",
    )
    code = job.proc.wait(timeout=400)
    assert code == 0, f"spark-submit --deploy-mode cluster exited {code}:\n{job.stderr[-3000:]}"
    # The driver ran on a worker: its output is in that worker's work dir.
    drivers = [d for d in full_cluster.dir.glob("worker-*/driver-*") if d.stat().st_mtime >= started]
    assert len(drivers) == 1, f"expected one new driver dir, found {drivers}"
    out = (drivers[0] / "stdout").read_text()
    err = (drivers[0] / "stderr").read_text()
    assert "tracker: all 3 workers finished" in err, err[-3000:]
    assert re.search(r"task of partition 1 attempt 0 failed \(ExecutorLostFailure", err), err[-3000:]
    r = Result.parse(out)
    assert r.model_hash == recorded
    assert r.recoveries == 1


def test_recordio_training_with_the_data_master_queue_in_etcd(full_cluster: Cluster, spark, tmp_path):
    records, passes = 600, 2
    (tmp_path / "data").mkdir()
    jars = [core_jar_with_etcd(tmp_path), RUNNER_JAR, SCALA_JAR, SPARK_JAR]
    with etcd(tmp_path) as endpoint:
        job = submit(
            spark, full_cluster.url,
            ["--workers", "3", "--records", str(records), "--passes", str(passes), "--kill-task", "5",
             "--data-dir", str(tmp_path / "data"), "--store", f"etcd:{endpoint}/warren-e2e"],
            tmp_path / "job", conf=EXECUTORS, main_class=RECORDIO_CLASS, jars=jars,
        )
        assert job.proc.wait(timeout=400) == 0, job.stderr[-3000:]
        keys = etcd_keys(endpoint, "/warren-e2e/")
    out = job.stdout
    for p in range(1, passes + 1):
        assert f"pass {p} records read at least once {records} of {records}" in out, out
    assert "RECOVERIES 1" in out
    assert re.search(r"^MASTER MasterStatus\[.*pass=2,.*pending=0,.*failed=0\]$", out, re.M), out
    assert "task of partition 1 attempt 1 finished: re-run and recovered from its peers" in job.stderr
    assert keys, "the data master wrote nothing to etcd"

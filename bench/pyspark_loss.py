"""What one lost executor does to a PySpark training job: xgboost.spark against
warren.spark.train, each run without a failure and with one executor JVM SIGKILLed mid-fit,
on the same local-cluster[3,1,1024] and data (bench/pyspark_loss_job.py).

Reproduce: bash bench/pyspark_loss.sh (a venv with xgboost.spark's dependencies and Warren's
package in .bench-venv-pyspark, Spark 4.3 from scripts/setup-spark.sh, warren-core's and
warren-runner's jars from `make jvm`). Appends one JSON line per run to
bench/results/pyspark-loss.jsonl and prints the table of docs/benchmarks-spark.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "bench" / "pyspark_loss_job.py"
JARS = [ROOT / "jvm" / m / "target" / f"{m}-0.1.0-SNAPSHOT.jar" for m in ("warren-core", "warren-runner")]
QUIET = ROOT / "spark-examples" / "conf" / "log4j2-quiet.properties"
LIMIT_S = 600


def executors(session: int) -> list[int]:
    """Executor JVMs of the spark-submit that leads process session `session`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            sid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[3])
        except (OSError, ValueError, IndexError):
            continue
        if "CoarseGrainedExecutorBackend" in cmd and sid == session:
            found.append(int(proc.name))
    return sorted(found)


def run(spark_home: Path, python: str, mode: str, kill_after_s: float | None) -> dict:
    """One spark-submit of the job; with `kill_after_s`, SIGKILLs one executor JVM that many
    seconds after the fit started."""
    out = Path(tempfile.mkdtemp(prefix=f"pyspark-loss-{mode}-"))
    java = f"-Dlog4j2.configurationFile=file:{QUIET} -Dwarren.spark.log={out / 'spark.log'}"
    cmd = [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[3,1,1024]",
           "--jars", ",".join(map(str, JARS)), "--driver-java-options", java,
           "--conf", f"spark.executor.extraJavaOptions={java}", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.task.maxFailures=4",
           str(JOB), mode, str(out)]
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    started = time.monotonic()
    with open(out / "stdout", "wb") as so, open(out / "stderr", "wb") as se:
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, env=env, cwd=out, start_new_session=True)
    killed = None
    if kill_after_s is not None:
        while not (out / "fit-started").exists() and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(kill_after_s)
        pids = executors(proc.pid)
        if pids and proc.poll() is None:
            killed = pids[1 % len(pids)]
            os.kill(killed, signal.SIGKILL)
    try:
        proc.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stdout = (out / "stdout").read_text(errors="replace")
    log = (out / "stderr").read_text(errors="replace") + (out / "spark.log").read_text(errors="replace") \
        if (out / "spark.log").exists() else (out / "stderr").read_text(errors="replace")
    fit = re.search(r"^FIT_SECONDS (\S+)$", stdout, re.M)
    failed = re.search(r"^FIT_FAILED (\S+) (.*)$", stdout, re.M)
    digest = re.search(r"^MODEL_HASH (\S+)$", stdout, re.M)
    return {
        "mode": mode, "killed_executor_after_s": kill_after_s if killed else None, "kill_requested_s": kill_after_s,
        "exit": proc.returncode, "wall_s": round(time.monotonic() - started, 2),
        "fit_s": float(fit.group(1)) if fit else (float(failed.group(1)) if failed else None),
        "outcome": "model" if digest else (
            "failed: Could not recover from a failed barrier ResultStage"
            if "Could not recover from a failed barrier ResultStage" in log
            else "failed: " + failed.group(2) if failed else f"exit {proc.returncode}"),
        "model_hash": digest.group(1) if digest else None,
        "barrier_stage_failed": ("Could not recover from a failed barrier ResultStage" in log
                                 or ("barrier" in log.lower() and "Resubmitting" in log)),
        # The tracker's line for a re-run task that joined again (spark-submit's stderr).
        "task_re_runs": len(set(re.findall(r"task (\d+) \(rank \d+\) registered again \(attempt (\d+)\)", log))),
        "dir": str(out),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spark-home", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable, help="the Python of the driver and the workers")
    ap.add_argument("--kill-at", type=float, default=0.5,
                    help="when to kill, as a fraction of the failure-free fit's time (default 0.5)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pyspark-loss.jsonl")
    args = ap.parse_args()
    for jar in JARS:
        if not jar.is_file():
            sys.exit(f"{jar} is missing: build the JVM modules first (make jvm)")
    meta = {"machine": platform.node(), "cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)}
    rows = []
    for mode in ("xgboost", "warren"):
        clean = run(args.spark_home, args.python, mode, None)
        # Halfway through the fit (by the run without a failure): inside the training stage.
        kill = round(args.kill_at * clean["fit_s"], 1) if clean["fit_s"] else 5.0
        for r in (clean, run(args.spark_home, args.python, mode, kill)):
            r.update(meta)
            rows.append(r)
            print(json.dumps(r), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if k != "dir"}) + "\n")
    print("\n| library | executor lost | fit (s) | the training stage | outcome | same model as without the loss |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        clean = next(c for c in rows if c["mode"] == r["mode"] and c["killed_executor_after_s"] is None)
        same = "" if r is clean else ("no model" if not r["model_hash"] else
                                      "yes" if r["model_hash"] == clean["model_hash"] else "no")
        lost = "no" if r["killed_executor_after_s"] is None else f"at {r['killed_executor_after_s']:g} s"
        stage = ("" if r is clean else "its barrier stage failed" if r["barrier_stage_failed"]
                 else f"{r['task_re_runs']} task re-run" if r["task_re_runs"] else "no task failed in it")
        print(f"| {r['mode']} | {lost} | {r['fit_s']} | {stage} | {r['outcome'][:90]} | {same} |")


if __name__ == "__main__":
    main()

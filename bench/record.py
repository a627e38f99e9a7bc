#!/usr/bin/env python3
"""Turns one benchmark run into ONE JSON line for bench/results/*.jsonl (used by allreduce.sh).

    record.py run  --impl I -n N --bytes B --iters K --rc RC --stdout F --stderr F [--cmd ...]
    record.py meta --phase start|end [--warren PATH]

`run`: takes the last JSON line of the run's stdout, adds the fields the report needs
(impl, workers, bytes, iters, if missing) and the command; if the run failed (non-zero
exit, timeout, no JSON line, unparsable line), prints an error record instead:
{"impl":..., "workers":..., "bytes":..., "error": "..."}. Never fails itself.
`meta`: date, machine (nproc, CPU model, kernel, load average) and software versions.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys


def _read(path, limit=None):
    try:
        with open(path, errors="replace") as f:
            s = f.read()
    except OSError:
        return ""
    return s if limit is None else s[-limit:]


def _last_stderr_line(text):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Prefer a line that looks like an error message over progress noise.
    for ln in reversed(lines):
        if re.search(r"error|fail|abort|not found|no such|unrecognized|invalid|usage", ln, re.I):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def cmd_run(a):
    base = {"impl": a.impl, "workers": a.workers, "bytes": a.bytes, "iters": a.iters}
    out = _read(a.stdout)
    err = _read(a.stderr, 20000)
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("{")]
    rec = None
    problem = None
    if lines:
        try:
            rec = json.loads(lines[-1])
            if not isinstance(rec, dict):
                rec, problem = None, "JSON line is not an object"
        except ValueError as e:
            problem = f"unparsable JSON line ({e})"
    if a.rc == 124:
        problem = f"timed out after {a.timeout} s"
    elif a.rc != 0:
        problem = f"exit code {a.rc}" + (f": {_last_stderr_line(err)}" if err.strip() else "")
    elif rec is None and problem is None:
        problem = "no JSON line on stdout" + (f"; stderr: {_last_stderr_line(err)}" if err.strip() else "")
    if rec is not None and problem is None:
        need = ("gbps",) if "stream" in a.impl or a.impl == "iperf3" else (
            ("rtt_median_s",) if "pingpong" in a.impl else ("median_s", "busbw_gbps"))
        missing = [k for k in need if k not in rec]
        if missing:
            problem = f"JSON line lacks {', '.join(missing)}"
    if problem is not None:
        base["error"] = problem
        rec = base
    else:
        if rec.get("impl") not in (None, a.impl):
            rec["reported_impl"] = rec["impl"]
        rec["impl"] = a.impl  # the runner's label is the key the report uses
        for k, v in base.items():
            rec.setdefault(k, v)
        if rec.get("check", "ok") != "ok":
            rec["error"] = f"wrong result: {rec['check']}"
    if a.cmd:
        rec["cmd"] = a.cmd
    rec["ts"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load = _read("/proc/loadavg").split()
    if load:
        rec["load1"] = float(load[0])  # 1-min load average right after the run
    print(json.dumps(rec, separators=(",", ":")))


def _cpu_model():
    for ln in _read("/proc/cpuinfo").splitlines():
        if ln.lower().startswith("model name"):
            return ln.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _version(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        text = (r.stdout or r.stderr).strip()
        return text.splitlines()[0] if r.returncode == 0 and text else None
    except (OSError, subprocess.SubprocessError):
        return None


def cmd_meta(a):
    rec = {
        "impl": "meta",
        "phase": a.phase,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "kernel": platform.release(),
        "loadavg": _read("/proc/loadavg").split()[:3],
    }
    mem = re.search(r"MemTotal:\s+(\d+)", _read("/proc/meminfo"))
    if mem:
        rec["mem_gib"] = round(int(mem.group(1)) / 2**20, 1)
    if a.phase == "start":
        rec["python"] = platform.python_version()
        for mod in ("numpy", "xgboost", "mpi4py"):
            try:
                rec[mod] = __import__(mod).__version__
            except Exception as e:  # noqa: BLE001 - report whatever is wrong
                rec[mod] = f"missing ({type(e).__name__})"
        rec["openmpi"] = _version(["mpirun", "--version"]) if shutil.which("mpirun") else None
        rec["iperf3"] = _version(["iperf3", "--version"]) if shutil.which("iperf3") else None
        rec["git_rev"] = _version(["git", "rev-parse", "--short", "HEAD"])
        if a.warren:
            rec["warren"] = a.warren
            rec["warren_present"] = os.access(a.warren, os.X_OK)
            if rec["warren_present"]:
                rec["warren_version"] = _version([a.warren, "--version"])
        if a.command:
            rec["command"] = a.command
    print(json.dumps(rec, separators=(",", ":")))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--impl", required=True)
    r.add_argument("-n", "--workers", type=int, required=True)
    r.add_argument("--bytes", type=int, required=True)
    r.add_argument("--iters", type=int, required=True)
    r.add_argument("--rc", type=int, required=True)
    r.add_argument("--timeout", type=int, default=300)
    r.add_argument("--stdout", required=True)
    r.add_argument("--stderr", required=True)
    r.add_argument("--cmd", default=None)
    m = sub.add_parser("meta")
    m.add_argument("--phase", default="start")
    m.add_argument("--warren", default=None)
    m.add_argument("--command", default=None)
    a = p.parse_args()
    try:
        (cmd_run if a.what == "run" else cmd_meta)(a)
    except Exception as e:  # noqa: BLE001 - a broken record must not stop the sweep
        print(json.dumps({"impl": getattr(a, "impl", a.what), "error": f"record.py: {e!r}"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

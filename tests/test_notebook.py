"""notebooks/warren-spark.ipynb run headless (nbclient) with the installed kernel
`warren-spark` (Spark's spark-shell REPL with Warren's jars, installed by scripts/setup.sh):
on local[2,4] and on the standalone cluster. Its outputs must show the killed task, the
recovery, the loss per iteration as a table and as a chart, and the same model as a run
without the failure. On local mode, two more cells check that a compile error and an uncaught
exception fail their cells."""

from __future__ import annotations

import re

import nbformat
from nbclient import NotebookClient

from sparkjob import ROOT, built_jars

NOTEBOOK = ROOT / "notebooks" / "warren-spark.ipynb"
ITERS = 15


def stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def displays(nb, mime: str) -> list[str]:
    return [o.data[mime] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "display_data" and mime in o.data]


def run(master: str, submit_args: str, monkeypatch, extra_cells=()) -> nbformat.NotebookNode:
    built_jars()
    monkeypatch.setenv("WARREN_SPARK_MASTER", master)
    monkeypatch.setenv("WARREN_SPARK_SUBMIT_ARGS", f"--conf spark.ui.enabled=false {submit_args}")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(src) for src in extra_cells]
    client = NotebookClient(nb, kernel_name="warren-spark", timeout=600, startup_timeout=120,
                            allow_errors=bool(extra_cells))
    client.execute()
    return nb


def check_outputs(nb, master: str) -> None:
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(stdout(c) for c in code)
    assert f"on {master}" in text, text[:2000]
    assert "40000 rows in 2 partitions" in text
    # The killed task, as Spark saw it, and its recovery as Warren's driver-side lines show it.
    assert re.search(r"task of partition 1 attempt 0 failed: java.lang.RuntimeException: killed: rank 1 at iteration 6", text)
    assert "task of partition 1 attempt 1 finished: re-run and recovered from its peers" in text
    assert "recoveries: 1" in text
    accuracy = float(re.search(r"accuracy: (\S+)", text).group(1))
    assert accuracy > 0.85
    # Loss per iteration: a table of ITERS rows (decreasing) and a chart of ITERS points.
    [table] = displays(nb, "text/html")
    losses = [float(x) for x in re.findall(r"<tr><td>\d+</td><td>([^<]+)</td></tr>", table)]
    assert len(losses) == ITERS and losses == sorted(losses, reverse=True)
    [svg] = displays(nb, "image/svg+xml")
    points = re.search(r'<polyline [^>]*points="([^"]+)"', svg).group(1).split()
    assert len(points) == ITERS
    # The same model as the run without the failure.
    hashes = re.findall(r"^model with(?:out)? [^:]+: +([0-9a-f]{64})", text, re.M)
    assert len(hashes) == 2 and hashes[0] == hashes[1], text[-2000:]
    assert "same model as without the failure: true" in text


def test_notebook_on_local_mode(monkeypatch):
    nb = run("local[2,4]", "", monkeypatch, extra_cells=[
        "val broken: Int = \"not an int\"",
        "throw new IllegalStateException(\"a cell that throws\")",
    ])
    *cells, compile_error, thrown = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]
    check_outputs(nb, "local[2,4]")
    [err] = [o for o in compile_error.outputs if o.output_type == "error"]
    assert err.ename == "CompileError" and "type mismatch" in err.evalue
    [err] = [o for o in thrown.outputs if o.output_type == "error"]
    assert err.ename == "IllegalStateException" and err.evalue == "a cell that throws"


def test_notebook_on_the_standalone_cluster(full_cluster, monkeypatch):
    nb = run(full_cluster.url, "--conf spark.executor.cores=1 --conf spark.executor.memory=512m "
             "--conf spark.cores.max=2", monkeypatch)
    check_outputs(nb, full_cluster.url)

"""The notebook kernel's pure parts: what spark-shell prints for a cell becomes text, rich
outputs or the cell's error (output.py), rich outputs render as HTML and SVG (render.py), and
the spark-shell command line follows the kernel's settings (kernel.py)."""

from __future__ import annotations

import json

import pytest

from warren_spark_kernel.kernel import PROMPT, spark_shell_command
from warren_spark_kernel.output import DISPLAY_MARKER, CellOutput, Display, Text
from warren_spark_kernel.render import line_chart, render, table


def feed(lines: list[str]) -> tuple[list, CellOutput]:
    out = CellOutput()
    items = [item for line in lines for item in out.feed(line)]
    return items, out


def test_text_passes_through_without_the_repls_paste_lines_and_colours():
    items, out = feed(["Pasting file /tmp/cell1.scala...", "// Exiting paste mode... now interpreting.",
                       "\x1b[1m\x1b[34mval x\x1b[0m: Int = 2\r\n", "hello"])
    assert items == [Text("val x: Int = 2"), Text("hello")]
    assert out.error is None


def test_a_compile_error_fails_the_cell():
    _, out = feed(["", "val y = x + undefinedThing", "            ^",
                   "/tmp/cell2.scala:1: error: not found: value undefinedThing"])
    assert out.error.name == "CompileError"
    assert out.error.message == "not found: value undefinedThing"


def test_an_uncaught_exception_fails_the_cell_with_its_class_and_message():
    _, out = feed(["org.apache.spark.SparkException: Job aborted: boom", "\tat remote.Frame(X.scala:1)",
                   "Driver stacktrace:", "  at org.apache.spark.Foo.bar(Foo.scala:10)",
                   "Caused by: java.lang.RuntimeException: boom", "  ... 47 elided"])
    assert (out.error.name, out.error.message) == ("SparkException", "Job aborted: boom")
    assert out.error.traceback[-1] == "  ... 47 elided"


def test_a_logged_stack_trace_is_only_text():
    _, out = feed(["12:00:01 WARN task failed", "java.lang.RuntimeException: killed",
                   "\tat a.B.c(B.java:1)", "\tat d.E.f(E.java:2)", "done"])
    assert out.error is None


def test_display_lines_become_rich_outputs():
    item = {"kind": "table", "columns": ["iteration", "loss"], "rows": [[1, 0.5], [2, 0.25]]}
    items, out = feed([DISPLAY_MARKER + json.dumps(item)])
    [d] = items
    assert isinstance(d, Display) and "<td>0.25</td>" in d.bundle["text/html"]
    items, _ = feed([DISPLAY_MARKER + "{not json"])
    assert isinstance(items[0], Text) and "could not display" in items[0].line


def test_table_escapes_html_and_aligns_text():
    b = table(["a<b", "n"], [["x&y", 1.5], ["z", 10]])
    assert "<th>a&lt;b</th>" in b["text/html"] and "<td>x&amp;y</td>" in b["text/html"]
    assert b["text/plain"].splitlines() == ["a<b    n", "x&y  1.5", "  z   10"]
    with pytest.raises(ValueError):
        table(["a", "b"], [[1]])


def test_line_chart_maps_points_inside_the_frame():
    b = line_chart("loss", "iteration", "loss", [[1, 0.7], [2, 0.5], [3, 0.4]])
    pts = b["image/svg+xml"].split('points="')[1].split('"')[0].split()
    xs = [float(p.split(",")[0]) for p in pts]
    ys = [float(p.split(",")[1]) for p in pts]
    assert xs == sorted(xs) and ys == sorted(ys)  # loss falls: y grows downwards in SVG
    assert min(xs) >= 0 and max(ys) <= 320
    with pytest.raises(ValueError):
        line_chart("t", "x", "y", [])
    with pytest.raises(ValueError):
        render({"kind": "pie"})


def test_spark_shell_command_follows_the_settings():
    env = {"SPARK_HOME": "/spark", "WARREN_JARS": "a.jar,b.jar", "WARREN_LOG4J2": "/q.properties",
           "WARREN_SPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false --conf 'spark.x=a b'"}
    cmd = spark_shell_command(env, "/tmp/spark.log")
    assert cmd[:3] == ["/spark/bin/spark-shell", "--master", "local[2,4]"]
    opts = cmd[cmd.index("--driver-java-options") + 1]
    assert f"-Dscala.repl.prompt=%n{PROMPT}" in opts.split() and "-Dwarren.spark.log=/tmp/spark.log" in opts
    assert cmd[cmd.index("--jars") + 1] == "a.jar,b.jar"
    assert cmd[-4:] == ["--conf", "spark.ui.enabled=false", "--conf", "spark.x=a b"]
    with pytest.raises(RuntimeError, match="SPARK_HOME"):
        spark_shell_command({}, "/tmp/x")

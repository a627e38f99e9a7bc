"""Turns what spark-shell prints for one cell into the kernel's outputs (no I/O here).

The kernel runs each cell as `:paste FILE` and feeds the REPL's output to a `CellOutput` line
by line, as it arrives. Three kinds of lines come out:

- text, passed on as the cell's stdout (the REPL's echo of definitions and results, what the
  code prints, and the driver's log lines: Warren's progress and recovery lines);
- display lines, `@@warren-display@@ {json}` printed by the prelude's `Notebook` helpers,
  turned into rich outputs (an HTML table, an SVG chart);
- the REPL's report of an error, which makes the cell fail: a compile error
  (`FILE.scala:LINE: error: ...`) or an uncaught exception (its `Class: message` line, maybe
  more lines, `  at ...` frames and `Caused by:` sections, and always the REPL's last line
  `  ... N elided`; a logger's stack trace, which has no such line, is only text).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .render import render

DISPLAY_MARKER = "@@warren-display@@ "
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The REPL's own lines around a pasted file.
PASTE_NOISE = re.compile(r"^(Pasting file .*\.\.\.|// Exiting paste mode.*now interpreting\.)$")
COMPILE_ERROR = re.compile(r"^\S+\.scala:\d+: error: (.*)$")
EXCEPTION = re.compile(r"^((?:[\w$]+\.)*[\w$]*(?:Exception|Error|Throwable|Failure)[\w$]*)(?::\s?(.*))?$")
# The last line of the REPL's report of an exception (two spaces, not a logger's tab).
ELIDED = re.compile(r"^  \.\.\. \d+ elided$")


@dataclass
class CellError:
    """The error a cell ended with: its name, message and the REPL's lines about it."""

    name: str
    message: str
    traceback: list[str] = field(default_factory=list)


@dataclass
class Text:
    """Plain output, one line (without its newline)."""

    line: str


@dataclass
class Display:
    """A rich output: a MIME bundle for the notebook."""

    bundle: dict[str, str]


class CellOutput:
    """Accumulates one cell's output; `feed` returns what to show now, `error` what failed."""

    def __init__(self) -> None:
        self.error: CellError | None = None
        self._exception: CellError | None = None

    def feed(self, raw: str) -> list[Text | Display]:
        line = ANSI.sub("", raw).rstrip("\r\n")
        if PASTE_NOISE.match(line):
            return []
        if line.startswith(DISPLAY_MARKER):
            try:
                return [Display(render(json.loads(line[len(DISPLAY_MARKER):])))]
            except (ValueError, KeyError, TypeError) as e:
                return [Text(f"(could not display this output: {e}) {line}")]
        self._classify(line)
        return [Text(line)]

    def _classify(self, line: str) -> None:
        if self.error is not None:
            if self.error.name == "CompileError":
                self.error.traceback.append(line)
            return
        m = COMPILE_ERROR.match(line)
        if m:
            self.error = CellError("CompileError", m.group(1), [line])
            return
        m = EXCEPTION.match(line)
        if m:
            # Perhaps the first line of the REPL's report of an uncaught exception (its
            # message may span lines, a remote stack trace among them).
            self._exception = CellError(m.group(1).rsplit(".", 1)[-1], m.group(2) or "", [line])
        elif self._exception is not None:
            self._exception.traceback.append(line)
            if ELIDED.match(line):
                self.error = self._exception

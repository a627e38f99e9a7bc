"""Rich outputs of the prelude's `Notebook` helpers as MIME bundles (no I/O here).

Each display line carries one JSON object with a `kind`:

- `table`: `columns` (names) and `rows` (lists of numbers or strings): an HTML table, and the
  same as aligned text;
- `line`: `title`, `x_label`, `y_label` and `points` ([x, y] pairs): an SVG line chart with
  its axes' ranges marked, and the points as text;
- `html`: `html`, shown as it is.
"""

from __future__ import annotations

from html import escape
from typing import Any

WIDTH, HEIGHT, MARGIN = 560, 320, 56


def render(item: dict[str, Any]) -> dict[str, str]:
    """The MIME bundle of one display item; KeyError or ValueError if it is malformed."""
    kind = item["kind"]
    if kind == "table":
        return table(item["columns"], item["rows"])
    if kind == "line":
        return line_chart(item["title"], item["x_label"], item["y_label"], item["points"])
    if kind == "html":
        return {"text/html": item["html"], "text/plain": item["html"]}
    raise ValueError(f"unknown display kind {kind!r}")


def _cell(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def table(columns: list[str], rows: list[list[Any]]) -> dict[str, str]:
    if any(len(r) != len(columns) for r in rows):
        raise ValueError(f"every row needs {len(columns)} cells")
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(v))}</td>" for v in r) + "</tr>" for r in rows)
    cells = [[str(c) for c in columns]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    text = "\n".join("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells)
    return {"text/html": f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>", "text/plain": text}


def _scale(lo: float, hi: float, out_lo: float, out_hi: float):
    span = (hi - lo) or 1.0
    return lambda v: out_lo + (v - lo) / span * (out_hi - out_lo)


def line_chart(title: str, x_label: str, y_label: str, points: list[list[float]]) -> dict[str, str]:
    if not points:
        raise ValueError("a line chart needs at least one point")
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    sx = _scale(min(xs), max(xs), MARGIN, WIDTH - MARGIN / 2)
    sy = _scale(min(ys), max(ys), HEIGHT - MARGIN, MARGIN / 2)
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
    left, bottom = MARGIN, HEIGHT - MARGIN
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="12">'
        f'<title>{escape(title)}</title>'
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="14">{escape(title)}</text>'
        f'<line x1="{left}" y1="{bottom}" x2="{WIDTH - MARGIN / 2}" y2="{bottom}" stroke="black"/>'
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{MARGIN / 2}" stroke="black"/>'
        f'<text x="{left}" y="{bottom + 16}" text-anchor="middle">{_cell(min(xs))}</text>'
        f'<text x="{WIDTH - MARGIN / 2}" y="{bottom + 16}" text-anchor="middle">{_cell(max(xs))}</text>'
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end">{_cell(min(ys))}</text>'
        f'<text x="{left - 4}" y="{MARGIN / 2 + 4}" text-anchor="end">{_cell(max(ys))}</text>'
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="14" y="{HEIGHT / 2}" text-anchor="middle" transform="rotate(-90 14 {HEIGHT / 2})">'
        f'{escape(y_label)}</text>'
        f'<polyline fill="none" stroke="steelblue" stroke-width="2" points="{path}"/>'
        "</svg>"
    )
    text = f"{title} ({y_label} by {x_label}): " + ", ".join(f"({_cell(x)}, {_cell(y)})" for x, y in zip(xs, ys))
    return {"image/svg+xml": svg, "text/plain": text}

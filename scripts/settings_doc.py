#!/usr/bin/env python3
"""The table of worker settings in docs/settings.md, rendered from the code: every key of
`config::keys::KNOWN` (native/warren-base/src/config.rs), in that order, with the doc comment of
its constant (the sentence `Default: ...` at its end goes to the default column).

    python3 scripts/settings_doc.py           # prints the table
    python3 scripts/settings_doc.py --write   # puts it into docs/settings.md
    python3 scripts/settings_doc.py --check   # exit 1 when docs/settings.md differs

scripts/check_docs.py (`make docs`, tests/test_readme.py) runs the check.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "native" / "warren-base" / "src" / "config.rs"
PAGE = ROOT / "docs" / "settings.md"
MARKER = "<!-- settings-table: rendered by scripts/settings_doc.py from config::keys (native/warren-base/src/config.rs) -->"
REGENERATE = "python3 scripts/settings_doc.py --write"


def keys() -> list[tuple[str, str, str]]:
    """(key, default, meaning) for every key of KNOWN, in its order."""
    src = CONFIG.read_text()
    body = src[src.index("pub mod keys {"):]
    consts, doc = {}, []
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("///"):
            doc.append(s[3:].strip())
            continue
        m = re.match(r'pub const (\w+): &str = "(WARREN_\w+)";', s)
        if m:
            consts[m.group(1)] = (m.group(2), " ".join(doc))
        if not s.startswith("#["):
            doc = []
    known = re.search(r"pub const KNOWN: &\[&str\] = &\[(.*?)\];", body, re.S)
    rows = []
    for name in re.findall(r"\w+", known.group(1)):
        key, text = consts[name]
        m = re.match(r"(.*?)\s*Default: (.*?)\.?$", text)
        if not m:
            raise SystemExit(f"{CONFIG}: the doc comment of keys::{name} does not end with `Default: ...`")
        meaning, default = m.group(1), m.group(2)
        rows.append((key, default, meaning))
    return rows


def link(text: str) -> str:
    """docs/page.md in a doc comment becomes a link within the book."""
    return re.sub(r"docs/([\w-]+\.md)", r"[\1](\1)", text)


def table() -> str:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, meaning in keys():
        lines.append(f"| `{key}` | {default} | {link(meaning).replace('|', '&#124;')} |")
    return "\n".join(lines)


def current() -> str | None:
    lines = PAGE.read_text().splitlines()
    if MARKER not in lines:
        return None
    return "\n".join(_takewhile_table(lines[lines.index(MARKER) + 1:]))


def _takewhile_table(lines: list[str]) -> list[str]:
    out = []
    for l in lines:
        if not l.startswith("|"):
            break
        out.append(l)
    return out


def problems() -> list[str]:
    have = current()
    if have is None:
        return [f"docs/settings.md has no line {MARKER}"]
    try:
        want = table()
    except SystemExit as e:
        return [str(e)]
    if have != want:
        return [f"docs/settings.md: the settings table differs from config::keys; run {REGENERATE}"]
    return []


def write() -> None:
    lines = PAGE.read_text().splitlines()
    begin = lines.index(MARKER) + 1
    end = begin + len(_takewhile_table(lines[begin:]))
    PAGE.write_text("\n".join(lines[:begin] + table().splitlines() + lines[end:]) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    elif sys.argv[1:] == ["--check"]:
        p = problems()
        print("\n".join(p) or "docs/settings.md: up to date", file=sys.stderr if p else sys.stdout)
        sys.exit(1 if p else 0)
    elif not sys.argv[1:]:
        print(table())
    else:
        raise SystemExit(__doc__)

#!/usr/bin/env python3
"""Checks the docs book (docs/, built by mdBook) and the READMEs:

- every page docs/SUMMARY.md lists exists, and every page under docs/ is listed there;
- every relative link of the book and of the READMEs points at a file that exists, and every
  `#anchor` (in the same page or another Markdown page) names a heading of that page;
- the settings reference (docs/settings.md) lists exactly the keys of
  native/warren-base/src/config.rs, as scripts/settings_doc.py renders them;
- the book and the READMEs say what Warren does now: no dates, result-file time stamps,
  issue numbers or work rounds in their prose (the sections a benchmark script generates,
  between `<!-- name:begin -->` and `<!-- name:end -->`, may carry their run's date);
- bench/results keeps one current baseline per benchmark (one file per name once its time
  stamp is dropped), and every results data file a page names is there;
- README.md stays a front door of at most README_MAX_LINES lines (the rest is in the book);
- with --book DIR, the book mdBook rendered into DIR: every relative link and `#fragment` of
  its pages (the theme's as well as the content's) names a file of the book and an id in it,
  so a link that resolves in the repository but leaves the book (../README.md) fails too.

Usage: python3 scripts/check_docs.py [--book target/book] (exit 1 with one line per problem).
`make docs` builds the book and runs it with --book; tests/test_readme.py runs the same
checks under pytest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
READMES = ["README.md", "TESTING.md", "jvm/README.md", "jvm/warren-flink/README.md",
           "jvm/flink-examples/README.md", "spark-examples/README.md", "notebooks/README.md",
           "docker/README.md", "tests/README.md"]

# The README says what Warren is, the two commands, a quick start per front end and where
# to read on; everything else belongs in the book.
README_MAX_LINES = 200

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
SUMMARY_ENTRY = re.compile(r"\[[^\]]*\]\(([^)]+)\)")


def prose(markdown: str) -> str:
    """The text without fenced code blocks and inline code (no links are in there)."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """The anchor mdBook (and GitHub) give a heading: lower case, punctuation dropped,
    spaces to dashes."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, seen = set(), {}
    for line in re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
    return found


def summary_pages() -> list[str]:
    text = (DOCS / "SUMMARY.md").read_text()
    return [t for t in SUMMARY_ENTRY.findall(prose(text)) if not re.match(r"\w+:", t)]


def check_summary() -> list[str]:
    problems = []
    listed = summary_pages()
    for target in listed:
        if not (DOCS / target).is_file():
            problems.append(f"docs/SUMMARY.md lists {target}, which does not exist")
    for page in sorted(DOCS.rglob("*.md")):
        rel = page.relative_to(DOCS).as_posix()
        if rel != "SUMMARY.md" and rel not in listed:
            problems.append(f"docs/{rel} is not in docs/SUMMARY.md")
    return problems


def check_links(page: Path) -> list[str]:
    problems = []
    name = page.relative_to(ROOT).as_posix()
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"\w+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{name} links to {target}: {path} does not exist")
        elif page.is_relative_to(DOCS) and not dest.is_relative_to(DOCS):
            problems.append(f"{name} links to {target}, outside the book: name the file as `code` instead")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{name} links to {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / r for r in READMES if (ROOT / r).exists()]


def check_settings() -> list[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    import settings_doc

    return settings_doc.problems()


GENERATED = re.compile(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", re.S)
DIARY = [
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), "a date"),
    (re.compile(r"\b20\d\d[01]\d[0-3]\dT\d{4}"), "a time stamp"),
    (re.compile(r"\bissues?\s+#?\d|\bthe issue\b", re.I), "an issue"),
    (re.compile(r"\b(?:this|last|next|previous|first|second|third|fourth|fifth|an earlier|a later) round\b(?! of\b| trip)", re.I),
     "a work round"),
]
RESULTS = ROOT / "bench" / "results"
# A results file's time stamp: 2026-11-26T195102Z, 20261126T011118Z, 20261127T072621.
STAMP = re.compile(r"[-_]?(?:\d{4}-\d\d-\d\dT\d{6}Z|\d{8}T\d{4,6}Z?)$")


def check_diary(page: Path) -> list[str]:
    """Dates, time stamps, issue numbers and work rounds in a page's prose, outside generated
    sections."""
    name = page.relative_to(ROOT).as_posix()
    problems = []
    text = GENERATED.sub("", page.read_text())
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, what in DIARY:
            m = pattern.search(line)
            if m:
                problems.append(f"{name}: {what} ({m.group(0)!r}) in {line.strip()[:80]!r}: say what Warren does now")
    return problems


def benchmark_of(results_file: str) -> str:
    """The benchmark a results file is of: its name without extension and time stamp."""
    return STAMP.sub("", results_file.split(".", 1)[0])


def results_files() -> list[str]:
    """The results files a clone gets: those git tracks under bench/results. Local runs write
    there too (git ignores them), so the directory itself says nothing about the baselines.
    Outside a git checkout, the files in the directory."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", "."], cwd=RESULTS, capture_output=True,
                             check=True).stdout.decode()
        tracked = [Path(f).name for f in out.split("\0") if f and "/" not in f]
        if tracked or (ROOT / ".git").exists():
            return sorted(tracked)
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(p.name for p in RESULTS.iterdir() if p.is_file()) if RESULTS.is_dir() else []


def check_results() -> list[str]:
    problems = []
    files = results_files()
    by: dict[str, list[str]] = {}
    for f in files:
        by.setdefault(benchmark_of(f), []).append(f)
    for bench, fs in sorted(by.items()):
        if len(fs) > 1:
            problems.append(f"bench/results holds {len(fs)} files of {bench} ({', '.join(fs)}): keep the current baseline only")
    for page in pages():
        text = GENERATED.sub("", page.read_text())
        # The data files (.jsonl, .json, .txt); a .md there is a table a make target prints.
        for cited in sorted(set(re.findall(r"bench/results/([\w.-]+\.(?:jsonl|json|txt))\b", text))):
            if cited not in files:
                problems.append(f"{page.relative_to(ROOT).as_posix()} names bench/results/{cited}, which is not there")
    return problems


class _Page(HTMLParser):
    """The ids of one rendered page and the links (href, src) it makes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name"):
                self.ids.add(value)
            elif key in ("href", "src"):
                self.links.append(value)


def check_book(out: Path) -> list[str]:
    """Every relative link of the rendered book under `out` names a file of the book, and its
    fragment an id of that file."""
    out = out.resolve()
    html = sorted(out.rglob("*.html"))
    if not html:
        return [f"{out} holds no rendered page: build the book first (make docs)"]
    parsed: dict[Path, _Page] = {}
    for page in html:
        parser = _Page()
        parser.feed(page.read_text())
        parsed[page] = parser
    problems = []
    for page, parser in parsed.items():
        name = page.relative_to(out).as_posix()
        for link in parser.links:
            # Other sites, and the site root (404.html's way home, which a server maps).
            if re.match(r"[a-z][\w+.-]*:|/", link, flags=re.I):
                continue
            path, _, fragment = unquote(link).partition("#")
            path = path.split("?", 1)[0]
            dest = (page.parent / path).resolve() if path else page
            if dest.is_dir():
                dest = dest / "index.html"
            if not dest.is_relative_to(out) or not dest.exists():
                problems.append(f"book {name} links to {link}: not a file of the book")
            elif fragment and dest.suffix == ".html" and fragment not in parsed[dest].ids:
                problems.append(f"book {name} links to {link}: no id #{fragment} in {dest.relative_to(out)}")
    return problems


def check_readme_length(readme: Path = ROOT / "README.md") -> list[str]:
    lines = len(readme.read_text().splitlines())
    if lines > README_MAX_LINES:
        return [f"{readme.name} has {lines} lines, more than {README_MAX_LINES}: move the detail into the book (docs/)"]
    return []


def main(argv: list[str]) -> int:
    problems = check_summary()
    problems += check_readme_length()
    for page in pages():
        problems += check_links(page)
    problems += check_settings()
    for page in pages():
        problems += check_diary(page)
    problems += check_results()
    book = None
    if argv[:1] == ["--book"] and len(argv) == 2:
        book = Path(argv[1])
        problems += check_book(book)
    elif argv:
        print("usage: check_docs.py [--book DIR]", file=sys.stderr)
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        rendered = f", the rendered book in {book} too" if book else ""
        print(f"docs: {len(summary_pages())} pages in SUMMARY, {len(pages())} files' links and anchors checked{rendered}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The READMEs and the docs book stay true: every measured number the top-level README quotes
(a number with a unit of time, size, rate or ratio) is one that docs/ records; the book's
table of contents (docs/SUMMARY.md) and its pages agree; every relative link and #anchor of
the book and the READMEs resolves, in the Markdown and in the book mdBook renders; the settings
reference lists the keys of the code. The checks are those of scripts/check_docs.py
(`make docs`)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from sparkjob import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_docs  # noqa: E402

# A number, maybe a range (13-26), followed by a unit.
MEASURED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)?)\s?(%|×|x\b|µs|ms|s\b|min\b|MiB/s|GB/s|k/s|/s)")


def prose(markdown: str) -> str:
    """The text without code blocks (commands and their sample output are not measurements)."""
    return re.sub(r"```.*?```", "", markdown, flags=re.S)


def test_every_measured_number_in_the_readme_comes_from_docs():
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    missing = []
    for m in MEASURED.finditer(prose((ROOT / "README.md").read_text())):
        for number in re.split(r"[-–]", m.group(1)):
            if not re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", docs):
                missing.append(m.group(0))
    assert not missing, f"numbers in README.md that docs/ does not record: {missing}"


def test_the_readme_is_a_short_front_door(tmp_path):
    assert check_docs.check_readme_length() == []
    long = tmp_path / "README.md"
    long.write_text("line\n" * (check_docs.README_MAX_LINES + 1))
    [problem] = check_docs.check_readme_length(long)
    assert f"has {check_docs.README_MAX_LINES + 1} lines" in problem


def test_the_summary_lists_every_page_of_the_book_and_only_those():
    assert not check_docs.check_summary()


@pytest.mark.parametrize("page", check_docs.pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page):
    assert not check_docs.check_links(page)


def test_the_settings_reference_is_rendered_from_the_code():
    assert not check_docs.check_settings()


def test_the_checker_finds_a_broken_anchor_and_an_unlisted_page(tmp_path, monkeypatch):
    (tmp_path / "SUMMARY.md").write_text("# Summary\n\n- [A](a.md)\n- [Gone](gone.md)\n")
    (tmp_path / "a.md").write_text("# A\n\n## Some `code` here\n\n[ok](#some-code-here) [bad](#nope) [b](b.md#x)\n")
    (tmp_path / "b.md").write_text("# B\n")
    monkeypatch.setattr(check_docs, "DOCS", tmp_path)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    assert check_docs.check_summary() == ["docs/SUMMARY.md lists gone.md, which does not exist",
                                          "docs/b.md is not in docs/SUMMARY.md"]
    assert check_docs.check_links(tmp_path / "a.md") == [
        "a.md links to #nope: no heading #nope in a.md", "a.md links to b.md#x: no heading #x in b.md"]


def block(markdown: str, lang: str) -> str:
    """The first code block of that language."""
    return re.search(rf"^```{lang}\n(.*?)^```", markdown, flags=re.S | re.M).group(1)


@pytest.mark.parametrize("lang, page", [("java", "jvm-api.md"), ("scala", "spark.md")])
def test_the_readmes_first_jobs_are_the_books_tested_examples(lang, page):
    """The Java example of docs/jvm-api.md is run by ReadmeJavaExampleTest; the Scala one is the
    shape of WarrenSpark.train in docs/spark.md: the README shows them unchanged."""
    readme = block((ROOT / "README.md").read_text(), lang)
    assert readme in (ROOT / "docs" / page).read_text(), f"README.md's {lang} example differs from docs/{page}'s"


def test_the_book_renders_and_its_links_resolve_in_the_html(tmp_path):
    mdbook = ROOT / ".venv" / "bin" / "mdbook"
    assert mdbook.exists(), "mdBook is missing: scripts/setup.sh docs installs it"
    subprocess.run([str(mdbook), "build", "--dest-dir", str(tmp_path), str(ROOT / "docs")],
                   check=True, capture_output=True, timeout=120)
    assert (tmp_path / "index.html").exists() and (tmp_path / "benchmarks.html").exists()
    assert not check_docs.check_book(tmp_path)


def test_the_rendered_book_check_finds_a_link_out_of_the_book_and_a_missing_id(tmp_path):
    (tmp_path / "a.html").write_text('<h2 id="here">H</h2><a href="#here">ok</a> <a href="b.html#gone">x</a>'
                                     ' <a href="../README.html">out</a> <a href="https://example.org/">web</a>')
    (tmp_path / "b.html").write_text('<p id="there">B</p>')
    assert check_docs.check_book(tmp_path) == [
        "book a.html links to b.html#gone: no id #gone in b.html",
        "book a.html links to ../README.html: not a file of the book"]


def test_a_page_of_the_book_may_not_link_out_of_it(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "TESTING.md").write_text("# T\n")
    (docs / "a.md").write_text("# A\n\n[t](../TESTING.md)\n")
    monkeypatch.setattr(check_docs, "DOCS", docs)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    assert check_docs.check_links(docs / "a.md") == [
        "docs/a.md links to ../TESTING.md, outside the book: name the file as `code` instead"]


@pytest.mark.parametrize("page", check_docs.pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_say_what_warren_does_now_without_dates_or_issue_numbers(page):
    assert not check_docs.check_diary(page)


def test_bench_results_keeps_one_baseline_per_benchmark_and_the_files_the_pages_name():
    assert not check_docs.check_results()


def test_the_checkers_find_a_diary_line_and_a_second_baseline(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    results = tmp_path / "bench" / "results"
    docs.mkdir()
    results.mkdir(parents=True)
    (docs / "a.md").write_text(
        "# A\n\nMeasured 2026-11-25, as " + "issue" + " 12 asked; in this " + "round it got faster.\n"
        "The re-link round completes; a round trip.\n"
        "<!-- x:begin -->\n- **Date:** 2026-11-26\n<!-- x:end -->\n"
        "Results: `bench/results/ps_dense.jsonl`, `bench/results/gone.jsonl`.\n")
    for name in ("ps_dense-20261127T045010.jsonl", "ps_dense-20261127T072621.jsonl", "recovery.jsonl"):
        (results / name).write_text("{}\n")
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    monkeypatch.setattr(check_docs, "DOCS", docs)
    monkeypatch.setattr(check_docs, "RESULTS", results)
    monkeypatch.setattr(check_docs, "READMES", [])
    found = check_docs.check_diary(docs / "a.md")
    assert [p.split(": ")[1].split(" (")[0] for p in found] == ["a date", "an issue", "a work round"]
    assert check_docs.check_results() == [
        "bench/results holds 2 files of ps_dense (ps_dense-20261127T045010.jsonl, "
        "ps_dense-20261127T072621.jsonl): keep the current baseline only",
        "docs/a.md names bench/results/gone.jsonl, which is not there",
        "docs/a.md names bench/results/ps_dense.jsonl, which is not there"]


def test_a_local_benchmark_run_is_not_a_second_baseline(tmp_path, monkeypatch):
    """bench/results is git-ignored: a local run's files are not what a clone gets, so only the
    tracked files count."""
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    (results / "ps_dense.jsonl").write_text("{}\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "bench/results/ps_dense.jsonl"], check=True)
    (results / "ps_dense-20261127T072621.jsonl").write_text("{}\n")
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    monkeypatch.setattr(check_docs, "DOCS", tmp_path / "docs")
    monkeypatch.setattr(check_docs, "RESULTS", results)
    monkeypatch.setattr(check_docs, "READMES", [])
    monkeypatch.setattr(check_docs, "pages", lambda: [])
    assert check_docs.results_files() == ["ps_dense.jsonl"]
    assert check_docs.check_results() == []

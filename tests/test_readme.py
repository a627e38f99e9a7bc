"""The READMEs stay true: every measured number the top-level README quotes (a number with a
unit of time, size, rate or ratio) is one that docs/ records, and every relative link of the
READMEs points at a file that exists."""

from __future__ import annotations

import re

import pytest

from sparkjob import ROOT

READMES = [ROOT / "README.md", ROOT / "jvm" / "README.md", ROOT / "notebooks" / "README.md",
           ROOT / "docker" / "README.md"]
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


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files(readme):
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme.read_text()):
        if not re.match(r"\w+:", target):
            assert (readme.parent / target).exists(), f"{readme.name} links to {target}, which does not exist"

"""The README and the guides under docs/ link only to files that exist, and to headings those files have.

The README is the front page and sends readers into docs/; a moved or renamed guide must not leave a
link pointing nowhere.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``_`` and ``-`` dropped, spaces as
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def links(document: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", document.read_text(encoding="utf-8")))


def anchors(document: Path) -> set[str]:
    """Every heading's anchor; a repeated heading's gets ``-1``, ``-2``, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", document.read_text(encoding="utf-8"))):
        base = anchor(heading)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def test_anchors_follow_githubs_rule() -> None:
    assert anchor("Every setting") == "every-setting"
    assert anchor("`tps=auto`: let the consumers set the pace") == "tpsauto-let-the-consumers-set-the-pace"
    assert anchor("`max_mb=N` and `ramp`") == "max_mbn-and-ramp"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_reaches_a_file_and_heading_that_exist(document: Path) -> None:
    broken = []
    for target in links(document):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{document.relative_to(REPO)}: " + "; ".join(broken)


TEST_NAME = re.compile(r"\b(test_[a-z0-9_]+)(\.py)?\b")


def defined_tests() -> tuple[set[str], set[str]]:
    """The suite's test files and the names of its test functions."""
    files = sorted((REPO / "tests").rglob("test_*.py"))
    functions = set()
    for file in files:
        functions |= set(re.findall(r"^\s*(?:async )?def (test_\w+)", file.read_text(), re.MULTILINE))
    return {file.name for file in files}, functions


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_test_a_document_names_is_in_the_suite(document: Path) -> None:
    """docs/rules.md holds each rule to the tests that fail when it is broken: a renamed test must not
    leave the rule held by a name that runs nothing."""
    files, functions = defined_tests()
    missing = sorted(
        name + suffix
        for name, suffix in TEST_NAME.findall(document.read_text(encoding="utf-8"))
        if (name + suffix not in files if suffix else name not in functions)
    )
    assert not missing, f"{document.relative_to(REPO)} names tests the suite does not have: {missing}"

"""The README and the guides under docs/ link only to files that exist, and to headings those files have,
and name only tests the suite has, in the files they say.

The README is the front page and sends readers into docs/; a moved or renamed guide must not leave a
link pointing nowhere, nor a renamed test a rule held by nothing.
"""

from __future__ import annotations

import functools
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


CITATION = re.compile(r"((?:[\w/]+/)?test_\w+\.py)?::(test_\w+)|\b(test_\w+)\.py\b|\b(test_\w+)\b")


@functools.cache
def defined_tests() -> dict[Path, set[str]]:
    """Each test file of the suite, with the names of its test functions."""
    pattern = re.compile(r"^\s*(?:async )?def (test_\w+)", re.MULTILINE)
    return {
        file: set(pattern.findall(file.read_text(encoding="utf-8")))
        for file in sorted((REPO / "tests").rglob("test_*.py"))
    }


def files_named(cited: str) -> list[Path]:
    """The test files a citation names: ``spark_job/test_job.py`` or just ``test_job.py``."""
    return [file for file in defined_tests() if file.as_posix().endswith("/" + cited)]


def unknown_citations(text: str) -> list[str]:
    """The citations in ``text`` of tests the suite does not have. ``a/test_f.py::test_x`` names a test
    of that file, and a ``::test_y`` after it one of the same file; ``test_f.py`` a file (and the file
    of the ``::test_y`` after it); a bare ``test_x`` any test."""
    unknown, files = [], list[Path]()
    every = set().union(*defined_tests().values())
    for match in CITATION.finditer(text):
        cited_file, in_file, file_only, bare = match.groups()
        if in_file:
            if cited_file:
                files = files_named(cited_file)
                if not files:
                    unknown.append(cited_file)
                    continue
            if files and not any(in_file in defined_tests()[file] for file in files):
                unknown.append(f"{cited_file or '…'}::{in_file} (not in {[f.name for f in files]})")
            elif not files and in_file not in every:
                unknown.append(f"::{in_file}")
        elif file_only:  # a ``::test_y`` after it is one of this file's
            files = files_named(f"{file_only}.py")
            if not files:
                unknown.append(f"{file_only}.py")
        elif bare not in every:
            unknown.append(bare)
    return unknown


def test_a_citation_names_a_test_of_the_file_it_follows() -> None:
    text = (
        "`spark_job/test_job.py::test_broker_outage_fails_the_run_without_overcounting`, "
        "`::test_tally_accounts_for_every_record_found`; `test_pacing.py`; `test_no_such_test`"
    )
    assert [entry.split(" ")[0] for entry in unknown_citations(text)] == [
        "…::test_tally_accounts_for_every_record_found",
        "test_no_such_test",
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_test_a_document_names_is_in_the_suite(document: Path) -> None:
    """docs/rules.md holds each rule to the tests that fail when it is broken: a renamed or misplaced
    test must not leave the rule held by a name that runs nothing."""
    unknown = unknown_citations(document.read_text(encoding="utf-8"))
    assert not unknown, f"{document.relative_to(REPO)} names tests the suite does not have: {unknown}"

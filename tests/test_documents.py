"""The README and the guides under docs/ link only to files that exist, and to headings those files have.

The README is the front page and sends readers into docs/; a moved or renamed guide must not leave a
link pointing nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def links(document: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", document.read_text(encoding="utf-8")))


def anchors(document: Path) -> set[str]:
    return {anchor(h) for h in HEADING.findall(FENCE.sub("", document.read_text(encoding="utf-8")))}


def test_anchors_follow_githubs_rule() -> None:
    assert anchor("Every setting") == "every-setting"
    assert anchor("`tps=auto`: let the consumers set the pace") == "tpsauto-let-the-consumers-set-the-pace"


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

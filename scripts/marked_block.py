"""A generated block of Markdown between two markers, rewritten in place or checked for staleness.

Shared by scripts/command_help.py (the command list in docs/usage.md) and scripts/settings_table.py (the
guide's settings table): each renders its block, this swaps it in or says it is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MarkedBlock:
    start: str
    end: str
    what: str  # e.g. "the command list", for the stale message
    script: str  # the script that regenerates it

    def replace(self, text: str, block: str) -> str:
        """`text` with the marked block swapped for `block`; both markers must be there, once each."""
        if text.count(self.start) != 1 or text.count(self.end) != 1:
            raise ValueError(f"expected one '{self.start}' and one '{self.end}' marker")
        head, rest = text.split(self.start)
        _, tail = rest.split(self.end)
        return head + block + tail

    def main(self, argv: list[str] | None, *, description: str, path: Path, render: Callable[[], str]) -> int:
        """`--check`: exit 1 when the checked-in block differs from `render()`; else rewrite it."""
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
        parser.add_argument("--path", type=Path, default=path, help="the Markdown file holding the markers")
        args = parser.parse_args(argv)
        current = args.path.read_text(encoding="utf-8")
        wanted = self.replace(current, render())
        if args.check:
            if wanted != current:
                print(f"{args.path}: {self.what} is stale; run {self.script}", file=sys.stderr)
                return 1
            return 0
        if wanted != current:
            args.path.write_text(wanted, encoding="utf-8")
        return 0

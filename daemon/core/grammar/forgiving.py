"""What people type for a window, read the one way it can be meant, or refused pointing at the spot.

Accepted because each can only mean one thing: a Unicode dash (en, em, figure, minus) or the
ellipsis (what a phone makes of ``...``) between two ends, spaced ranges (``A .. B``, ``A to B``, a
spaced dash) and ``last 6h``. Refused, with the corrected window when exactly one reading exists:
``A...B`` (three dots), ``A-B`` with a plain hyphen, two ends with nothing between, a bare ``6h``.
A dash or ellipsis anywhere else is named as the character it is. Nothing here changes a meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from daemon.core.grammar.values import GrammarError, describe
from daemon.core.quantities import InvalidValue, parse_duration
from daemon.core.windows import is_point

# figure dash, en dash, em dash, horizontal bar, minus sign, ellipsis: what phones and word
# processors make of '-', '--' and '...'
RANGE_MARKS = "\u2012\u2013\u2014\u2015\u2212\u2026"
_MARK_RUN = re.compile(f"[{RANGE_MARKS}]+")
_SEPARATORS = frozenset({"..", "-", "to", *RANGE_MARKS})  # between two ends, spaced
_OPEN_END = re.compile(rf"(.+?)(?:\.\.|[{RANGE_MARKS}])")  # "A.." or "A" + a dash, then the end
_OPEN_START = re.compile(rf"(?:\.\.|[{RANGE_MARKS}])(.+)")  # "..B" or a dash + "B", after the start
_HYPHENATED = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt][0-9:.]+)?)-([0-9]{4}-[0-9]{2}-[0-9]{2}.*)")


@dataclass(frozen=True)
class WindowText:
    """The window as ``parse_window`` reads it, the tokens it took, and the word to blame for it."""

    text: str
    used: int
    blame: str


def _single(token: str) -> str:
    """``A\u2013B`` or ``A\u2026B`` -> ``A..B`` when both sides are window ends; anything else unchanged."""
    runs = _MARK_RUN.findall(token)
    if len(runs) == 1 and len(runs[0]) == 1:
        left, _, right = token.partition(runs[0])
        if is_point(left) and is_point(right):
            return f"{left}..{right}"
    return token


def window_text(tokens: list[str], usage: str) -> WindowText:
    """The window at the head of ``tokens`` (those after the source), joined and normalised."""
    first = tokens[0]
    if first.lower() == "last":
        if len(tokens) < 2 or "=" in tokens[1]:
            raise GrammarError(
                "give the duration after last (e.g. last 6h or last=6h)", token=first, usage=usage
            )
        return WindowText(f"last={tokens[1]}", 2, tokens[1])
    if len(tokens) >= 3 and tokens[1].lower() in _SEPARATORS and is_point(first) and is_point(tokens[2]):
        return WindowText(f"{first}..{tokens[2]}", 3, " ".join(tokens[:3]))
    if len(tokens) >= 2:
        head, tail = _OPEN_END.fullmatch(first), _OPEN_START.fullmatch(tokens[1])
        if head and is_point(head[1]) and is_point(tokens[1]):
            return WindowText(f"{head[1]}..{tokens[1]}", 2, " ".join(tokens[:2]))
        if tail and is_point(first) and is_point(tail[1]):
            return WindowText(f"{first}..{tail[1]}", 2, " ".join(tokens[:2]))
    text = _single(first)
    if (mark := _MARK_RUN.search(text)) is not None:
        char = mark[0][0]
        raise GrammarError(
            f"{describe(char)} is not between two days or times: a range is written start..end",
            token=first,
            usage=usage,
        )
    return WindowText(text, 1, first)


def stray_mark(token: str) -> str | None:
    """Why a token made only of dashes or ellipses is refused (outside any range), else None."""
    if token and _MARK_RUN.fullmatch(token):
        return f"{describe(token[0])} outside a range: a range is written start..end, right after the source"
    return None


def corrected_window(tokens: list[str]) -> tuple[str, int] | None:
    """The one window a refused head of ``tokens`` can mean, and the tokens it replaces; else None."""
    first = tokens[0]
    left, dots, right = first.partition("...")
    if dots and is_point(left) and is_point(right):
        return f"{left}..{right}", 1
    if (hyphenated := _HYPHENATED.fullmatch(first)) and is_point(hyphenated[1]) and is_point(hyphenated[2]):
        return f"{hyphenated[1]}..{hyphenated[2]}", 1
    if len(tokens) >= 2 and is_point(first) and is_point(tokens[1]):
        return f"{first}..{tokens[1]}", 2
    duration = first[4:] if first[:4].lower() == "last" and first[4:5] not in ("", "=") else first
    try:
        parse_duration(duration, minimum=1)
    except InvalidValue:
        return None
    return f"last={duration}", 1

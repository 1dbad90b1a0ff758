"""Text to tokens, as a POSIX shell splits it, after undoing what Slack does to typed text.

Slack turns quotes into "smart" ones and may send exotic spaces; both are mapped back first, and an
unbalanced quote is reported as the word the user typed, not as shlex's bare "No closing quotation".

A filter (``where=``) is the one option written with spaces and quotes of its own
(``where=merchant in ('m-1', "m-2") and amount > 100``), so it is cut out of the text first, as typed:
it runs to the end, or to the next option of the command (a space, then ``name=`` or ``lag<``)
outside its quotes, and becomes one token. A filter quoted whole (``where="amount > 1"``) loses
that outer pair.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable

from daemon.core.grammar.values import SMART_QUOTES, GrammarError, describe

WHERE = "where="
_NEXT_OPTION = re.compile(r"\s+(?:([A-Za-z_][A-Za-z0-9_-]*)=(?!=)|(lag)<)", re.IGNORECASE)


def _unbalanced(text: str) -> GrammarError:
    """shlex says *that* quoting failed; find *where*, as the raw word the user typed."""
    quote: str | None = None
    word_start: int | None = None
    opened_in = 0
    index = 0
    while index < len(text):
        char = text[index]
        if quote is None:
            if char == " ":
                word_start = None
            else:
                word_start = index if word_start is None else word_start
                if char == "\\":
                    index += 1
                elif char in "\"'":
                    quote, opened_in = char, word_start
        elif char == quote:
            quote = None
        elif char == "\\" and quote == '"':
            index += 1
        index += 1
    if quote is not None:
        kind = "double" if quote == '"' else "single"
        return GrammarError(f"unbalanced {kind} quote ({quote})", token=text[opened_in:].strip(" "))
    return GrammarError("ends with a lone backslash", token=text[word_start or 0 :].strip(" "))


def _where_start(text: str) -> int | None:
    """Where a word ``where=...`` starts outside shell quotes; None when there is none."""
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"':
                index += 1
        elif char in "\"'":
            quote = char
        elif char == "\\":
            index += 1
        elif (index == 0 or text[index - 1] == " ") and text[index : index + len(WHERE)].lower() == WHERE:
            return index
        index += 1
    return None


def _where_end(text: str, start: int, options: frozenset[str]) -> int:
    """The end of the filter starting at ``start``: the next option outside its quotes, or the end."""
    quote: str | None = None
    index = start
    while index < len(text):
        char = text[index]
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == " " and (found := _NEXT_OPTION.match(text, index)) is not None:
            name = (found.group(1) or found.group(2)).lower().replace("-", "_")
            if name in options:
                return index
        index += 1
    return len(text)


def _unquoted(value: str) -> str:
    """A filter quoted whole loses that pair: ``"amount > 1"`` is ``amount > 1``."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" and value[0] not in value[1:-1]:
        return value[1:-1]
    return value


def tokenize(text: str, options: Iterable[str] = ()) -> list[str]:
    """Split like a POSIX shell after undoing Slack's smart quotes and exotic spaces; a ``where=``
    filter is one token, up to the next of ``options`` (the command's option names)."""
    plain = "".join(" " if char.isspace() else char for char in text.translate(SMART_QUOTES))
    start = _where_start(plain)
    if start is None:
        return _split(plain)
    end = _where_end(plain, start + len(WHERE), frozenset(options))
    value = _unquoted(plain[start + len(WHERE) : end].strip(" "))
    written = plain[start : start + len(WHERE)]
    return [*_split(plain[:start]), written + value, *_split(plain[end:])]


def _split(plain: str) -> list[str]:
    try:
        tokens = shlex.split(plain, posix=True)
    except ValueError:
        raise _unbalanced(plain) from None
    for token in tokens:
        if token == "":
            raise GrammarError("empty argument (\"\" or '')", token=token)
        for char in token:
            if unicodedata.category(char).startswith("C"):
                raise GrammarError(
                    f"contains an invisible, control or unknown character {describe(char)}", token=token
                )
    return tokens

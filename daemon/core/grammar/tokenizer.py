"""Text to tokens, as a POSIX shell splits it, after undoing what Slack does to typed text.

Slack turns quotes into "smart" ones and may send exotic spaces; both are mapped back first, and an
unbalanced quote is reported as the word the user typed, not as shlex's bare "No closing quotation".
"""

from __future__ import annotations

import shlex
import unicodedata

from daemon.core.grammar.values import SMART_QUOTES, GrammarError, describe


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


def tokenize(text: str) -> list[str]:
    """Split like a POSIX shell after undoing Slack's smart quotes and exotic spaces."""
    plain = "".join(" " if char.isspace() else char for char in text.translate(SMART_QUOTES))
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

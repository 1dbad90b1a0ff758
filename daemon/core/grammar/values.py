"""The values inside commands (names, limits, headers) and the error that blames a token.

Both the parser and the commands' own ``__post_init__`` check values here, so a command built in
code is held to exactly the rules a typed one is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

from daemon.core.errors import BadRequest
from daemon.core.grammar.help import GENERAL_USAGE
from daemon.core.quantities import InvalidValue

# Ceilings: the most any platform may be configured to allow (``Limits`` holds this platform's own).
MAX_TPS = 10_000_000
MAX_WORKERS = 512
MAX_HEADERS = 20
# Header bytes per record are paid on every event replayed, and a broker refuses a record over its
# max.message.bytes (1 MiB by default): custom headers are meant for routing tags, not payloads.
MAX_HEADER_NAME_BYTES = 128
MAX_HEADER_VALUE_BYTES = 1_024
MAX_HEADERS_BYTES = 4_096  # names and values of all custom headers together
MAX_IDLE_DAYS = 3_660
RESERVED = frozenset(
    {"plan", "status", "list", "cancel", "help", "schedule", "pipelines", "pipeline", "pause", "resume"}
    | {"unschedule", "reconcile", "repair", "redrive", "chart", "lag", "rewind", "tps", "sources", "open"}
)

_SOURCE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(?:\.[A-Za-z_][A-Za-z0-9_]{0,127})*")
_HEADER_KEY = re.compile(r"[A-Za-z0-9._-]+")
# Slack "smart" punctuation the user never meant, mapped back to what shlex understands.
SMART_QUOTES = str.maketrans(
    {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"'}
    | {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'"}
)


class GrammarError(BadRequest):
    """Text that is not a valid command: the token at fault, why, and how the command is written."""

    def __init__(
        self,
        reason: str,
        *,
        token: str | None = None,
        usage: str = GENERAL_USAGE,
        suggestion: str | None = None,
    ) -> None:
        if suggestion is not None:
            reason = f"{reason} (did you mean `{suggestion}`?)"
        where = f"`{token}`: " if token is not None else ""
        super().__init__(f"{where}{reason}\nUsage: {usage}")
        self.token, self.reason, self.usage, self.suggestion = token, reason, usage, suggestion


@contextmanager
def blaming(token: str | None, usage: str) -> Iterator[None]:
    """Turn a value error into a GrammarError that names the token it came from."""
    try:
        yield
    except InvalidValue as exc:
        raise GrammarError(exc.reason, token=token, usage=usage) from None


def describe(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed character')})"


def check_source(name: str) -> None:
    if name in RESERVED:
        raise InvalidValue(name, f"'{name}' is a command, not a source")
    if not _SOURCE.fullmatch(name):
        if _SOURCE.fullmatch(name.lower()):
            raise InvalidValue(name, f"source names are lowercase (did you mean `{name.lower()}`?)")
        raise InvalidValue(name, "not a source name (a lowercase letter, then letters, digits, '-' or '_')")


def check_range(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidValue(None, f"{name} must be between {low} and {high}, got {value}")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InvalidValue(None, f"{name} must be one of {', '.join(allowed)}, got '{value}'")


def check_column(name: str) -> None:
    if not _COLUMN.fullmatch(name):
        raise InvalidValue(name, f"'{name}' is not a column name")


SNAPSHOT = re.compile(r"0|[1-9]\d{0,19}")  # an Iceberg snapshot id or a Delta version, as it is written


def check_snapshot(value: str) -> None:
    if not SNAPSHOT.fullmatch(value):
        raise InvalidValue(
            value,
            f"'{value}' is not a table snapshot (an Iceberg snapshot id or a Delta version: digits, "
            "no leading zero)",
        )


def check_id(value: str, pattern: re.Pattern[str], kind: str) -> None:
    if not pattern.fullmatch(value):
        raise InvalidValue(value, f"'{value}' is not a {kind}")


def _bad_character(text: str) -> str | None:
    """The first character a person cannot see or that a round trip would not preserve."""
    for char in text:
        if unicodedata.category(char).startswith("C") or (char.isspace() and char != " "):
            return char
        if char != char.translate(SMART_QUOTES):
            return char
    return None


def _check_header(key: str, value: str) -> None:
    if len(key.encode()) > MAX_HEADER_NAME_BYTES:
        raise InvalidValue(None, f"header name '{key[:40]}…' is longer than {MAX_HEADER_NAME_BYTES} bytes")
    if not _HEADER_KEY.fullmatch(key):
        raise InvalidValue(None, f"header name '{key}' may only use letters, digits, '.', '_' and '-'")
    if len(value.encode()) > MAX_HEADER_VALUE_BYTES:
        raise InvalidValue(
            None, f"header '{key}' value is {len(value.encode()):,} bytes; at most {MAX_HEADER_VALUE_BYTES:,}"
        )
    if key.lower().startswith("replay-"):
        raise InvalidValue(None, f"header name '{key}' is reserved: replay-* headers record provenance")
    if not value:
        raise InvalidValue(None, f"header '{key}' has an empty value")
    if "," in value:
        raise InvalidValue(None, f"header '{key}' has a comma in its value")
    if value != value.strip(" "):
        raise InvalidValue(None, f"header '{key}' value starts or ends with a space")
    if (char := _bad_character(value)) is not None:
        raise InvalidValue(None, f"header '{key}' value contains {describe(char)}")


def check_headers(headers: tuple[tuple[str, str], ...]) -> None:
    """Validate already-split headers (what ``parse_headers`` returns, or a caller builds)."""
    if len(headers) > MAX_HEADERS:
        raise InvalidValue(None, f"too many headers ({len(headers)}; at most {MAX_HEADERS})")
    seen: set[str] = set()
    for key, value in headers:
        _check_header(key, value)
        if key in seen:
            raise InvalidValue(None, f"header '{key}' given twice")
        seen.add(key)
    total = sum(len(key.encode()) + len(value.encode()) for key, value in headers)
    if total > MAX_HEADERS_BYTES:
        raise InvalidValue(
            None, f"headers add {total:,} bytes to every record; at most {MAX_HEADERS_BYTES:,} in all"
        )


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """``k:v,k2:v2`` -> pairs in the order given; ``replay-*`` names are kept for provenance."""
    if not text:
        raise InvalidValue(text, "no headers given (write key:value,key2:value2)")
    pairs: list[tuple[str, str]] = []
    for entry in (part.strip(" ") for part in text.split(",")):
        if not entry:
            raise InvalidValue(text, "empty header entry (a stray comma?)")
        key, colon, value = entry.partition(":")
        if not colon:
            raise InvalidValue(text, f"header '{entry}' needs a value (write key:value)")
        pairs.append((key.strip(" "), value.strip(" ")))
    try:
        check_headers(tuple(pairs))
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None
    return tuple(pairs)


def render_headers(headers: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{key}:{value}" for key, value in headers)

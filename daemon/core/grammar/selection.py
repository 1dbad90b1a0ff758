"""``keys=``, ``types=`` and ``fields=``: the short ways to say which events and which of their fields.

``keys=k1,k2`` keeps the events of those entities (the source's key column), ``types=a,b`` the events
of those types (the source's ``type_column``), ``fields=a,b,c`` puts only those columns in each JSON
value. Each is a comma-separated list, each item once, in the order given; an item with a space of
its own is quoted whole (``keys="a b,c"``) by the shell rules the tokenizer applies to every option,
and one with a comma is written in ``where=`` instead. Keys and types are at most ``MAX_LISTED`` (a
longer list belongs in a ``where=`` over a column, or in a table). Rendered as written, so
``parse(render(c)) == c``.
"""

from __future__ import annotations

import re

from daemon.core.quantities import InvalidValue

MAX_LISTED = 1_000  # keys= and types=: as many values as a filter's IN list
MAX_ITEM_CHARS = 256
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_listed(name: str, items: tuple[str, ...], *, columns: bool = False) -> None:
    """Validate a list as ``parse_listed`` returns it (or a caller builds it)."""
    if not isinstance(items, tuple) or not all(isinstance(item, str) for item in items):
        raise InvalidValue(None, f"{name} must be a tuple of text")
    if not items:
        raise InvalidValue(None, f"{name}= lists at least one item")
    if len(items) > MAX_LISTED:
        raise InvalidValue(
            None, f"{name}= lists at most {MAX_LISTED:,} items ({len(items):,} given); use where= for more"
        )
    seen: set[str] = set()
    for item in items:
        if item == "" or item != item.strip(" "):
            raise InvalidValue(None, f"{name}= has an empty item or one with spaces around it: '{item}'")
        if any(not char.isprintable() for char in item):
            raise InvalidValue(None, f"{name}= item '{item}' holds an invisible or control character")
        if len(item) > MAX_ITEM_CHARS:
            raise InvalidValue(None, f"{name}= items are at most {MAX_ITEM_CHARS} characters")
        if columns and not _FIELD.fullmatch(item):
            raise InvalidValue(None, f"'{item}' is not a column name (letters, digits and '_')")
        if item in seen:
            raise InvalidValue(None, f"{name}= lists '{item}' twice")
        seen.add(item)
    if name == "keys" and items[0].startswith("@"):
        # keys=@x names a file of keys, so a list cannot open with a key that begins with @
        raise InvalidValue(
            None,
            f"keys=@… names a file of keys; select the key '{items[0]}' with where= or list it second",
        )


def parse_listed(name: str, text: str, *, columns: bool = False) -> tuple[str, ...]:
    """``a,b`` -> ("a", "b"), in the order given."""
    if not text:
        raise InvalidValue(text, f"nothing listed (write {name}=a,b)")
    items = tuple(text.split(","))
    if "" in items:
        raise InvalidValue(text, "empty entry (a stray comma?)")
    try:
        check_listed(name, items, columns=columns)
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None
    return items


MAX_KEY_FILE_CHARS = 1_024  # the length of a key list's path or URI


def parse_key_file(text: str) -> str:
    """``keys=@<path or URI>``: a file of keys, one per line (or a Parquet file's key column), for
    more than a list in the command can hold; the daemon reads and pins it when it plans."""
    path = text.removeprefix("@")
    if not path:
        raise InvalidValue(text, "no file after @ (write keys=@s3://bucket/keys.txt or keys=@/path/keys.txt)")
    check_key_file(path)
    return path


def check_key_file(path: str) -> None:
    if not isinstance(path, str) or not path or len(path) > MAX_KEY_FILE_CHARS:
        raise InvalidValue(None, f"keys=@ names a file of at most {MAX_KEY_FILE_CHARS} characters")
    if any(not char.isprintable() for char in path):
        raise InvalidValue(None, "keys=@ names a file with an invisible or control character")


def render_listed(items: tuple[str, ...]) -> str:
    return ",".join(items)

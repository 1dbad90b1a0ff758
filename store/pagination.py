"""Opaque keyset-pagination cursors: (created_at, id) of the last row shown."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from daemon.core.errors import BadRequest

_Row = TypeVar("_Row")


def encode_cursor(created_at: datetime, row_id: str) -> str:
    raw = f"{created_at.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Inverse of ``encode_cursor``; BadRequest for anything it did not produce."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, row_id = raw.split("|", 1)
        created_at = datetime.fromisoformat(at)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"invalid cursor {cursor!r}") from exc
    if created_at.tzinfo is None:
        raise BadRequest(f"invalid cursor {cursor!r}")
    return created_at, row_id


def page_oldest_first(
    rows: Sequence[_Row], key: Callable[[_Row], tuple[datetime, str]], *, limit: int, cursor: str | None
) -> tuple[list[_Row], str | None]:
    """A page of ``rows`` (already oldest first by ``key``): those after ``cursor``, at most ``limit``,
    and the cursor of the next page (None: this is the last). For listings small enough to read whole
    (pipelines), so every list the API answers pages the same way."""
    after = decode_cursor(cursor) if cursor is not None else None
    remaining = [row for row in rows if after is None or key(row) > after]
    shown = remaining[:limit]
    more = len(remaining) > limit
    return shown, (encode_cursor(*key(shown[-1])) if more and shown else None)

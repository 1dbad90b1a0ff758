"""Opaque keyset-pagination cursors for "newest first" listings: (created_at, id) of the last row."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime

from daemon.core.errors import BadRequest


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

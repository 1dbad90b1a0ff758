"""Watermark values as stored text, and the range a pipeline run publishes.

A watermark column is a timestamp (the usual CDC `updated_at`) or an integer (a sequence number).
The committed value is stored as text — ISO 8601 UTC for timestamps, decimal for integers — and read
back with the type of the table's current maximum, so comparisons are between values, never strings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import overload

from daemon.core.errors import BadRequest

Value = datetime | int


def encode(value: Value) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise BadRequest(f"a watermark column must hold timestamps or integers, not {type(value).__name__}")


@overload
def decode(text: str, like: datetime) -> datetime: ...
@overload
def decode(text: str, like: int) -> int: ...
def decode(text: str, like: Value) -> Value:
    """Read stored text back as the same type as `like` (the table's current maximum)."""
    if isinstance(like, datetime):
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(text)


def has_new_data(high: Value | None, committed: str | None) -> bool:
    """Is anything in the table newer than the committed watermark?"""
    if high is None:
        return False
    if committed is None:
        return True
    if isinstance(high, datetime):  # two branches so each comparison is between values of one type
        return high > decode(committed, high)
    return high > decode(committed, high)


def low_bound(committed: str | None, lookback_seconds: int, like: Value) -> str | None:
    """The exclusive lower bound of the next run: the committed mark, moved back by the lookback.

    Rows that arrive late, stamped before the committed mark but within the lookback, are sent by the
    next run (as overlap: the rows just before them are sent again). Rows later than the lookback are
    not: their watermark value is already behind every future run's range.
    """
    if committed is None:
        return None
    value = decode(committed, like)
    if lookback_seconds == 0:
        return encode(value)
    if not isinstance(value, datetime):
        raise BadRequest("lookback needs a timestamp watermark column")
    return encode(value - timedelta(seconds=lookback_seconds))

"""Column types that behave the same on SQLite and PostgreSQL.

SQLite has no timezone-aware timestamp, so ``UtcDateTime`` stores naive UTC there and
re-attaches UTC on the way out; PostgreSQL gets ``timestamptz``. Either way callers only
ever see aware UTC datetimes, and naive ones are refused instead of being guessed at.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from daemon.core.run_options import PipelineOptions, RunOptions

Options = TypeVar("Options", RunOptions, PipelineOptions)

# JSONB on PostgreSQL (indexable, compact); JSON text elsewhere.
JsonType: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every dialect; naive datetimes are an error."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: attach a timezone (UTC)")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            # Fixed-width naive UTC text sorts chronologically, which keyset pagination relies on.
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    """The default clock: aware UTC now."""
    return datetime.now(UTC)


def require_aware(name: str, value: datetime | None) -> datetime | None:
    """Refuse naive datetimes where they are assigned, long before a flush would."""
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
    return value


class OptionsType(TypeDecorator[Options]):
    """Typed options (``daemon.core.run_options``) in a JSON column: encoded on the way in, decoded and
    validated on the way out, so no reader ever sees the raw document."""

    impl = JsonType
    cache_ok = True

    def __init__(self, options: type[Options]) -> None:
        super().__init__()
        self.options: type[Options] = options

    def process_bind_param(self, value: Options | None, dialect: Dialect) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, self.options):
            raise TypeError(f"expected {self.options.__name__}, got {type(value).__name__}")
        return value.encode()

    def process_result_value(self, value: Any, dialect: Dialect) -> Options | None:
        if value is None:
            return None
        return self.options.decode(value)

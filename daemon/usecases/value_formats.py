"""What a source's records carry as their value: the event as JSON, or a bronze table's raw bytes.

``json`` (the default) publishes ``value_columns`` as JSON, by default every column but the
partition column, so the payload is the event and not the storage layout. ``raw`` replays a
bronze table (the streaming-ETL backup of a topic: key bytes, value bytes, headers, timestamp)
byte for byte. The catalog's ``Source`` holds these fields; the rules between them live here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ValueFormat = Literal["json", "raw"]
RAW_KEY_COLUMN = "key"  # a raw source's key_column when the catalog names none


class RawColumns(BaseModel):
    """A bronze table's columns; the Kafka key is the source's ``key_column`` (default ``key``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value_column: str = Field(default="value", min_length=1)  # the value bytes, published untouched
    # array<struct<name: string, value: binary>>; null when the table keeps no headers
    headers_column: str | None = Field(default="headers", min_length=1)
    timestamp_column: str = Field(default="timestamp", min_length=1)  # the record's original timestamp

    @model_validator(mode="after")
    def _distinct(self) -> RawColumns:
        named = [self.value_column, self.headers_column, self.timestamp_column]
        named = [name for name in named if name is not None]
        if len(set(named)) != len(named):
            raise ValueError("value_column, headers_column and timestamp_column must be different columns")
        return self


def with_raw_defaults(body: Any) -> Any:
    """A raw source's defaults, filled in before validation: the ``raw`` columns, ``key`` as the key
    column, and the record's original timestamp as its event time (what windows and ordering use)."""
    if not isinstance(body, Mapping) or body.get("value_format") != "raw":
        return body
    filled = dict(body)
    raw = filled["raw"] = filled.get("raw") or {}
    filled.setdefault("key_column", RAW_KEY_COLUMN)
    if isinstance(raw, Mapping):
        filled.setdefault("event_time_column", raw.get("timestamp_column") or "timestamp")
    return filled


def check_value_format(value_format: ValueFormat, known: Mapping[str, Any]) -> ValueFormat:
    """``known``: the fields validated before ``value_format`` (PII columns come earlier)."""
    if value_format == "raw" and known.get("encrypted_columns"):
        raise ValueError("a raw value is published untouched: encrypted_columns needs value_format json")
    return value_format


def check_value_columns(columns: list[str] | None, known: Mapping[str, Any]) -> list[str] | None:
    if columns is None:
        return None
    if known.get("value_format", "json") != "json":
        raise ValueError("only for value_format json (a raw value is the stored bytes)")
    for name in columns:
        if not name.strip():
            raise ValueError("column names must not be empty")
    if len(set(columns)) != len(columns):
        raise ValueError("names a column twice")
    return columns


def check_raw(raw: RawColumns | None, known: Mapping[str, Any]) -> RawColumns | None:
    if raw is not None and known.get("value_format", "json") != "raw":
        raise ValueError("only for value_format raw")
    return raw

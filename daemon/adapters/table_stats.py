"""Cheap facts about a lake table, read by the daemon without a Spark job.

A plan (rows in a window, ETA) must answer in Slack's time budget, so it reads Parquet footers with
partition filters instead of scanning: for a day window only the window's partition directories are
opened and their row counts come from metadata.
"""

from __future__ import annotations

from datetime import date, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from daemon.core.errors import BadRequest, Unavailable


def _dataset(path: str) -> ds.Dataset:
    try:
        return ds.dataset(path, format="parquet", partitioning="hive")
    except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
        raise Unavailable(f"cannot open the source table at {path}: {exc}") from exc


def _day_filter(partition_column: str, days: list[date]) -> ds.Expression:
    return ds.field(partition_column).isin([d.isoformat() for d in days])


def column_names(path: str) -> list[str]:
    """The table's columns (partition columns included)."""
    return list(_dataset(path).schema.names)


def count_window_rows(
    path: str,
    *,
    partition_column: str,
    days: list[date],
    time_column: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> int:
    """Rows in the given partition days, optionally narrowed to `start <= time_column < end`."""
    dataset = _dataset(path)
    if partition_column not in dataset.schema.names:
        raise BadRequest(f"the table has no partition column '{partition_column}'")
    condition = _day_filter(partition_column, days)
    if time_column is not None:
        if time_column not in dataset.schema.names:
            raise BadRequest(f"the table has no column '{time_column}'")
        if start is not None:
            condition &= ds.field(time_column) >= pa.scalar(start, type=pa.timestamp("us", tz="UTC"))
        if end is not None:
            condition &= ds.field(time_column) < pa.scalar(end, type=pa.timestamp("us", tz="UTC"))
    return int(dataset.count_rows(filter=condition))


def max_value(path: str, column: str, *, after: object | None = None) -> object | None:
    """The column's current maximum (a pipeline run's high mark), or None for an empty table.

    `after` prunes to rows newer than a committed watermark so the read stays small as the table grows.
    """
    dataset = _dataset(path)
    if column not in dataset.schema.names:
        raise BadRequest(f"the table has no column '{column}'")
    condition = None if after is None else ds.field(column) > pa.scalar(after)
    table = dataset.to_table(columns=[column], filter=condition)
    if table.num_rows == 0:
        return None
    return pc.max(table.column(column)).as_py()

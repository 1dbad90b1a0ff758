"""`ParquetTableStats`: cheap facts about a lake table, read by the daemon without a Spark job.

A plan (rows in a window, ETA) must answer in Slack's time budget, so it reads Parquet footers with
partition filters instead of scanning: for a day window only the window's partition directories are
opened and their row counts come from metadata.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from daemon.core.errors import BadRequest, Unavailable
from daemon.core.watermarks import Value
from daemon.usecases.ports import TableStats


def _dataset(path: str) -> ds.Dataset:
    try:
        return ds.dataset(path, format="parquet", partitioning="hive")
    except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
        raise Unavailable(f"cannot open the source table at {path}: {exc}") from exc


def _day_filter(partition_column: str, days: list[date]) -> ds.Expression:
    return ds.field(partition_column).isin([d.isoformat() for d in days])


class ParquetTableStats(TableStats):
    """Hive-partitioned Parquet at a path (local or s3://), read with pyarrow."""

    def column_names(self, path: str) -> list[str]:
        return list(_dataset(path).schema.names)

    def count_window_rows(
        self,
        path: str,
        *,
        partition_column: str,
        days: list[date],
        time_column: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> int:
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

    def max_value(self, path: str, column: str) -> Value | None:
        """The column's maximum from each file's Parquet statistics (footers only); a file or row
        group without usable statistics is read for that column alone. Memory stays flat as the
        table grows: a pipeline slot never loads the whole watermark column."""
        dataset = _dataset(path)
        if column not in dataset.schema.names:
            raise BadRequest(f"the table has no column '{column}'")
        highs = [_fragment_max(fragment, column) for fragment in dataset.get_fragments()]
        known = [high for high in highs if high is not None]
        if not known:
            return None
        high: object = max(known)  # type: ignore[type-var]  # one column: all ints or all datetimes
        if isinstance(high, bool) or not isinstance(high, int | datetime):
            raise BadRequest(
                f"a watermark column must hold timestamps or integers, not {type(high).__name__}"
            )
        return high


def _fragment_max(fragment: ds.Fragment, column: str) -> object | None:
    """One file's maximum of `column`: from its row groups' statistics, else by reading that column."""
    if isinstance(fragment, ds.ParquetFileFragment):
        metadata = fragment.metadata
        names = list(metadata.schema.names)
        if column in names:
            index = names.index(column)
            highs: list[object] = []
            for group in range(metadata.num_row_groups):
                chunk = metadata.row_group(group).column(index)
                stats = chunk.statistics
                if stats is not None and stats.has_min_max:
                    highs.append(_utc(stats.max))
                elif stats is None or stats.null_count != chunk.num_values:  # unknown, not all-null
                    break
            else:
                return max(highs) if highs else None  # type: ignore[type-var]  # one type per column
    values = fragment.to_table(columns=[column]).column(column)
    return _utc(pc.max(values).as_py()) if len(values) else None


def _utc(value: object) -> object:
    """Statistics give naive datetimes for some writers; the watermark is always compared in UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value

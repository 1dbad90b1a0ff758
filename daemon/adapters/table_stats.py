"""`ParquetTableStats`: cheap facts about a lake table, read by the daemon without a Spark job.

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
        dataset = _dataset(path)
        if column not in dataset.schema.names:
            raise BadRequest(f"the table has no column '{column}'")
        table = dataset.to_table(columns=[column])
        if table.num_rows == 0:
            return None
        high: object = pc.max(table.column(column)).as_py()
        if isinstance(high, bool) or not isinstance(high, int | datetime | None):
            raise BadRequest(
                f"a watermark column must hold timestamps or integers, not {type(high).__name__}"
            )
        return high

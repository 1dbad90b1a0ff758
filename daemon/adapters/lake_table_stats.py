"""`LakeTableStats`: the `TableStats` port for every table format the catalog accepts.

Each format has its own reader (Parquet footers, the Delta log, Iceberg metadata); this class only
picks one by the table's `format`, so the use cases never branch on formats.
"""

from __future__ import annotations

from daemon.adapters.delta_table_stats import DeltaTableStats
from daemon.adapters.iceberg_table_stats import IcebergTableStats
from daemon.adapters.table_stats import ParquetTableStats
from daemon.core.errors import BadRequest
from daemon.core.watermarks import Value
from daemon.usecases.catalog import TableRef
from daemon.usecases.ports import TableStats, WindowRows


class LakeTableStats(TableStats):
    def __init__(self, parquet: ParquetTableStats | None = None) -> None:
        self._parquet = parquet or ParquetTableStats()
        self._delta = DeltaTableStats()
        self._iceberg = IcebergTableStats()

    def _versioned(self, table: TableRef) -> DeltaTableStats | IcebergTableStats | None:
        """The reader of a table with snapshots; None for plain Parquet."""
        if table.format == "delta":
            return self._delta
        if table.format == "iceberg":
            return self._iceberg
        return None

    def snapshot(self, table: TableRef) -> str | None:
        versioned = self._versioned(table)
        return None if versioned is None else versioned.snapshot(table.location)

    def column_names(self, table: TableRef) -> list[str]:
        versioned = self._versioned(table)
        reader = self._parquet if versioned is None else versioned
        return reader.column_names(table.location)

    def count_window_rows(self, table: TableRef, rows: WindowRows, *, snapshot: str | None = None) -> int:
        versioned = self._versioned(table)
        if versioned is not None:
            return versioned.count_window_rows(table.location, rows, snapshot=snapshot)
        return self._parquet.count_window_rows(
            table.location,
            partition_column=rows.partition_column,
            days=list(rows.days),
            time_column=rows.time_column,
            start=rows.start,
            end=rows.end,
        )

    def max_value(self, table: TableRef, column: str) -> Value | None:
        if table.format != "parquet":
            raise BadRequest(
                f"watermark pipelines read Parquet sources; this one is {table.format}: replay its "
                "windows, or schedule it without a watermark"
            )
        return self._parquet.max_value(table.location, column)

"""`LakeTableStats`: the `TableStats` port for every table format the catalog accepts.

Each format has its own reader (Parquet footers, the Delta log, Iceberg metadata); this class only
picks one by the table's `format`, and turns a table's catalog name into what its reader opens (an
Iceberg table's current metadata file, a Delta or Parquet table's location), so the use cases never
branch on formats or on where a table is found.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime
from threading import Lock
from typing import TYPE_CHECKING

from daemon.adapters.arrow_predicates import column_kinds
from daemon.adapters.erasure_lists import read_version
from daemon.adapters.key_lists import read_key_list
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.adapters.table_stats import ParquetTableStats
from daemon.adapters.time_histogram import histogram
from daemon.core.commits import Commit
from daemon.core.errors import BadRequest
from daemon.core.grammar.predicates import Kind
from daemon.core.watermarks import Value
from daemon.usecases.catalog import ErasureList, TableRef
from daemon.usecases.ports import ErasureVersion, KeyList, TableStats, WindowRows

if TYPE_CHECKING:
    from daemon.adapters.delta_table_stats import DeltaTableStats
    from daemon.adapters.iceberg_table_stats import IcebergTableStats


class LakeTableStats(TableStats):
    def __init__(
        self, parquet: ParquetTableStats | None = None, *, catalogs: TableCatalogs | None = None
    ) -> None:
        self._parquet = parquet or ParquetTableStats()
        self._delta: DeltaTableStats | None = None
        self._iceberg: IcebergTableStats | None = None
        self._lock = Lock()
        self._catalogs = catalogs or TableCatalogs({})

    def prepare(self, formats: Iterable[str]) -> None:
        """Make the readers of these formats now (the daemon's start, for its catalog's sources), so
        that no plan or readiness probe pays their library's import (about a second) later."""
        wanted = set(formats)
        if "delta" in wanted:
            self._delta_stats()
        if "iceberg" in wanted:
            self._iceberg_stats()

    def _delta_stats(self) -> DeltaTableStats:
        with self._lock:
            if self._delta is None:
                from daemon.adapters.delta_table_stats import DeltaTableStats

                self._delta = DeltaTableStats()
            return self._delta

    def _iceberg_stats(self) -> IcebergTableStats:
        with self._lock:
            if self._iceberg is None:
                from daemon.adapters.iceberg_table_stats import IcebergTableStats

                self._iceberg = IcebergTableStats()
            return self._iceberg

    def _versioned(self, table: TableRef) -> DeltaTableStats | IcebergTableStats | None:
        """The reader of a table with snapshots, made (and its library imported) on the first table
        of its format: pyiceberg and deltalake were 1.0 s of a daemon's 2.6 s of start-up CPU here,
        which a daemon without such sources need not pay. None for plain Parquet."""
        if table.format == "delta":
            return self._delta_stats()
        if table.format == "iceberg":
            return self._iceberg_stats()
        return None

    def _where(self, table: TableRef) -> str:
        """What the format's reader opens: the table's path; for a named one, its catalog's current
        metadata file (Iceberg) or the location the Data Catalog gives (Delta, Parquet)."""
        if table.table is None:
            return table.location
        if table.format == "iceberg":
            return self._catalogs.metadata_location(table.table)
        return self._catalogs.location(table.table, table.format)

    def snapshot(self, table: TableRef) -> str | None:
        versioned = self._versioned(table)
        return None if versioned is None else versioned.snapshot(self._where(table))

    def metadata_file(self, table: TableRef) -> str | None:
        return None if table.table is None else self._where(table)

    def column_names(self, table: TableRef) -> list[str]:
        versioned = self._versioned(table)
        reader = self._parquet if versioned is None else versioned
        return reader.column_names(self._where(table))

    def erasure_version(self, erasures: ErasureList) -> ErasureVersion:
        return read_version(erasures)

    def key_list(self, path: str) -> KeyList:
        return read_key_list(path)

    def column_kinds(self, table: TableRef) -> dict[str, Kind]:
        versioned = self._versioned(table)
        reader = self._parquet if versioned is None else versioned
        return column_kinds(reader.schema(self._where(table)))

    def count_window_rows(self, table: TableRef, rows: WindowRows, *, snapshot: str | None = None) -> int:
        versioned = self._versioned(table)
        if versioned is not None:
            return versioned.count_window_rows(self._where(table), rows, snapshot=snapshot)
        return self._parquet.count_window_rows(self._where(table), rows)

    def window_files(
        self, table: TableRef, partition_column: str, days: Sequence[date]
    ) -> tuple[str, ...] | None:
        if self._versioned(table) is not None:
            return None
        return self._parquet.window_files(self._where(table), partition_column, list(days))

    def time_histogram(
        self,
        table: TableRef,
        rows: WindowRows,
        *,
        snapshot: str | None,
        origin: datetime,
        speed: float,
        width: float,
    ) -> list[int]:
        if rows.time_column is None:
            raise BadRequest("a shaped replay needs the source's event time column")
        versioned = self._versioned(table)
        if versioned is not None:
            times = versioned.window_times(self._where(table), rows, snapshot=snapshot)
        else:
            times = self._parquet.window_times(self._where(table), rows)
        return histogram(times, origin=origin, speed=speed, width=width)

    def max_value(self, table: TableRef, column: str, *, snapshot: str | None = None) -> Value | None:
        versioned = self._versioned(table)
        if versioned is not None:
            return versioned.max_value(self._where(table), column, snapshot=snapshot)
        return self._parquet.max_value(self._where(table), column)

    def commits(self, table: TableRef, *, after: str, upto: str) -> list[Commit]:
        versioned = self._versioned(table)
        if versioned is None:
            raise BadRequest(f"a {table.format} table has no commits to follow")
        return versioned.commits(self._where(table), after=after, upto=upto)

    def follow_refusal(self, table: TableRef) -> str | None:
        if table.format == "delta":
            if not self._delta_stats().change_feed(self._where(table)):
                return (
                    "its Delta table does not keep a change data feed: set the table property "
                    "delta.enableChangeDataFeed = true (the pipeline reads the rows each commit "
                    "appended from it), or follow a watermark column instead"
                )
            return None
        if table.format == "iceberg":
            return None
        return f"a {table.format} table has no commits to follow: give watermark=<column> instead"

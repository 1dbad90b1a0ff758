"""`ParquetTableStats`: cheap facts about a Parquet table, read by the daemon without a Spark job
(`LakeTableStats` picks it for `format: parquet`).

A plan (rows in a window, ETA) must answer in Slack's time budget whatever the table's size, so the
cost follows the window, not the table: only the window's partition directories
(`<path>/<partition column>=<day>/`) are listed and opened, their row counts come from Parquet
footers, and the table's columns come from one file's schema. A day with no directory has no rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from daemon.adapters.arrow_predicates import arrow_expression
from daemon.core.errors import BadRequest, DependencyDown, Unavailable
from daemon.core.watermarks import Value
from daemon.usecases.ports import WindowRows

_OPEN_ERRORS = (FileNotFoundError, pa.ArrowInvalid, OSError)


def _data_file(info: pafs.FileInfo) -> bool:
    """A data file, not a marker such as `_SUCCESS` or a checksum such as `.part-0.crc`."""
    return info.type == pafs.FileType.File and not info.base_name.startswith(("_", "."))


def _data_dir(info: pafs.FileInfo) -> bool:
    return info.type == pafs.FileType.Directory and not info.base_name.startswith(("_", "."))


class ParquetTableStats:
    """Hive-partitioned Parquet at a path (local or s3://), read with pyarrow.

    `filesystem`: where the paths are (they are then plain paths in it); by default each path says
    (an s3:// URI, else a local path).
    """

    def __init__(self, filesystem: pafs.FileSystem | None = None) -> None:
        self._filesystem = filesystem

    def column_names(self, path: str) -> list[str]:
        """The columns of the table's first data file, then the partition keys on the way to it."""
        fs, root = self._resolve(path)
        try:
            _refuse_lake_table(fs, root, path)
            first, keys = next(self._first_file(fs, root), (None, []))
            if first is None:
                raise Unavailable(f"the source table at {path} has no data files")
            with fs.open_input_file(first) as handle:
                names = list(pq.read_schema(handle).names)
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc
        return names + [key for key in keys if key not in names]

    def schema(self, path: str) -> pa.Schema:
        """The first data file's schema: the columns a filter can test (a hive key above the files is
        not one: the window already selects by it)."""
        fs, root = self._resolve(path)
        try:
            first, _ = next(self._first_file(fs, root), (None, []))
            if first is None:
                raise Unavailable(f"the source table at {path} has no data files")
            with fs.open_input_file(first) as handle:
                return pq.read_schema(handle)
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def count_window_rows(self, path: str, rows: WindowRows) -> int:
        """The window's rows: from the footers alone without a time range or filter, else reading
        the columns they test (pyarrow skips row groups whose statistics rule them out)."""
        try:
            found = self._window(path, rows, rows.time_column)
            if found is None:
                return 0
            dataset, condition = found
            if rows.filter is not None:
                kept = arrow_expression(rows.filter, dataset.schema)
                condition = kept if condition is None else condition & kept
            return int(dataset.count_rows(filter=condition))
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def window_times(self, path: str, rows: WindowRows) -> pa.ChunkedArray:
        """The window's event times (one column read from the window's files only), as the Iceberg
        and Delta readers give theirs."""
        time_column = rows.time_column
        assert time_column is not None, "event times need the event time column"
        try:
            found = self._window(path, rows, time_column)
            if found is None:
                return pa.chunked_array([], type=pa.timestamp("us", tz="UTC"))
            dataset, condition = found
            if rows.filter is not None:
                kept = arrow_expression(rows.filter, dataset.schema)
                condition = kept if condition is None else condition & kept
            return dataset.to_table(filter=condition, columns=[time_column]).column(time_column)
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def window_files(self, path: str, partition_column: str, days: list[date]) -> tuple[str, ...]:
        """The window's data files, relative to the table's root (see `_window_files`). A plan reads
        `column_names` first, which refuses a Delta or Iceberg table declared as Parquet."""
        fs, root = self._resolve(path)
        try:
            files = self._window_files(fs, root, partition_column, days)
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc
        return tuple(file.removeprefix(root + "/") for file in files)

    def _window(
        self, path: str, rows: WindowRows, time_column: str | None
    ) -> tuple[ds.Dataset, ds.Expression | None] | None:
        """The window's files (those the plan listed, when it did) as a dataset and the filter within
        them; None when no day has a file."""
        partition_column, start, end = rows.partition_column, rows.start, rows.end
        fs, root = self._resolve(path)
        if rows.files is None:
            files = self._window_files(fs, root, partition_column, list(rows.days))
        else:
            files = [f"{root}/{file}" for file in rows.files]
        if not files:  # nothing to read: still refuse a column the table does not have
            _require(self.column_names(path), partition_column, time_column)
            return None
        dataset = ds.dataset(files, filesystem=fs, format="parquet")
        _require([*dataset.schema.names, partition_column], partition_column, time_column)
        condition: ds.Expression | None = None
        if time_column is not None and start is not None:
            condition = ds.field(time_column) >= _utc_scalar(start)
        if time_column is not None and end is not None:
            below = ds.field(time_column) < _utc_scalar(end)
            condition = below if condition is None else condition & below
        return dataset, condition

    def _resolve(self, path: str) -> tuple[pafs.FileSystem, str]:
        """The filesystem and the table's root path in it."""
        if self._filesystem is not None:
            return self._filesystem, path.rstrip("/")
        try:
            if "://" in path:
                fs, root = pafs.FileSystem.from_uri(path)
                return fs, root.rstrip("/")
            return pafs.LocalFileSystem(), str(Path(path).resolve())
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    @staticmethod
    def _window_files(fs: pafs.FileSystem, root: str, partition_column: str, days: list[date]) -> list[str]:
        """The data files of the window's day directories; a day without a directory has none."""
        wanted = [f"{root}/{partition_column}={day.isoformat()}" for day in sorted(set(days))]
        present = [info.path for info in fs.get_file_info(wanted) if info.type == pafs.FileType.Directory]
        files = []
        for directory in present:
            listed = fs.get_file_info(pafs.FileSelector(directory, recursive=True))
            files += sorted(info.path for info in listed if _data_file(info))
        return files

    @staticmethod
    def _first_file(fs: pafs.FileSystem, directory: str) -> Iterator[tuple[str, list[str]]]:
        """Data files depth first, in name order, each with the hive keys (`dt` of `dt=…`) above it;
        a caller that takes the first lists one directory per level, not the table."""
        entries = sorted(fs.get_file_info(pafs.FileSelector(directory)), key=lambda info: info.base_name)
        for info in entries:
            if _data_file(info):
                yield info.path, []
        for info in entries:
            if _data_dir(info):
                key = info.base_name.partition("=")[0] if "=" in info.base_name else None
                for found, keys in ParquetTableStats._first_file(fs, info.path):
                    yield found, ([key] if key else []) + keys

    def max_value(self, path: str, column: str) -> Value | None:
        """The column's maximum from each file's Parquet statistics (footers only); a file or row
        group without usable statistics is read for that column alone. Memory stays flat as the
        table grows: a pipeline slot never loads the whole watermark column."""
        fs, root = self._resolve(path)
        try:
            dataset = ds.dataset(root, filesystem=fs, format="parquet", partitioning="hive")
        except _OPEN_ERRORS as exc:
            raise _unreadable(path, exc) from exc
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


def _refuse_lake_table(fs: pafs.FileSystem, root: str, path: str) -> None:
    """A Delta or Iceberg table's files read as plain Parquet would bring back deleted and overwritten
    rows: a directory with the format's log beside its data is refused as Parquet."""
    marks = {"_delta_log": "delta", "metadata": "iceberg"}
    names = {"delta": "a Delta", "iceberg": "an Iceberg"}
    found = fs.get_file_info([f"{root}/{name}" for name in marks])
    for info, (name, table_format) in zip(found, marks.items(), strict=True):
        if info.type != pafs.FileType.Directory:
            continue
        if table_format == "iceberg" and not any(
            entry.base_name.endswith(".metadata.json")
            for entry in fs.get_file_info(pafs.FileSelector(info.path))
        ):
            continue
        raise BadRequest(
            f"the table at {path} is {names[table_format]} table (it has {name}/), not plain Parquet: "
            f"declare it with format: {table_format}, or its deleted and overwritten rows would be replayed"
        )


def _unreadable(path: str, exc: Exception) -> DependencyDown:
    """The one translation of a storage failure: names the table storage and the path it looked at."""
    return DependencyDown("table_storage", path, f"cannot open the source table at {path}: {exc}")


def _require(names: list[str], partition_column: str, time_column: str | None) -> None:
    if partition_column not in names:
        raise BadRequest(f"the table has no partition column '{partition_column}'")
    if time_column is not None and time_column not in names:
        raise BadRequest(f"the table has no column '{time_column}'")


def _utc_scalar(moment: datetime) -> pa.Scalar:
    return pa.scalar(moment, type=pa.timestamp("us", tz="UTC"))


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

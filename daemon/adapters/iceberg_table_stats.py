"""`IcebergTableStats`: an Apache Iceberg table's facts from its metadata, without a Spark job.

A table at a path (a Hadoop table, as Spark's `hadoop` catalog and path reads make them) names its
current metadata file in `metadata/version-hint.text`; a table in a catalog is given as the metadata
file its catalog points at. Its snapshots, manifests and data files are read from there with
`pyiceberg`. A day window plans only the window's files (Iceberg prunes by the
partition values in the manifests) and sums their row counts; a file with delete files attached, or
a time window, is read for the one column it needs, deletes applied. Counts are pinned: given a
snapshot id, nothing committed after it is seen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import NoSuchTableError, ValidationError
from pyiceberg.expressions import And, BooleanExpression, GreaterThanOrEqual, In, LessThan
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import StaticTable
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, TimestampType, TimestamptzType

from daemon.adapters.arrow_predicates import arrow_expression
from daemon.core.commits import Commit, iceberg_kind
from daemon.core.errors import BadRequest, DependencyDown
from daemon.core.grammar.predicates import columns_of
from daemon.core.watermarks import Value
from daemon.usecases.ports import WindowRows

_READ_ERRORS = (OSError, ValueError, NoSuchTableError, ValidationError)


class IcebergTableStats:
    """An Iceberg table at a path (local or s3://)."""

    def snapshot(self, path: str) -> str | None:
        """The table's current snapshot id, as the run records it; None for a table never written."""
        current = self._open(path).metadata.current_snapshot_id
        return None if current is None else str(current)

    def column_names(self, path: str) -> list[str]:
        """The current schema's columns (a replay reads its snapshot's rows with today's schema)."""
        return [field.name for field in self._open(path).schema().fields]

    def count_window_rows(self, path: str, rows: WindowRows, *, snapshot: str | None = None) -> int:
        table = self._open(path)
        snapshot_id = self._snapshot_id(table, path, snapshot)
        if snapshot_id is None:
            return 0  # a table never written has no rows
        partition_column, time_column = rows.partition_column, rows.time_column
        condition = self._window_condition(table, path, rows)
        try:
            scan = table.scan(
                row_filter=condition, snapshot_id=snapshot_id, selected_fields=(partition_column,)
            )
            tasks = list(scan.plan_files())
            if time_column is None and rows.filter is None and not any(task.delete_files for task in tasks):
                return sum(task.file.record_count for task in tasks)
            fields = (partition_column,) if time_column is None else (partition_column, time_column)
            if rows.filter is not None:
                fields = tuple(dict.fromkeys((*fields, *columns_of(rows.filter))))
            read = table.scan(row_filter=condition, snapshot_id=snapshot_id, selected_fields=fields)
            return int(_kept(read.to_arrow(), rows).num_rows)
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def schema(self, path: str) -> pa.Schema:
        """The current schema as Arrow reads its files."""
        try:
            return self._open(path).schema().as_arrow()
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def max_value(self, path: str, column: str, *, snapshot: str | None = None) -> Value | None:
        """The column's newest value as of ``snapshot``, deletes applied. The upper bounds of the
        files without delete files give a floor that a live row holds; only rows at or above it are
        read, from the files whose bounds reach it (a bound is never the answer by itself: in a file
        with deletes it may be a deleted row's)."""
        table = self._open(path)
        snapshot_id = self._snapshot_id(table, path, snapshot)
        if snapshot_id is None:
            return None
        try:
            field = table.schema().find_field(column)
        except ValueError:
            raise BadRequest(f"the table has no column '{column}'") from None
        if not isinstance(field.field_type, TimestampType | TimestamptzType | IntegerType | LongType):
            raise BadRequest(f"a watermark column must hold timestamps or integers, not {field.field_type}")
        try:
            tasks = table.scan(snapshot_id=snapshot_id, selected_fields=(column,)).plan_files()
            bounds = [
                from_bytes(field.field_type, task.file.upper_bounds[field.field_id])
                for task in tasks
                if not task.delete_files
                and task.file.upper_bounds
                and field.field_id in task.file.upper_bounds
            ]
            floor = None
            if bounds:  # less a step, so a bound stored rounded up still reads its row
                floor = _predicate(GreaterThanOrEqual, column, _below(_value(field.field_type, max(bounds))))
            values = _column(table, snapshot_id, column, floor)
            if floor is not None and values.null_count == len(values):  # nothing live at the floor
                values = _column(table, snapshot_id, column, None)
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from exc
        high = pc.max(values).as_py() if len(values) else None
        return None if high is None else _utc(high)

    def commits(self, path: str, *, after: str, upto: str) -> list[Commit]:
        """The snapshots after ``after`` up to ``upto``, oldest first, walked back from ``upto`` by
        parent id: ``after`` must be one of its ancestors (not expired, not rolled back past)."""
        table = self._open(path)
        newest = self._snapshot_id(table, path, upto)
        chain = []
        snapshot = table.metadata.snapshot_by_id(newest) if newest is not None else None
        while snapshot is not None and str(snapshot.snapshot_id) != after:
            chain.append(snapshot)
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else table.metadata.snapshot_by_id(parent)
        if snapshot is None:
            raise BadRequest(
                f"snapshot {after} of the Iceberg table at {path} is not in the history of its snapshot "
                f"{upto} (expired, or the table was rolled back past it)"
            )
        return [
            Commit(
                id=str(item.snapshot_id),
                operation=str(item.summary.operation.value) if item.summary else "unknown",
                kind=iceberg_kind(item.summary.operation.value) if item.summary else "change",
            )
            for item in reversed(chain)
        ]

    def window_times(self, path: str, rows: WindowRows, *, snapshot: str | None = None) -> pa.ChunkedArray:
        """The window's event times as of ``snapshot``, deletes applied (one column read)."""
        time_column = rows.time_column
        assert time_column is not None, "event times need the event time column"
        table = self._open(path)
        snapshot_id = self._snapshot_id(table, path, snapshot)
        if snapshot_id is None:
            return pa.chunked_array([], type=pa.timestamp("us", tz="UTC"))
        condition = self._window_condition(table, path, rows)
        try:
            fields: tuple[str, ...] = (time_column,)
            if rows.filter is not None:
                fields = tuple(dict.fromkeys((time_column, *columns_of(rows.filter))))
            read = table.scan(row_filter=condition, snapshot_id=snapshot_id, selected_fields=fields)
            return _kept(read.to_arrow(), rows).column(time_column)
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from exc

    def _window_condition(self, table: StaticTable, path: str, rows: WindowRows) -> BooleanExpression:
        """The window's days on the identity partition column, narrowed to its times when it has them."""
        partition_column, time_column = rows.partition_column, rows.time_column
        names = [field.name for field in table.schema().fields]
        if partition_column not in names:
            raise BadRequest(f"the table has no partition column '{partition_column}'")
        if time_column is not None and time_column not in names:
            raise BadRequest(f"the table has no column '{time_column}'")
        self._require_identity_partition(table, path, partition_column)
        condition = _predicate(In, partition_column, {day.isoformat() for day in rows.days})
        if time_column is not None and rows.start is not None:
            condition = And(condition, _predicate(GreaterThanOrEqual, time_column, rows.start.isoformat()))
        if time_column is not None and rows.end is not None:
            condition = And(condition, _predicate(LessThan, time_column, rows.end.isoformat()))
        return condition

    @staticmethod
    def _require_identity_partition(table: StaticTable, path: str, column: str) -> None:
        """Counting by file needs every file to hold one day: the column must be an identity partition."""
        field_id = table.schema().find_field(column).field_id
        spec = table.spec()
        if not any(
            part.source_id == field_id and isinstance(part.transform, IdentityTransform)
            for part in spec.fields
        ):
            named = ", ".join(f"{part.name} ({part.transform})" for part in spec.fields) or "none"
            raise BadRequest(
                f"the Iceberg table at {path} is not partitioned by '{column}' "
                f"(its partition fields: {named})"
            )

    @staticmethod
    def _snapshot_id(table: StaticTable, path: str, snapshot: str | None) -> int | None:
        if snapshot is None:
            return table.metadata.current_snapshot_id
        wanted = int(snapshot)
        if table.metadata.snapshot_by_id(wanted) is None:
            raise BadRequest(
                f"snapshot {snapshot} is not in the metadata of the Iceberg table at {path} (expired, or "
                "never one of its snapshots): plan the window again to read the current snapshot"
            )
        return wanted

    @staticmethod
    def _open(path: str) -> StaticTable:
        """A table at a path, or one metadata file (a catalog's table, as its catalog points at it)."""
        metadata = path if path.endswith(".metadata.json") else current_metadata(path)
        try:
            return StaticTable.from_metadata(metadata)
        except FileNotFoundError as exc:
            raise BadRequest(f"the Iceberg metadata file {metadata} is gone: {exc}") from exc
        except _READ_ERRORS as exc:
            raise _unreadable(path, exc) from exc


def current_metadata(path: str) -> str:
    """A Hadoop table's current metadata file, as named in its `metadata/version-hint.text`."""
    root = path.rstrip("/")
    try:
        with PyArrowFileIO().new_input(f"{root}/metadata/version-hint.text").open() as hint:
            version = hint.read().decode().strip()
    except FileNotFoundError as exc:
        raise BadRequest(
            f"{path} is not an Iceberg table at a path (no metadata/version-hint.text there)"
        ) from exc
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    return f"{root}/metadata/v{version}.metadata.json"


def _value(kind: object, raw: Any) -> Value:
    """A manifest bound as a watermark value: timestamps are microseconds since the epoch."""
    if isinstance(kind, TimestampType | TimestamptzType):
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(raw))
    return int(raw)


def _below(value: Value) -> object:
    """A bound as a predicate's literal, one step below it (bounds may be rounded up, never down)."""
    if isinstance(value, datetime):
        return (value - timedelta(milliseconds=1)).isoformat()
    return value


def _column(table: StaticTable, snapshot_id: int, column: str, condition: BooleanExpression | None) -> Any:
    """One column of the snapshot's live rows (deletes applied), those matching ``condition``."""
    if condition is None:
        return table.scan(snapshot_id=snapshot_id, selected_fields=(column,)).to_arrow().column(column)
    scan = table.scan(row_filter=condition, snapshot_id=snapshot_id, selected_fields=(column,))
    return scan.to_arrow().column(column)


def _kept(read: pa.Table, rows: WindowRows) -> pa.Table:
    """The rows of ``read`` (the window, deletes applied) that the window's filter keeps."""
    if rows.filter is None:
        return read
    return read.filter(arrow_expression(rows.filter, read.schema))


def _utc(value: object) -> Value:
    """Naive timestamps (Iceberg's `timestamp` without zone) are UTC, as the watermark compares."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise BadRequest(f"a watermark column must hold timestamps or integers, not {type(value).__name__}")


def _predicate(kind: Any, column: str, value: object) -> BooleanExpression:
    """``kind(column, value)``: pyiceberg's predicates take positional arguments its pydantic models do
    not declare to a type checker."""
    made: BooleanExpression = kind(column, value)
    return made


def _unreadable(path: str, exc: Exception) -> DependencyDown:
    return DependencyDown("table_storage", path, f"cannot read the Iceberg table at {path}: {exc}")

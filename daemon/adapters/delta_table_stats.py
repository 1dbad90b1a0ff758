"""`DeltaTableStats`: a Delta Lake table's facts from its transaction log, without a Spark job.

The log's `add` actions name every live data file of a version with its partition values and its
row count (`numRecords`), so a day window is counted from the log alone; a time window reads its
days' files for the time column only. Reads are pinned: a plan counts the version it records, and
a count given a version sees no commit after it. The `deltalake` package reads the log (JSON
commits and checkpoints alike); its errors are translated here, once.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from daemon.adapters.arrow_predicates import arrow_expression
from daemon.core.commits import Commit, delta_kind
from daemon.core.errors import BadRequest, DependencyDown
from daemon.core.watermarks import Value
from daemon.usecases.ports import WindowRows


class DeltaTableStats:
    """A Delta table at a path (local or s3://, credentials from the environment as boto3 reads them)."""

    def snapshot(self, path: str) -> str:
        """The table's current version, as the run records it."""
        return str(self._open(path).version())

    def column_names(self, path: str) -> list[str]:
        """The current version's columns."""
        return [field.name for field in self._open(path).schema().fields]

    def count_window_rows(self, path: str, rows: WindowRows, *, snapshot: str | None = None) -> int:
        table = self._open(path, snapshot)
        partition_column, time_column = rows.partition_column, rows.time_column
        _require([field.name for field in table.schema().fields], partition_column, time_column)
        if partition_column not in table.metadata().partition_columns:
            raise BadRequest(
                f"the Delta table at {path} is not partitioned by '{partition_column}' "
                f"(its partition columns: {', '.join(table.metadata().partition_columns) or 'none'})"
            )
        wanted = {day.isoformat() for day in rows.days}
        if time_column is None and rows.filter is None:
            actions = pa.table(table.get_add_actions(flatten=True))
            values = actions.column(f"partition.{partition_column}").to_pylist()
            records = actions.column("num_records").to_pylist()
            deleted = _deleted_rows(actions)
            in_window = [i for i, value in enumerate(values) if _day(value) in wanted]
            if any(records[i] is None for i in in_window):  # a writer that kept no stats: count by reading
                return self._read_count(table, path, partition_column, wanted, rows)
            return sum(records[i] - deleted[i] for i in in_window)
        return self._read_count(table, path, partition_column, wanted, rows)

    def schema(self, path: str) -> pa.Schema:
        """The current version's columns as its files are read (partition columns included)."""
        try:
            return self._open(path).to_pyarrow_dataset().schema
        except (DeltaError, OSError, pa.ArrowInvalid) as exc:
            raise _unreadable(path, exc) from exc

    def window_times(self, path: str, rows: WindowRows, *, snapshot: str | None = None) -> pa.ChunkedArray:
        """The window's event times as of ``snapshot``, read from the window's partitions only."""
        table = self._open(path, snapshot)
        time_column = rows.time_column
        assert time_column is not None, "event times need the event time column"
        _require([field.name for field in table.schema().fields], rows.partition_column, time_column)
        wanted = sorted(day.isoformat() for day in rows.days)
        try:
            dataset = table.to_pyarrow_dataset(file_pruning_predicate=[(rows.partition_column, "in", wanted)])
            condition = _condition(rows, dataset.schema)
            return dataset.to_table(filter=condition, columns=[time_column]).column(time_column)
        except (DeltaError, OSError, pa.ArrowInvalid) as exc:
            raise _unreadable(path, exc) from exc

    def max_value(self, path: str, column: str, *, snapshot: str | None = None) -> Value | None:
        """The column's newest value at ``snapshot``. The log's per-file maxima of files without a
        deletion vector give a floor a live row holds (Delta keeps timestamps to the millisecond, so
        one step below it); only rows at or above it are read, from the files that can hold them."""
        table = self._open(path, snapshot)
        if column not in [field.name for field in table.schema().fields]:
            raise BadRequest(f"the table has no column '{column}'")
        try:
            actions = pa.table(table.get_add_actions(flatten=True))
            dataset = table.to_pyarrow_dataset()
            kind = dataset.schema.field(column).type
            if not (pa.types.is_timestamp(kind) or pa.types.is_integer(kind)):
                raise BadRequest(f"a watermark column must hold timestamps or integers, not {kind}")
            floor = _floor(actions, column)
            values = dataset.to_table(
                columns=[column], filter=None if floor is None else ds.field(column) >= _scalar(floor, kind)
            ).column(column)
            if floor is not None and values.null_count == len(values):  # nothing live at the floor
                values = dataset.to_table(columns=[column]).column(column)
        except (DeltaError, OSError, pa.ArrowInvalid) as exc:
            raise _unreadable(path, exc) from exc
        high = pc.max(values).as_py() if len(values) else None
        if isinstance(high, datetime) and high.tzinfo is None:
            return high.replace(tzinfo=UTC)
        return high if isinstance(high, datetime | int) else None

    def commits(self, path: str, *, after: str, upto: str) -> list[Commit]:
        """Versions ``after + 1 .. upto``, oldest first, from the log's commit infos; every one must
        still be in the log (its retention drops old commits)."""
        table = self._open(path)
        first, last = int(after) + 1, int(upto)
        if last < first:
            return []
        try:
            history = {int(entry["version"]): entry for entry in table.history() if "version" in entry}
        except (DeltaError, OSError) as exc:
            raise _unreadable(path, exc) from exc
        missing = [version for version in range(first, last + 1) if version not in history]
        if missing:
            raise BadRequest(
                f"version {missing[0]} of the Delta table at {path} is no longer in its log (its log "
                f"retention dropped it), so the rows appended after version {after} cannot be followed"
            )
        commits = []
        for version in range(first, last + 1):
            entry = history[version]
            operation = str(entry.get("operation") or "unknown")
            parameters = entry.get("operationParameters") or {}
            kind = delta_kind(operation, parameters if isinstance(parameters, dict) else {})
            commits.append(Commit(id=str(version), operation=operation, kind=kind))
        return commits

    def change_feed(self, path: str) -> bool:
        """Is the table's change data feed on (what a pipeline following its commits reads)?"""
        configuration = self._open(path).metadata().configuration
        return str(configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"

    def _read_count(
        self,
        table: DeltaTable,
        path: str,
        partition_column: str,
        wanted: set[str],
        rows: WindowRows,
    ) -> int:
        """Rows of the window's partitions in its time range that its filter keeps, read from those
        files only."""
        try:
            dataset = table.to_pyarrow_dataset(
                file_pruning_predicate=[(partition_column, "in", sorted(wanted))]
            )
            return int(dataset.count_rows(filter=_condition(rows, dataset.schema)))
        except (DeltaError, OSError, pa.ArrowInvalid) as exc:
            raise _unreadable(path, exc) from exc

    @staticmethod
    def _open(path: str, snapshot: str | None = None) -> DeltaTable:
        try:
            table = DeltaTable(path)
            if snapshot is None:
                return table
            if int(snapshot) > table.version():  # deltalake searches long for a version far ahead
                raise BadRequest(
                    f"version {snapshot} of the Delta table at {path} does not exist (its latest is "
                    f"{table.version()}): plan the window again to read the current version"
                )
            table.load_as_version(int(snapshot))
            return table
        except TableNotFoundError as exc:
            raise BadRequest(f"{path} is not a Delta table (no _delta_log there): {exc}") from exc
        except DeltaError as exc:
            if snapshot is not None and "version" in str(exc).lower():
                raise BadRequest(
                    f"version {snapshot} of the Delta table at {path} can no longer be read ({exc}): "
                    "its log or files were cleaned up; plan the window again to read the current version"
                ) from exc
            raise _unreadable(path, exc) from exc
        except OSError as exc:
            raise _unreadable(path, exc) from exc


def _day(value: object) -> str | None:
    """A partition value as the day it names: a date, or text that starts with one."""
    if isinstance(value, datetime | date):
        return value.isoformat()[:10]
    return None if value is None else str(value)[:10]


def _floor(actions: pa.Table, column: str) -> object | None:
    """The largest per-file maximum among files without a deletion vector; None when none says."""
    name = f"max.{column}"
    if name not in actions.column_names:
        return None
    highs = actions.column(name)
    if "deletionVector.cardinality" in actions.column_names:
        deleted = pc.fill_null(actions.column("deletionVector.cardinality"), 0)
        highs = pc.if_else(pc.equal(deleted, 0), highs, pa.nulls(len(highs), highs.type))
    floor: object | None = pc.max(highs).as_py()
    return floor


def _scalar(floor: object, kind: pa.DataType) -> pa.Scalar:
    """The floor as a filter's literal of the column's type, a millisecond below a timestamp."""
    if isinstance(floor, datetime):
        moment = floor if floor.tzinfo else floor.replace(tzinfo=UTC)
        return pa.scalar(moment - timedelta(milliseconds=1), type=pa.timestamp("us", tz="UTC")).cast(kind)
    return pa.scalar(floor).cast(kind)


def _condition(rows: WindowRows, schema: pa.Schema) -> ds.Expression | None:
    """The window's time range and its filter, over a dataset of ``schema``."""
    condition = _time_condition(rows)
    if rows.filter is None:
        return condition
    kept = arrow_expression(rows.filter, schema)
    return kept if condition is None else condition & kept


def _time_condition(rows: WindowRows) -> ds.Expression | None:
    """``start <= time_column < end``, either bound left out when it is None."""
    if rows.time_column is None:
        return None
    condition = None
    if rows.start is not None:
        condition = ds.field(rows.time_column) >= pa.scalar(rows.start, type=pa.timestamp("us", tz="UTC"))
    if rows.end is not None:
        below = ds.field(rows.time_column) < pa.scalar(rows.end, type=pa.timestamp("us", tz="UTC"))
        condition = below if condition is None else condition & below
    return condition


def _deleted_rows(actions: pa.Table) -> list[int]:
    """Rows each file's deletion vector removes (0 where it has none)."""
    if "deletionVector.cardinality" not in actions.column_names:
        return [0] * actions.num_rows
    return [count or 0 for count in pc.fill_null(actions.column("deletionVector.cardinality"), 0).to_pylist()]


def _require(names: list[str], partition_column: str, time_column: str | None) -> None:
    if partition_column not in names:
        raise BadRequest(f"the table has no partition column '{partition_column}'")
    if time_column is not None and time_column not in names:
        raise BadRequest(f"the table has no column '{time_column}'")


def _unreadable(path: str, exc: Exception) -> DependencyDown:
    return DependencyDown("table_storage", path, f"cannot read the Delta table at {path}: {exc}")

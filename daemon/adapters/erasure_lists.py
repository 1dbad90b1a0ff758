"""An erasure list's version, read with pyarrow: how many keys it holds and its newest erasure.

A plan reads the list once, before anything is created: a list that cannot be read (gone, not the
format the catalog says, without its key or time column) refuses the replay with where it looked,
instead of a run that would publish events of people who asked to be forgotten. The newest erasure
is the list's version: the run honours every erasure up to it (the job reads the same list, pinned
there), and later erasures reach the next run.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from daemon.core.errors import BadRequest, DependencyDown
from daemon.usecases.catalog import ErasureList
from daemon.usecases.ports import ErasureVersion


def read_version(erasures: ErasureList, *, as_of: datetime | None = None) -> ErasureVersion:
    """The list's keys and newest erasure (up to ``as_of`` when given: a pinned version)."""
    try:
        table = _read(erasures)
    except (OSError, pa.ArrowInvalid, ValueError) as exc:
        raise DependencyDown(
            "erasure_list", erasures.path, f"cannot read the erasure list at {erasures.path}: {exc}"
        ) from exc
    missing = [name for name in (erasures.key, erasures.erased_at) if name not in table.column_names]
    if missing:
        raise BadRequest(
            f"the erasure list at {erasures.path} has no column '{missing[0]}' "
            f"(its columns: {', '.join(table.column_names)})"
        )
    times = _utc_times(table.column(erasures.erased_at), erasures.path)
    if as_of is not None:
        kept = pc.less_equal(times, pa.scalar(as_of, type=times.type))
        table, times = table.filter(kept), times.filter(kept)
    keys = pc.count_distinct(table.column(erasures.key), mode="only_valid").as_py()
    newest = pc.max(times).as_py() if len(times) else None
    return ErasureVersion(keys=int(keys), as_of=newest.astimezone(UTC) if newest is not None else None)


def _read(erasures: ErasureList) -> pa.Table:
    filesystem, path = _resolve(erasures.path)
    dataset = ds.dataset(path, filesystem=filesystem, format=erasures.format)
    return dataset.to_table()


def _resolve(path: str) -> tuple[pafs.FileSystem | None, str]:
    if "://" in path:
        filesystem, inner = pafs.FileSystem.from_uri(path)
        return filesystem, inner
    return None, path


def _utc_times(column: pa.ChunkedArray, path: str) -> pa.ChunkedArray:
    """Erasure times as UTC timestamps: a naive time is UTC; text must be ISO 8601."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        try:
            column = pc.cast(column, pa.timestamp("us", tz="UTC"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise BadRequest(f"the erasure list at {path} has times that are not ISO 8601: {exc}") from exc
        return column
    if pa.types.is_timestamp(kind):
        return column if kind.tz is not None else pc.assume_timezone(column, "UTC")
    raise BadRequest(f"the erasure list at {path} keeps its erasure times as {kind}, not timestamps")

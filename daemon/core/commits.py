"""Which of a table's commits an ``incremental=snapshot`` pipeline may publish, and why it stops.

A pipeline that follows an Iceberg or Delta table publishes, at each slot, the rows the commits since
its last published snapshot appended. That is exact only while every one of those commits appended:
an incremental read (Iceberg's append scan, Delta's change data feed filtered to inserts) does not
see a row deleted or rewritten, and a topic cannot take back a record it already holds. So each
commit is one of three kinds, read from the table's own log:

- ``append``: it added rows and removed none: its rows are published;
- ``rewrite``: its rows are the ones it replaced (a compaction, a table property, a new column):
  nothing to publish, nothing to refuse;
- ``change``: it deleted, overwrote, updated or merged rows: the pipeline refuses the range and
  says which commit, and its committed snapshot stays where it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

CommitKind = Literal["append", "rewrite", "change"]

# Delta's operation names (its commitInfo) that leave every row as it was.
_DELTA_REWRITES = frozenset(
    {
        "OPTIMIZE",
        "REORG",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "ADD COLUMNS",
        "CHANGE COLUMN",
        "UPGRADE PROTOCOL",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
        "COMPUTE STATS",
    }
)


@dataclass(frozen=True)
class Commit:
    """One commit of a table: its Iceberg snapshot id or Delta version, and what its log calls it."""

    id: str
    operation: str
    kind: CommitKind


def iceberg_kind(operation: str) -> CommitKind:
    """An Iceberg snapshot's ``operation`` summary: ``append`` adds data files only, ``replace``
    rewrites files without changing rows; ``overwrite`` and ``delete`` (and anything newer) change."""
    if operation == "append":
        return "append"
    if operation == "replace":
        return "rewrite"
    return "change"


def delta_kind(operation: str, parameters: Mapping[str, object]) -> CommitKind:
    """A Delta commit's ``operation`` and ``operationParameters``: a write or streaming update in
    append mode appends; the maintenance and schema operations rewrite; every other one changes rows."""
    mode = str(parameters.get("mode") or parameters.get("outputMode") or "")
    if operation in ("WRITE", "STREAMING UPDATE") and mode.lower() == "append":
        return "append"
    if operation in _DELTA_REWRITES:
        return "rewrite"
    return "change"


def refusal(commits: Sequence[Commit], *, source: str, committed: str) -> str | None:
    """Why the commits after ``committed`` cannot be published incrementally; None when they can."""
    changed = next((commit for commit in commits if commit.kind == "change"), None)
    if changed is None:
        return None
    return (
        f"commit {changed.id} of the table of '{source}' ({changed.operation}) did not only append rows, "
        f"so the rows it deleted or changed cannot be followed past snapshot {committed}, the last one "
        "this pipeline published: replay the affected window with `/replay` and schedule the pipeline "
        "again, which starts from the table's current snapshot"
    )


def appends(commits: Sequence[Commit]) -> bool:
    """Did any of the commits add rows (else the slot has nothing to publish)?"""
    return any(commit.kind == "append" for commit in commits)

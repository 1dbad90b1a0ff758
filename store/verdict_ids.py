"""A run's verdict lists: the ids its latest reconcile found missing, unexpected or duplicated.

One row per id at its place in the job's sorted list, replaced whole with each new verdict, so a
page reads one slice in order and a CSV streams them all without holding them.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, insert, select

from daemon.core.reconcile import IdList
from store.models import VerdictId

if TYPE_CHECKING:
    from store.db import Store

_INSERT_ROWS = 10_000  # rows per INSERT: a 100,000-id list is ten statements, not one huge one


class VerdictIds:
    def __init__(self, store: Store) -> None:
        self._store = store

    def replace(self, run_id: str, lists: Mapping[IdList, Sequence[tuple[str, int]]]) -> None:
        """The run's lists are these now (the earlier verdict's go), in one transaction."""
        rows = [
            {"run_id": run_id, "kind": str(kind), "n": n, "event_id": event_id, "copies": copies}
            for kind, listed in lists.items()
            for n, (event_id, copies) in enumerate(listed)
        ]
        with self._store.session() as session:
            session.execute(delete(VerdictId).where(VerdictId.run_id == run_id))
            for start in range(0, len(rows), _INSERT_ROWS):
                session.execute(insert(VerdictId), rows[start : start + _INSERT_ROWS])

    def counts(self, run_id: str) -> dict[IdList, int]:
        """How many ids each list holds (0 for an empty one)."""
        stmt = select(VerdictId.kind, func.count()).where(VerdictId.run_id == run_id).group_by(VerdictId.kind)
        with self._store.session() as session:
            found = {IdList(kind): int(count) for kind, count in session.execute(stmt)}
        return {kind: found.get(kind, 0) for kind in IdList}

    def page(
        self, run_id: str, kind: IdList, *, after: int = -1, limit: int = 100
    ) -> builtins.list[VerdictId]:
        """The ids after place ``after`` (-1: from the first), at most ``limit``, in the list's order."""
        stmt = (
            select(VerdictId)
            .where(VerdictId.run_id == run_id, VerdictId.kind == str(kind), VerdictId.n > after)
            .order_by(VerdictId.n)
            .limit(limit)
        )
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def each(self, run_id: str, kind: IdList, *, chunk: int = 5_000) -> Iterator[VerdictId]:
        """Every id of the list in order, read a chunk at a time (a CSV streams them)."""
        after = -1
        while rows := self.page(run_id, kind, after=after, limit=chunk):
            yield from rows
            after = rows[-1].n

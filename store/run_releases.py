"""Finished runs whose launcher resources (a spec file, a one-time EMR application) are still to free.

Kept in the store, not in a daemon's memory, so a restart (or another daemon) finishes a release a
crash or a refused delete left: a terminal run with a launcher handle and no ``released_at`` is still
to release. Releasing is idempotent on every launcher, so two daemons doing it at once is harmless
and needs no lease. ``released_at`` is bookkeeping beside the run: writing it leaves ``version`` and
``updated_at`` alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, select, update

from daemon.core.states import TERMINAL_RUN_STATES
from store.models import Run

if TYPE_CHECKING:
    from store.db import Store


class RunReleases:
    """Release methods of ``RunRepository`` (kept apart to keep modules small)."""

    _store: Store

    def unreleased(self, launcher_kind: str, limit: int = 50, *, after: str | None = None) -> list[Run]:
        """Finished runs of ``launcher_kind`` whose resources are not freed yet, by id, past ``after``
        (the previous page's last id): a release refused again and again never hides the others."""
        conditions = [
            Run.released_at.is_(None),
            Run.launcher_kind == launcher_kind,  # set with the handle (a JSON column may hold JSON null)
            Run.state.in_(TERMINAL_RUN_STATES),
        ]
        if after is not None:
            conditions.append(Run.id > after)
        stmt = select(Run).where(*conditions).order_by(Run.id).limit(limit)
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def mark_released(self, run_id: str) -> bool:
        """Record that nothing the run's job held is left; False if it was recorded already."""
        stmt = (
            update(Run)
            .where(Run.id == run_id, Run.released_at.is_(None))
            .values(released_at=self._store.now())
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1

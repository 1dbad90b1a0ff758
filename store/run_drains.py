"""Watches of consumer groups draining after a run: stored on the run, driven after it ended.

A finished run with an unfinished watch (``watching``) is leased like an unfinished run (same lease
columns, which a finished run no longer uses), so two daemons never sample one watch twice and a
crashed daemon's watches are taken over when its lease lapses. Writing a watch leaves ``version`` and
``updated_at`` alone: it is bookkeeping beside the run, not a change to it (a live-control write that
read the run before a sample must not be refused because of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, and_, update

from daemon.core.errors import RunNotFound
from daemon.core.states import TERMINAL_RUN_STATES
from store.leases import RunLeases
from store.models import Run

if TYPE_CHECKING:
    from store.db import Store


class RunDrains(RunLeases):
    """Watch methods of ``RunRepository`` (kept apart to keep modules small); leases as ``RunLeases``."""

    _store: Store

    def set_watch(self, run_id: str, watch: Mapping[str, Any] | None, *, watching: bool) -> None:
        """Replace the run's watch; ``watching`` False once every group's watch has concluded."""
        stmt = (
            update(Run)
            .where(Run.id == run_id)
            .values(watch=dict(watch) if watch is not None else None, watching=watching)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            if cast(CursorResult[Any], session.execute(stmt)).rowcount != 1:
                raise RunNotFound(run_id)

    def lease_watching(self, owner: str, ttl_s: float, limit: int = 10) -> list[Run]:
        """Claim up to ``limit`` finished runs whose watch is unfinished, oldest first (as
        ``lease_unfinished`` claims unfinished runs: never the same run to two daemons)."""
        eligible = and_(Run.watching.is_(True), Run.state.in_(TERMINAL_RUN_STATES))
        return self._lease_where(eligible, owner, ttl_s, limit)

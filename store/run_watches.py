"""Watches of consumer groups draining after a run: stored on the run, driven after it ended.

A finished run with an unfinished watch (``watching``) is leased like an unfinished run (same lease
columns, which a finished run no longer uses), so two daemons never sample one watch twice and a
crashed daemon's watches are taken over when its lease lapses. Writing a watch leaves ``version`` and
``updated_at`` alone: it is bookkeeping beside the run, not a change to it (a live-control write that
read the run before a sample must not be refused because of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, and_, or_, select, update

from daemon.core.errors import RunNotFound
from daemon.core.states import TERMINAL_RUN_STATES
from store.leases import RunLeases
from store.models import Run

if TYPE_CHECKING:
    from store.db import Store


class RunWatches:
    """Watch methods of ``RunRepository`` (kept apart to keep modules small)."""

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
        now = self._store.now()
        expires = now + timedelta(seconds=ttl_s)
        available = and_(
            Run.watching.is_(True),
            Run.state.in_(TERMINAL_RUN_STATES),
            or_(Run.lease_owner.is_(None), Run.lease_owner == owner, Run.lease_expires_at < now),
        )
        order = (Run.created_at, Run.id)
        with self._store.session() as session:
            if self._store.dialect == "postgresql":
                stmt = select(Run).where(available).order_by(*order).limit(limit)
                runs = list(session.scalars(stmt.with_for_update(skip_locked=True)))
                for run in runs:
                    run.lease_owner, run.lease_expires_at = owner, expires
                return runs
            candidates = session.scalars(select(Run.id).where(available).order_by(*order).limit(limit)).all()
            claimed = [
                run_id
                for run_id in candidates
                if RunLeases._claim(session, run_id, available, owner, expires)
            ]
            stmt = select(Run).where(Run.id.in_(claimed)).order_by(*order)
            return list(session.scalars(stmt.execution_options(populate_existing=True)))

"""Run leases, so two daemons can share one store without driving the same run twice.

A daemon claims unfinished runs for a TTL and renews while it works; a crashed daemon's
runs become claimable when the TTL lapses. PostgreSQL claims with ``FOR UPDATE SKIP LOCKED``;
SQLite (one writer at a time anyway) claims each row with a compare-and-set UPDATE.

Claims are paged: ``after`` (the last run of the previous page, in ``(created_at, id)`` order) lets a
daemon walk every eligible run in bounded batches, so no run waits behind a fixed first page.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import ColumnElement, CursorResult, and_, or_, select, update
from sqlalchemy.orm import Session

from daemon.core.states import TERMINAL_RUN_STATES
from store.models import Run

if TYPE_CHECKING:
    from store.db import Store

RunPosition = tuple[datetime, str]  # (created_at, id): where a page of claims ended


class RunLeases:
    """Lease methods of ``RunRepository`` (kept apart to keep modules small)."""

    _store: Store

    def lease_unfinished(
        self, owner: str, ttl_s: float, limit: int = 10, *, after: RunPosition | None = None
    ) -> list[Run]:
        """Claim up to ``limit`` unfinished runs, oldest first, for ``owner`` for ``ttl_s`` seconds.

        A run is available when it is not terminal and unleased, leased by ``owner`` already,
        or its lease expired. Two daemons calling this concurrently never get the same run.
        ``after``: only runs past this position (the previous page's last run); fewer than ``limit``
        runs back means no available run lies further.
        """
        return self._lease_where(Run.state.not_in(TERMINAL_RUN_STATES), owner, ttl_s, limit, after)

    def _lease_where(
        self,
        eligible: ColumnElement[bool],
        owner: str,
        ttl_s: float,
        limit: int,
        after: RunPosition | None = None,
    ) -> list[Run]:
        """Claim up to ``limit`` runs matching ``eligible`` that nobody else holds, oldest first."""
        now = self._store.now()
        expires = now + timedelta(seconds=ttl_s)
        available = and_(
            eligible,
            or_(Run.lease_owner.is_(None), Run.lease_owner == owner, Run.lease_expires_at < now),
        )
        if after is not None:
            created_at, run_id = after
            available = and_(
                available,
                or_(Run.created_at > created_at, and_(Run.created_at == created_at, Run.id > run_id)),
            )
        order = (Run.created_at, Run.id)
        with self._store.session() as session:
            if self._store.dialect == "postgresql":
                # Rows another daemon is claiming right now are skipped, not waited for; rows it
                # already claimed fail ``available`` when re-checked under the lock.
                stmt = select(Run).where(available).order_by(*order).limit(limit)
                runs = list(session.scalars(stmt.with_for_update(skip_locked=True)))
                for run in runs:
                    run.lease_owner, run.lease_expires_at = owner, expires
                return runs
            candidates = session.scalars(select(Run.id).where(available).order_by(*order).limit(limit)).all()
            claimed = [
                run_id for run_id in candidates if self._claim(session, run_id, available, owner, expires)
            ]
            stmt = select(Run).where(Run.id.in_(claimed)).order_by(*order)
            return list(session.scalars(stmt.execution_options(populate_existing=True)))

    @staticmethod
    def _claim(
        session: Session, run_id: str, available: ColumnElement[bool], owner: str, expires: datetime
    ) -> bool:
        """Compare-and-set: take the lease only if the run is still available."""
        stmt = (
            update(Run)
            .where(Run.id == run_id, available)
            .values(lease_owner=owner, lease_expires_at=expires)
            .execution_options(synchronize_session=False)
        )
        return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1

    def renew_lease(self, run_id: str, owner: str, ttl_s: float) -> bool:
        """Extend ``owner``'s lease; False if it no longer holds it (taken over, or run finished)."""
        expires = self._store.now() + timedelta(seconds=ttl_s)
        stmt = (
            update(Run)
            .where(Run.id == run_id, Run.lease_owner == owner)
            .values(lease_expires_at=expires)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        """Extend ``owner``'s leases on ``run_ids`` in one write; the ids it still holds (a lease
        another daemon took over after it lapsed is left alone, and missing from the answer)."""
        if not run_ids:
            return set()
        expires = self._store.now() + timedelta(seconds=ttl_s)
        ours = and_(Run.id.in_(list(run_ids)), Run.lease_owner == owner)
        stmt = update(Run).where(ours).values(lease_expires_at=expires)
        with self._store.session() as session:
            session.execute(stmt.execution_options(synchronize_session=False))
            return set(session.scalars(select(Run.id).where(ours)))

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the run back (e.g. on shutdown); False if ``owner`` did not hold it."""
        stmt = (
            update(Run)
            .where(Run.id == run_id, Run.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1

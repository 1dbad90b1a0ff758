"""The launch queue and launcher timings: what admission control and the plan's ETA read.

Queued runs wait in creation order (the order the watcher leases and launches them); a run holds a
launcher slot from its submission until it ends. A launcher's recent timings (submission to first
confirmed delivery, last delivery to the final state) are what the ETA learns start-up from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from daemon.core.states import TERMINAL_RUN_STATES, RunKind, RunState
from store.models import Run

if TYPE_CHECKING:
    from store.db import Store

# A run in these states holds a launcher slot once it has a job (a cancelled queued run never had one).
_HOLDING = (RunState.SUBMITTED, RunState.RUNNING, RunState.CANCELLING)


@dataclass(frozen=True)
class LaunchTiming:
    """One finished run's overheads around publishing, in seconds."""

    startup_s: float  # submitted -> first confirmed delivery
    finish_s: float  # last confirmed delivery -> final state


class RunQueue:
    """Queue methods of ``RunRepository`` (kept apart to keep modules small)."""

    _store: Store

    def queued_ids(self) -> list[str]:
        """Every queued run's id, first in line first (creation order, as the watcher launches)."""
        stmt = select(Run.id).where(Run.state == RunState.QUEUED).order_by(Run.created_at, Run.id)
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def jobs_in_flight(self) -> int:
        """Runs holding a launcher slot: submitted, running or cancelling with a job."""
        stmt = select(func.count()).where(Run.state.in_(_HOLDING), Run.launcher_kind.is_not(None))
        with self._store.session() as session:
            return int(session.scalar(stmt) or 0)

    def unfinished_count(self, *, requester: str | None = None, kinds: tuple[RunKind, ...] = ()) -> int:
        """Runs queued or going (any kind unless ``kinds``), of one requester or of everyone."""
        stmt = select(func.count()).where(Run.state.not_in(list(TERMINAL_RUN_STATES)))
        if requester is not None:
            stmt = stmt.where(Run.requester == requester)
        if kinds:
            stmt = stmt.where(Run.kind.in_(kinds))
        with self._store.session() as session:
            return int(session.scalar(stmt) or 0)

    def launch_timings(self, launcher_kind: str, limit: int) -> list[LaunchTiming]:
        """The latest ``limit`` succeeded publishing runs of this launcher that measured their span."""
        stmt = (
            select(Run.submitted_at, Run.first_delivery_at, Run.last_delivery_at, Run.ended_at)
            .where(
                Run.launcher_kind == launcher_kind,
                Run.state == RunState.SUCCEEDED,
                Run.kind.in_([RunKind.REPLAY, RunKind.PIPELINE]),
                Run.submitted_at.is_not(None),
                Run.first_delivery_at.is_not(None),
                Run.last_delivery_at.is_not(None),
                Run.ended_at.is_not(None),
            )
            .order_by(Run.ended_at.desc(), Run.id.desc())
            .limit(limit)
        )
        with self._store.session() as session:
            rows = session.execute(stmt).all()
        return [
            LaunchTiming(
                startup_s=max((first - submitted).total_seconds(), 0.0),
                finish_s=max((ended - last).total_seconds(), 0.0),
            )
            for submitted, first, last, ended in rows
            if submitted and first and last and ended  # filtered above; this tells the type checker
        ]

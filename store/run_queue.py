"""The launch queue and launcher timings: what admission control and the plan's ETA read.

Queued runs wait in creation order (the order the watcher leases and launches them); a run holds a
launcher slot from its admission until it ends. Admission is decided here, in one transaction for
every daemon on the store (``admit``): SQLite's transactions take the write lock up front, and on
PostgreSQL a transaction-scoped advisory lock serialises admissions, so the count of slots held and
the claim of one are never split by another daemon's claim (docs/decisions/0033).

A launcher's recent timings (submission to first confirmed delivery, last delivery to the final
state) are what the ETA learns start-up from, and the line (``line``) what it learns a new run's
wait for a slot from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import ColumnElement, func, or_, select, text, tuple_
from sqlalchemy.orm import Session

from daemon.core.states import TERMINAL_RUN_STATES, RunKind, RunState
from store.models import Run

if TYPE_CHECKING:
    from datetime import datetime

    from store.db import Store

# A run in these states holds a launcher slot once it has a job (a cancelled queued run never had one).
_HOLDING = (RunState.SUBMITTED, RunState.RUNNING, RunState.CANCELLING)
ADMISSION_LOCK = 0x7265706C6179  # "replay": the advisory lock key admissions take on PostgreSQL


WARM_LOOKBACK = 5  # runs read per run wanted when only warm (or cold) starts count


@dataclass(frozen=True)
class LaunchTiming:
    """One finished run's overheads around publishing, in seconds."""

    startup_s: float  # submitted -> first confirmed delivery
    finish_s: float  # last confirmed delivery -> final state


class RunQueue:
    """Queue methods of ``RunRepository`` (kept apart to keep modules small)."""

    _store: Store

    def line(self) -> tuple[list[Run], list[Run]]:
        """What a run asked for now waits behind: the runs holding a launcher slot, and the queued
        runs, first in line first (detached copies, for the ETA)."""
        queued = (Run.state == RunState.QUEUED) & Run.admitted_at.is_(None)
        with self._store.session() as session:
            held = list(session.scalars(select(Run).where(_holds_slot())))
            waiting = list(session.scalars(select(Run).where(queued).order_by(Run.created_at, Run.id)))
        return held, waiting

    def jobs_in_flight(self) -> int:
        """Runs holding a launcher slot: admitted and not ended, or with a job (a run launched
        before admissions were recorded)."""
        with self._store.session() as session:
            return _holding(session)

    def admit(self, run_id: str, *, cap: int | None) -> bool:
        """Claim a launcher slot for the queued run ``run_id``: True when it holds one now (claimed
        now, or before a restart), False when it must wait (every slot held, an older queued run not
        admitted yet, or it is no longer queued). Atomic across daemons."""
        with self._store.session() as session:
            if session.get_bind().dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADMISSION_LOCK})
            run = session.get(Run, run_id, populate_existing=True)
            if run is None or run.state != RunState.QUEUED:
                return False
            if run.admitted_at is not None:
                return True
            if cap is not None and _holding(session) >= cap:
                return False
            older = select(Run.id).where(
                Run.state == RunState.QUEUED,
                Run.admitted_at.is_(None),
                tuple_(Run.created_at, Run.id) < tuple_(run.created_at, run.id),
            )
            if session.scalars(older.limit(1)).first() is not None:
                return False  # first in line goes first, whichever daemon holds it
            run.admitted_at = self._store.now()
            return True

    def unfinished_count(self, *, requester: str | None = None, kinds: tuple[RunKind, ...] = ()) -> int:
        """Runs queued or going (any kind unless ``kinds``), of one requester or of everyone."""
        stmt = select(func.count()).where(Run.state.not_in(list(TERMINAL_RUN_STATES)))
        if requester is not None:
            stmt = stmt.where(Run.requester == requester)
        if kinds:
            stmt = stmt.where(Run.kind.in_(kinds))
        with self._store.session() as session:
            return int(session.scalar(stmt) or 0)

    def launch_timings(
        self, launcher_kind: str, limit: int, *, warm: bool | None = None
    ) -> list[LaunchTiming]:
        """The latest ``limit`` succeeded publishing runs of this launcher that measured their span;
        with ``warm``, only those that started warm (their handle says so: a standby driver that was
        ready) or only cold ones."""
        stmt = (
            select(
                Run.submitted_at,
                Run.first_delivery_at,
                Run.last_delivery_at,
                Run.ended_at,
                Run.launcher_handle,
            )
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
            .limit(limit if warm is None else limit * WARM_LOOKBACK)
        )
        with self._store.session() as session:
            rows = session.execute(stmt).all()
        timings: list[LaunchTiming] = []
        for row in rows:
            submitted, first, last, ended = (cast("datetime | None", value) for value in row[:4])
            handle = cast("dict[str, Any] | None", row[4])
            if not (submitted and first and last and ended):  # filtered above; this tells the type checker
                continue
            if warm is not None and bool((handle or {}).get("warm")) != warm:
                continue
            startup_s = max((first - submitted).total_seconds(), 0.0)
            finish_s = max((ended - last).total_seconds(), 0.0)
            timings.append(LaunchTiming(startup_s=startup_s, finish_s=finish_s))
        return timings[:limit]


def _holds_slot() -> ColumnElement[bool]:
    """A run holding a launcher slot: admitted and not ended, or with a job (from before admissions)."""
    admitted = (Run.admitted_at.is_not(None)) & Run.state.not_in(list(TERMINAL_RUN_STATES))
    launched = Run.state.in_(_HOLDING) & Run.launcher_kind.is_not(None)
    return or_(admitted, launched)


def _holding(session: Session) -> int:
    """Runs holding a launcher slot, read in ``session``'s transaction."""
    return int(session.scalar(select(func.count()).where(_holds_slot())) or 0)

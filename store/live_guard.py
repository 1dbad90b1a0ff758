"""The live-topic guard: one replay of a source's window into its live topic at a time.

A replay into a live topic is refused while another replay of the same source into the same topic,
with an overlapping window, is still going or succeeded since ``LiveGuard.since``, unless the two
filters provably select no row in common (``daemon.core.selections``: merchant m-1 and merchant m-2).
The check and the insert share one transaction under a lock that also covers rows not written yet:
``SELECT ... FOR UPDATE`` cannot lock the absence of a row, so PostgreSQL takes a transaction-scoped
advisory lock keyed by (source, topic); SQLite transactions are ``BEGIN IMMEDIATE`` and so already
exclusive.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from daemon.core.errors import OverlappingReplay
from daemon.core.grammar.predicates import Predicate, parse_predicate
from daemon.core.selections import disjoint
from daemon.core.states import RunKind, RunState
from daemon.core.windows import overlaps
from store.models import Run

GOING = (RunState.QUEUED, RunState.SUBMITTED, RunState.RUNNING, RunState.CANCELLING)


@dataclass(frozen=True)
class LiveGuard:
    """Refuse the insert if it overlaps a going run, or one that succeeded at or after ``since``."""

    since: datetime


def lock_live_topic(session: Session, source: str, topic: str) -> None:
    """Serialise guarded inserts into one (source, topic) until the transaction ends."""
    if session.get_bind().dialect.name != "postgresql":
        return  # SQLite: BEGIN IMMEDIATE already holds the database's write lock
    digest = hashlib.sha256(f"live-guard\x1f{source}\x1f{topic}".encode()).digest()
    session.execute(select(func.pg_advisory_xact_lock(int.from_bytes(digest[:8], "big", signed=True))))


def overlapping_runs(
    session: Session,
    *,
    source: str,
    topic: str,
    start: datetime,
    end: datetime,
    since: datetime,
    where: str | None = None,
) -> list[Run]:
    """Replays of ``source`` into ``topic`` whose window overlaps ``[start, end)`` and whose filter
    may share a row with ``where`` (canonical text; None: every row), oldest first."""
    mine = _filter(where)
    stmt = (
        select(Run)
        .where(
            Run.kind == RunKind.REPLAY,
            Run.source == source,
            Run.topic == topic,
            Run.window_start.is_not(None),
            Run.window_end.is_not(None),
            or_(
                Run.state.in_(GOING),
                and_(Run.state == RunState.SUCCEEDED, func.coalesce(Run.ended_at, Run.updated_at) >= since),
            ),
        )
        .order_by(Run.created_at, Run.id)
    )
    return [
        run
        for run in session.scalars(stmt)
        if run.window_start is not None
        and run.window_end is not None
        and overlaps((start, end), (run.window_start, run.window_end))
        and not disjoint(mine, _filter(run.options.where))
    ]


def _filter(where: str | None) -> Predicate | None:
    return None if where is None else parse_predicate(where)


def refuse_overlap(session: Session, run: Run, guard: LiveGuard) -> None:
    """Lock the run's (source, topic) and raise OverlappingReplay naming the first run it overlaps."""
    if run.window_start is None or run.window_end is None:
        raise ValueError("a guarded run needs its window bounds")
    lock_live_topic(session, run.source, run.topic)
    found = overlapping_runs(
        session,
        source=run.source,
        topic=run.topic,
        start=run.window_start,
        end=run.window_end,
        since=guard.since,
        where=run.options.where,
    )
    if found:
        other = found[0]
        raise OverlappingReplay(
            run_id=other.id,
            requester=other.requester,
            state=str(other.state),
            window=other.window_label or "?",
            topic=other.topic,
        )

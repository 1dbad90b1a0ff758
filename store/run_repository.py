"""Runs: creation (optionally idempotent), the state machine, progress, and daemon leases.

Every mutation locks the row first (``SELECT ... FOR NO KEY UPDATE`` on PostgreSQL; SQLite
transactions are ``BEGIN IMMEDIATE`` and so already exclusive), bumps ``version``, and may
be made conditional with ``expected_version`` for optimistic callers. Lease bookkeeping is
the exception: it leaves ``version`` and ``updated_at`` alone so renewals do not look like
changes to the run.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, Integer, and_, case, delete, func, or_, select, type_coerce, update
from sqlalchemy.exc import IntegrityError

from daemon.core.errors import BadRequest, InvalidTransition, PipelineNotFound, RunNotFound
from daemon.core.ids import new_run_id
from daemon.core.run_options import RunOptions
from daemon.core.states import TERMINAL_RUN_STATES, FailureKind, RunKind, RunState
from store.live_guard import LiveGuard, overlapping_runs, refuse_overlap
from store.models import Pipeline, Run, RunProgress
from store.pagination import decode_cursor, encode_cursor
from store.run_drains import RunDrains
from store.run_queue import RunQueue
from store.run_releases import RunReleases
from store.transitions import COUNTERS, apply_transition, check_version, lock_run, set_fields, touch

if TYPE_CHECKING:
    from store.db import Store

RunPage = tuple[list[Run], str | None]


def _run_state(value: str) -> RunState:
    try:
        return RunState(value)
    except ValueError:
        raise BadRequest(f"{value!r} is not a valid RunState") from None


class RunRepository(RunDrains, RunQueue, RunReleases):  # RunDrains extends RunLeases
    """All reads and writes of ``runs`` and ``run_progress`` (leases: ``store.leases``; the launch
    queue and launcher timings: ``store.run_queue``; consumer-group watches: ``store.run_drains``;
    releases still to do: ``store.run_releases``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(
        self,
        *,
        kind: str,
        source: str,
        topic: str,
        tps: int,
        requester: str,
        pipeline_id: str | None = None,
        window_start: datetime | None = None,
        window_end: datetime | None = None,
        window_label: str | None = None,
        watermark_column: str | None = None,
        watermark_low: str | None = None,
        watermark_high: str | None = None,
        topic_created: bool = False,
        options: RunOptions | None = None,
        idempotency_key: str | None = None,
        slack_channel: str | None = None,
        slack_ts: str | None = None,
        run_id: str | None = None,
        live_guard: LiveGuard | None = None,
        reconciles: str | None = None,
        offsets: Mapping[str, Any] | None = None,
    ) -> Run:
        """Insert a ``queued`` run. Unknown ``pipeline_id`` raises PipelineNotFound.

        With ``live_guard``, an overlapping replay into the same topic (see ``store.live_guard``) raises
        OverlappingReplay instead, checked in the insert's own transaction.
        """
        now = self._store.now()
        run = Run(
            id=run_id or new_run_id(),
            kind=RunKind(kind),
            pipeline_id=pipeline_id,
            source=source,
            window_start=window_start,
            window_end=window_end,
            window_label=window_label,
            watermark_column=watermark_column,
            watermark_low=watermark_low,
            watermark_high=watermark_high,
            topic=topic,
            topic_created=topic_created,
            tps=tps,
            options=options or RunOptions(),
            requester=requester,
            idempotency_key=idempotency_key,
            state=RunState.QUEUED,
            confirmed=0,
            failed_tasks=0,
            duplicates=0,
            slack_channel=slack_channel,
            slack_ts=slack_ts,
            reconciles=reconciles,
            offsets=dict(offsets) if offsets is not None else None,
            created_at=now,
            updated_at=now,
            version=1,
        )
        with self._store.session() as session:
            if pipeline_id is not None and session.get(Pipeline, pipeline_id) is None:
                raise PipelineNotFound(pipeline_id)
            if live_guard is not None:
                refuse_overlap(session, run, live_guard)
            session.add(run)
        return run

    def create_or_get(self, requester: str, idempotency_key: str, **fields: Any) -> tuple[Run, bool]:
        """Create once per (requester, key): a retried Slack command gets the first run back.

        Returns ``(run, created)``. The existing run is returned as is, even if ``fields`` differ.
        """
        existing = self.find_by_idempotency_key(requester, idempotency_key)
        if existing is not None:
            return existing, False
        try:
            return self.create(requester=requester, idempotency_key=idempotency_key, **fields), True
        except IntegrityError:
            # Lost the race to a concurrent identical request: the unique constraint decided.
            existing = self.find_by_idempotency_key(requester, idempotency_key)
            if existing is None:
                raise
            return existing, False

    def overlapping(
        self,
        *,
        source: str,
        topic: str,
        start: datetime,
        end: datetime,
        since: datetime,
        where: str | None = None,
    ) -> builtins.list[Run]:
        """Replays a guarded insert of this window (and filter) would collide with (a plan shows them)."""
        with self._store.session() as session:
            return overlapping_runs(
                session, source=source, topic=topic, start=start, end=end, since=since, where=where
            )

    def find_by_idempotency_key(self, requester: str, idempotency_key: str) -> Run | None:
        """The run this requester already created with this key, if any."""
        stmt = select(Run).where(Run.requester == requester, Run.idempotency_key == idempotency_key)
        with self._store.session() as session:
            return session.scalars(stmt).one_or_none()

    def kept_topics(self, *, ended_before: datetime, limit: int = 100) -> builtins.list[Run]:
        """Finished runs, ended before ``ended_before``, whose own one-off topic is not deleted yet
        (oldest first): what the topic TTL tends."""
        stmt = (
            select(Run)
            .where(Run.topic_created.is_(True), Run.topic_deleted_at.is_(None))
            .where(Run.state.in_(list(TERMINAL_RUN_STATES)), Run.ended_at < ended_before)
            .order_by(Run.ended_at, Run.id)
            .limit(limit)
        )
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def source_busy_since(self, source: str, since: datetime) -> bool:
        """True when a run of ``source`` is unfinished or ended at or after ``since``: its dead-letter
        topic may still be written to, or read for a dead letter just set aside."""
        recent = or_(
            Run.state.not_in(list(TERMINAL_RUN_STATES)), Run.ended_at >= since, Run.ended_at.is_(None)
        )
        stmt = select(Run.id).where(Run.source == source, recent).limit(1)
        with self._store.session() as session:
            return session.scalars(stmt).first() is not None

    def topic_deleted(self, run_id: str) -> None:
        """Record that the run's one-off topic is gone (leaves ``version``: the run did not change)."""
        stmt = update(Run).where(Run.id == run_id, Run.topic_deleted_at.is_(None))
        with self._store.session() as session:
            session.execute(stmt.values(topic_deleted_at=self._store.now()))

    def repairs_of(self, subject: Run) -> builtins.list[Run]:
        """The repair runs of ``subject`` (``repair r-…``), oldest first: their records count as its own."""
        return [run for run in self._after(subject) if run.options.repair_of == subject.id]

    def redrives_of(self, subject: Run) -> builtins.list[Run]:
        """The redrive runs of ``subject`` (``redrive r-…``), oldest first."""
        return [run for run in self._after(subject) if run.options.redrive_of == subject.id]

    def _after(self, subject: Run) -> builtins.list[Run]:
        """Replays into ``subject``'s topic created after it, oldest first (its repairs and redrives)."""
        stmt = (
            select(Run)
            .where(Run.kind == RunKind.REPLAY, Run.source == subject.source, Run.topic == subject.topic)
            .where(Run.created_at >= subject.created_at, Run.id != subject.id)
            .order_by(Run.created_at, Run.id)
        )
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def unfinished_reconcile(self, subject_id: str) -> Run | None:
        """A reconcile of ``subject_id`` still queued or running, if any (a second request joins it)."""
        stmt = (
            select(Run)
            .where(Run.kind == RunKind.RECONCILE, Run.reconciles == subject_id)
            .where(Run.state.not_in(list(TERMINAL_RUN_STATES)))
            .limit(1)
        )
        with self._store.session() as session:
            return session.scalars(stmt).first()

    def get(self, run_id: str) -> Run:
        with self._store.session() as session:
            run = session.get(Run, run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def list(
        self,
        *,
        state: str | Sequence[str] | None = None,
        requester: str | None = None,
        source: str | None = None,
        pipeline_id: str | None = None,
        kinds: Sequence[RunKind] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Newest first, keyset-paginated: pass the returned cursor back for the next page.

        A bad limit, state or cursor is a `BadRequest` naming it.
        """
        if limit < 1:
            raise BadRequest(f"limit must be positive, got {limit}")
        stmt = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit + 1)
        if isinstance(state, str):
            stmt = stmt.where(Run.state == _run_state(state))
        elif state is not None:
            stmt = stmt.where(Run.state.in_([_run_state(s) for s in state]))
        if requester is not None:
            stmt = stmt.where(Run.requester == requester)
        if source is not None:
            stmt = stmt.where(Run.source == source)
        if pipeline_id is not None:
            stmt = stmt.where(Run.pipeline_id == pipeline_id)
        if kinds is not None:
            stmt = stmt.where(Run.kind.in_(list(kinds)))
        if cursor is not None:
            created_at, run_id = decode_cursor(cursor)
            stmt = stmt.where(
                or_(Run.created_at < created_at, and_(Run.created_at == created_at, Run.id < run_id))
            )
        with self._store.session() as session:
            runs = list(session.scalars(stmt))
        if len(runs) > limit:
            runs = runs[:limit]
            return runs, encode_cursor(runs[-1].created_at, runs[-1].id)
        return runs, None

    def transition(
        self, run_id: str, to_state: str, *, expected_version: int | None = None, **fields: Any
    ) -> Run:
        """Move a run along the state machine, setting ``fields`` in the same write.

        Raises InvalidTransition (e.g. leaving a terminal state), StaleUpdate, RunNotFound.
        """
        with self._store.session() as session:
            run = lock_run(session, run_id)
            check_version(run_id, run.version, expected_version)
            apply_transition(run, to_state, fields, self._store.now())
        return run

    def update(self, run_id: str, *, expected_version: int | None = None, **fields: Any) -> Run:
        """Set non-state fields (e.g. ``slack_ts``, final counters); allowed after the run ended."""
        with self._store.session() as session:
            run = lock_run(session, run_id)
            check_version(run_id, run.version, expected_version)
            set_fields(run, fields)
            touch(run, self._store.now())
        return run

    def set_control(self, run_id: str, changes: Sequence[Mapping[str, Any]], *, expected_version: int) -> Run:
        """Replace the run's live-control changes (``daemon.core.run_control``), only if nobody wrote
        the run since it was read at ``expected_version`` (else StaleUpdate: read again, decide again)."""
        with self._store.session() as session:
            run = lock_run(session, run_id)
            check_version(run_id, run.version, expected_version)
            run.control = [dict(change) for change in changes] or None
            touch(run, self._store.now())
        return run

    def add_counts(self, run_id: str, **deltas: int) -> Run:
        """Increment counters (``confirmed``, ``failed_tasks``, ``duplicates``)."""
        unknown = set(deltas) - COUNTERS
        if unknown:
            raise TypeError(f"not counters: {', '.join(sorted(unknown))}")
        with self._store.session() as session:
            run = lock_run(session, run_id)
            for name, delta in deltas.items():
                setattr(run, name, (getattr(run, name) or 0) + delta)
            touch(run, self._store.now())
        return run

    def update_progress(
        self,
        run_id: str,
        confirmed: int | None,
        rate: float | None,
        *,
        partitions: dict[str, Any] | None = None,
    ) -> Run:
        """Record a progress sample and set ``confirmed`` (None: no new count, only ``partitions``, the
        partitions' lines); refused once the run finished."""
        with self._store.session() as session:
            run = lock_run(session, run_id)
            if run.terminal:
                raise InvalidTransition(run_id, run.state, run.state, "a finished run takes no progress")
            now = self._store.now()
            if confirmed is not None:
                session.add(RunProgress(run_id=run_id, at=now, confirmed=confirmed, rate=rate or 0.0))
                run.confirmed = confirmed
            if partitions is not None:
                run.partition_progress = partitions
            touch(run, now)
        return run

    def compact_progress(self, run_id: str) -> int:
        """Delete the samples of a concluded run whose own per-second series replaced them (what its
        page charts once it ended); how many went. A run without that series keeps its samples: they
        are its only chart. A store that lives for years would otherwise keep a row per second of
        every run."""
        with self._store.session() as session:
            run = lock_run(session, run_id)
            if not run.terminal or not (run.rate_series or {}).get("counts"):  # what the chart needs
                return 0
            gone = session.execute(delete(RunProgress).where(RunProgress.run_id == run_id))
            return cast(CursorResult[Any], gone).rowcount

    def progress(self, run_id: str, limit: int | None = None) -> builtins.list[RunProgress]:
        """Progress samples, oldest first (the latest ``limit`` if given)."""
        stmt = select(RunProgress).where(RunProgress.run_id == run_id)
        stmt = stmt.order_by(RunProgress.at.desc(), RunProgress.id.desc()).limit(limit)
        with self._store.session() as session:
            if session.get(Run, run_id) is None:
                raise RunNotFound(run_id)
            return list(reversed(session.scalars(stmt).all()))

    def set_handle(self, run_id: str, kind: str, handle: Mapping[str, Any]) -> Run:
        """Remember how the run was launched (pid and log path, or EMR ids) to poll or cancel it."""
        return self.update(run_id, launcher_kind=kind, launcher_handle=dict(handle))

    def totals(self) -> dict[str, int]:
        """Store-wide sums for metrics: ``runs``, ``confirmed`` events, ``launch_failures`` (failed runs
        whose job could not be started at all)."""
        failed_to_launch = and_(Run.state == RunState.FAILED, Run.failure_kind == FailureKind.LAUNCH)
        launch_failures = type_coerce(func.sum(case((failed_to_launch, 1), else_=0)), Integer)
        stmt = select(func.count(), func.sum(Run.confirmed), launch_failures)
        with self._store.session() as session:
            runs, confirmed, failures = session.execute(stmt).one()
        return {"runs": runs, "confirmed": int(confirmed or 0), "launch_failures": int(failures or 0)}

    def count_by_state(self) -> dict[RunState, int]:
        """Number of runs in every state (zeros included), for metrics and ``/replay status``."""
        stmt = select(Run.state, func.count()).group_by(Run.state)
        with self._store.session() as session:
            counts = {RunState(state): count for state, count in session.execute(stmt)}
        return {state: counts.get(state, 0) for state in RunState}

"""Pipelines: definitions, pause/resume/archive, and the watermark commit.

``commit_watermark`` is the one place a watermark moves, and it moves together with the
run that earned it: if finishing the run is refused, the watermark stays where it was, so
the next run re-reads the same rows instead of silently skipping them.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from daemon.core.errors import (
    Conflict,
    InvalidTransition,
    LivePipelineExists,
    PipelineNotFound,
    StaleUpdate,
)
from daemon.core.ids import new_pipeline_id, new_run_id
from daemon.core.run_options import PipelineOptions, RunOptions
from daemon.core.states import (
    PIPELINE_TRANSITIONS,
    TERMINAL_RUN_STATES,
    FailureKind,
    PipelineState,
    RunKind,
    RunState,
)
from store.live_guard import lock_live_topic
from store.models import Pipeline, Run
from store.transitions import apply_transition, check_version, lock_run, touch

if TYPE_CHECKING:
    from store.db import Store

# Fields ``update`` may set; state and watermark have dedicated methods.
UPDATABLE_PIPELINE_FIELDS = frozenset(
    {
        "source",
        "schedule",
        "lookback_seconds",
        "tps",
        "topic",
        "topic_created",
        "options",
        "owners",
        "idle_after_days",
        "emr_application_id",
        "slack_channel",
        "slack_ts",
        "next_run_at",
        "idle_since",
        "delete_after",
        "snoozed_until",
        "snoozed_by",
    }
)


SLOT_RUN_FIELDS = frozenset(
    {
        "source",
        "topic",
        "tps",
        "requester",
        "watermark_column",
        "watermark_low",
        "watermark_high",
        "options",
        "topic_created",
        "slack_channel",
        "slack_ts",
        "window_label",
    }
)


def new_run_fields(fields: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The columns of a freshly fired pipeline run, from what the scheduler knows about it."""
    unknown = set(fields) - SLOT_RUN_FIELDS
    if unknown:
        raise TypeError(f"not run fields for a pipeline slot: {', '.join(sorted(unknown))}")
    return {
        "options": RunOptions(),
        "topic_created": False,
        **fields,
        "confirmed": 0,
        "failed_tasks": 0,
        "duplicates": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }


def lock_pipeline(session: Session, pipeline_id: str) -> Pipeline:
    stmt = select(Pipeline).where(Pipeline.id == pipeline_id).with_for_update(key_share=True)
    pipeline = session.scalars(stmt).one_or_none()
    if pipeline is None:
        raise PipelineNotFound(pipeline_id)
    return pipeline


class PipelineRepository:
    """All reads and writes of ``pipelines``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(
        self,
        *,
        source: str,
        schedule: str,
        watermark_column: str | None,
        topic: str,
        tps: int,
        created_by: str,
        owners: Sequence[str] | None = None,
        watermark_value: str | None = None,
        lookback_seconds: int = 0,
        topic_created: bool = False,
        options: PipelineOptions | None = None,
        idle_after_days: int | None = None,
        emr_application_id: str | None = None,
        slack_channel: str | None = None,
        slack_ts: str | None = None,
        pipeline_id: str | None = None,
        idempotency_key: str | None = None,
        live: bool = False,
    ) -> Pipeline:
        """Insert an ``active`` pipeline; its owners default to its creator. A key the creator already
        used raises IntegrityError (the unique constraint decides between racing creates).

        ``live``: the pipeline publishes into its source's live topic, where one pipeline of a source
        is the most there may be (two would publish every increment twice). The check and the insert
        share one transaction under the live-topic lock (``store.live_guard``), so of two racing
        creates one is refused with the other's id."""
        now = self._store.now()
        pipeline = Pipeline(
            id=pipeline_id or new_pipeline_id(),
            source=source,
            schedule=schedule,
            watermark_column=watermark_column,
            watermark_value=watermark_value,
            lookback_seconds=lookback_seconds,
            tps=tps,
            topic=topic,
            topic_created=topic_created,
            options=options or PipelineOptions(),
            owners=list(owners) if owners is not None else [created_by],
            state=PipelineState.ACTIVE,
            idle_after_days=idle_after_days,
            created_by=created_by,
            created_at=now,
            updated_at=now,
            emr_application_id=emr_application_id,
            slack_channel=slack_channel,
            slack_ts=slack_ts,
            idempotency_key=idempotency_key,
            version=1,
        )
        with self._store.session() as session:
            if live:
                lock_live_topic(session, source, topic)
                going = session.scalars(
                    select(Pipeline)
                    .where(
                        Pipeline.source == source,
                        Pipeline.topic == topic,
                        Pipeline.state != PipelineState.ARCHIVED,
                    )
                    .order_by(Pipeline.created_at, Pipeline.id)
                ).first()
                if going is not None:
                    raise LivePipelineExists(going.id, going.created_by, str(going.state), topic)
            session.add(pipeline)
        return pipeline

    def find_by_idempotency_key(self, created_by: str, idempotency_key: str) -> Pipeline | None:
        """The pipeline this user already created with this key, if any."""
        stmt = select(Pipeline).where(
            Pipeline.created_by == created_by, Pipeline.idempotency_key == idempotency_key
        )
        with self._store.session() as session:
            return session.scalars(stmt).one_or_none()

    def get(self, pipeline_id: str) -> Pipeline:
        with self._store.session() as session:
            pipeline = session.get(Pipeline, pipeline_id)
        if pipeline is None:
            raise PipelineNotFound(pipeline_id)
        return pipeline

    def list(self, *, state: str | None = None, owner: str | None = None) -> builtins.list[Pipeline]:
        """Oldest first; ``owner`` is filtered in Python (pipelines are few, JSON queries vary)."""
        stmt = select(Pipeline).order_by(Pipeline.created_at, Pipeline.id)
        if state is not None:
            stmt = stmt.where(Pipeline.state == PipelineState(state))
        with self._store.session() as session:
            pipelines = list(session.scalars(stmt))
        return [p for p in pipelines if owner is None or owner in p.owners]

    def set_state(self, pipeline_id: str, state: str, *, expected_version: int | None = None) -> Pipeline:
        """Pause, resume or archive. Archived is final; setting the current state is a no-op."""
        target = PipelineState(state)
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            check_version(pipeline_id, pipeline.version, expected_version)
            current = PipelineState(pipeline.state)
            if target is current:
                return pipeline
            if target not in PIPELINE_TRANSITIONS[current]:
                raise InvalidTransition(pipeline_id, current, target, "archived pipelines stay archived")
            if target is PipelineState.ACTIVE and pipeline.deprovision_reason is not None:
                raise InvalidTransition(pipeline_id, current, target, "it is being de-provisioned")
            pipeline.state = target
            touch(pipeline, self._store.now())
        return pipeline

    def update(self, pipeline_id: str, *, expected_version: int | None = None, **fields: Any) -> Pipeline:
        """Change settings such as ``tps``, ``schedule`` or ``owners``."""
        unknown = set(fields) - UPDATABLE_PIPELINE_FIELDS
        if unknown:
            raise TypeError(f"cannot set {', '.join(sorted(unknown))} on pipeline {pipeline_id!r}")
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            check_version(pipeline_id, pipeline.version, expected_version)
            for name, value in fields.items():
                setattr(pipeline, name, value)
            touch(pipeline, self._store.now())
        return pipeline

    # -- the janitor: the optimistic checks that let an owner's answer win over a running pass ----

    def snooze(self, pipeline_id: str, *, until: datetime, by: str) -> Pipeline:
        """Keep: no deletion before `until`. Refused once de-provisioning has begun (Conflict)."""
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            if pipeline.deprovision_reason is not None or pipeline.state == PipelineState.ARCHIVED:
                raise Conflict(f"pipeline {pipeline_id} is already being de-provisioned")
            pipeline.snoozed_until, pipeline.snoozed_by = until, by
            pipeline.idle_since = pipeline.delete_after = None
            touch(pipeline, self._store.now())
        return pipeline

    def set_deadline(self, pipeline_id: str, *, idle_since: datetime, delete_after: datetime) -> bool:
        """Start the grace period of the idle period `idle_since` once its prompts were delivered;
        False (nothing changed) when that period is no longer the pipeline's (kept meanwhile)."""
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            if pipeline.idle_since != idle_since or pipeline.deprovision_reason is not None:
                return False
            pipeline.delete_after = delete_after
            touch(pipeline, self._store.now())
        return True

    def begin_deprovision(self, pipeline_id: str, *, reason: str, read: Pipeline) -> Pipeline:
        """Pause the pipeline and mark it being de-provisioned, atomically, unless it was kept (or
        published, or re-asked) since `read` was taken: then StaleUpdate and nothing changes. Its EMR
        application is recorded as to be released. Already begun: the row as it is (a retry)."""
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            if pipeline.deprovision_reason is not None:
                return pipeline
            if pipeline.state == PipelineState.ARCHIVED:
                raise Conflict(f"pipeline {pipeline_id} is already de-provisioned")
            idle_fields = ("idle_since", "delete_after", "snoozed_until", "last_published_at")
            if any(getattr(pipeline, f) != getattr(read, f) for f in idle_fields):
                raise StaleUpdate(pipeline_id, read.version, pipeline.version)
            pipeline.deprovision_reason = reason
            pipeline.state = PipelineState.PAUSED  # no slot fires from now on
            pipeline.application_release = pipeline.emr_application_id
            touch(pipeline, self._store.now())
        return pipeline

    def record_application(self, pipeline_id: str, application_id: str) -> None:
        """The pipeline's runs go on this EMR application. One recorded once de-provisioning has
        begun (its run was being launched meanwhile) is to be released as well, never left behind."""
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            release = pipeline.application_release
            if pipeline.deprovision_reason is not None:
                release = application_id
            if (pipeline.emr_application_id, pipeline.application_release) == (application_id, release):
                return
            pipeline.emr_application_id, pipeline.application_release = application_id, release
            touch(pipeline, self._store.now())

    def being_deprovisioned(self) -> builtins.list[Pipeline]:
        """Pipelines whose removal has begun and is not finished (not archived yet)."""
        stmt = (
            select(Pipeline)
            .where(Pipeline.deprovision_reason.is_not(None), Pipeline.state != PipelineState.ARCHIVED)
            .order_by(Pipeline.id)
        )
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def awaiting_release(self) -> builtins.list[Pipeline]:
        """Pipelines (archived ones too) whose EMR application is still to be deleted."""
        stmt = select(Pipeline).where(Pipeline.application_release.is_not(None)).order_by(Pipeline.id)
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def released(self, pipeline_id: str, application_id: str) -> None:
        """The application is gone: nothing is left to release (unless another was recorded since)."""
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            if pipeline.application_release == application_id:
                pipeline.application_release = None
                touch(pipeline, self._store.now())

    def commit_watermark(
        self,
        pipeline_id: str,
        run_id: str,
        high: str | None,
        final_run_fields: Mapping[str, Any] | None = None,
    ) -> tuple[Pipeline, Run]:
        """Finish ``run_id`` and, if ``high`` is given, make it the pipeline's watermark: atomically.

        ``final_run_fields`` may hold ``state`` (default ``succeeded``) plus any field
        ``RunRepository.transition`` accepts. Only a succeeded run may move the watermark; a
        ``skipped`` run passes ``high=None``. ``last_published_at`` moves when rows were confirmed.
        """
        fields = dict(final_run_fields or {})
        to_state = RunState(fields.pop("state", RunState.SUCCEEDED))
        now = self._store.now()
        with self._store.session() as session:
            # Pipeline before run, always, so concurrent commits cannot deadlock.
            pipeline = lock_pipeline(session, pipeline_id)
            run = lock_run(session, run_id)
            if run.pipeline_id != pipeline_id:
                raise InvalidTransition(run_id, run.state, to_state, f"it does not belong to {pipeline_id!r}")
            if high is not None:
                if to_state is not RunState.SUCCEEDED:
                    raise InvalidTransition(run_id, run.state, to_state, "only success advances a watermark")
                pipeline.watermark_value = high
                fields.setdefault("watermark_high", high)
            session.flush()  # the watermark write is in the transaction before the run is judged
            apply_transition(run, to_state, fields, now)
            # an unknown count may have published: the pipeline is not idle for it
            if to_state is RunState.SUCCEEDED and run.confirmed != 0:
                pipeline.last_published_at = now
            touch(pipeline, now)
        return pipeline, run

    def claim_slot(
        self,
        pipeline_id: str,
        *,
        now: datetime,
        next_run_at: datetime,
        run_fields: Mapping[str, Any],
        skipped_reason: str | None = None,
        failed_reason: str | None = None,
    ) -> Run | None:
        """Fire the pipeline's due slot once: create its run and move ``next_run_at`` on, atomically.

        Returns None, creating nothing, when the slot is not due (another daemon fired it first), the
        pipeline is not active, or one of its runs is still going (the slot is then skipped, never run
        twice at once). With ``skipped_reason`` the run is recorded as ``skipped`` (no new data); with
        ``failed_reason`` as ``failed`` (the slot could not even be planned), so a stalled pipeline shows.
        """
        with self._store.session() as session:
            pipeline = lock_pipeline(session, pipeline_id)
            if pipeline.state != PipelineState.ACTIVE:
                return None
            slot = pipeline.next_run_at
            if slot is not None and slot > now:
                return None
            pipeline.next_run_at = next_run_at
            touch(pipeline, now)
            busy = session.scalars(
                select(Run.id).where(Run.pipeline_id == pipeline_id, Run.state.not_in(TERMINAL_RUN_STATES))
            ).first()
            if busy is not None:
                return None
            run = Run(
                **new_run_fields(run_fields, now),
                id=new_run_id(),
                kind=RunKind.PIPELINE,
                pipeline_id=pipeline_id,
                scheduled_for=slot or now,
                state=(
                    RunState.FAILED
                    if failed_reason
                    else RunState.SKIPPED
                    if skipped_reason
                    else RunState.QUEUED
                ),
                failure_reason=failed_reason or skipped_reason,
                failure_kind=FailureKind.PLAN if failed_reason else None,
                ended_at=now if failed_reason or skipped_reason else None,
            )
            session.add(run)
        return run

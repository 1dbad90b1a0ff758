"""Scheduled incremental pipelines: create, inspect, pause/resume/unschedule, and fire a slot.

A slot's run publishes `(committed - lookback, high]`, where `high` is the watermark column's maximum
read when the slot fires: rows arriving during the run wait for the next one. Nothing newer than the
committed mark means a `skipped` run and no Spark job. The watermark moves only when the run succeeds,
in the same transaction as its final state (`PipelineRepository.commit_watermark`).

A pipeline scheduled with `incremental=snapshot` follows an Iceberg or Delta table's commits instead:
its committed mark is the last snapshot it published, and a slot publishes the rows the commits since
then appended, up to the snapshot current when it fires. A commit that deleted or changed rows stops
it with the commit named (`daemon.core.commits`), before any job, the mark where it was.

A create may carry an Idempotency-Key, as a replay's does: the same key with the same command gets the
first pipeline back, with another command a 422. Two racing creates with one key (two bot replicas, a
double click) are decided by the store's unique constraint; the loser deletes the topic it made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.exc import IntegrityError

from daemon.config.settings import Settings
from daemon.core.authz import may_manage_pipeline, may_use_source, vouched_fields_refused
from daemon.core.commits import appends, refusal
from daemon.core.errors import (
    BadRequest,
    CapReached,
    Conflict,
    Forbidden,
    LivePipelineExists,
    ReplayError,
    ReusedIdempotencyKey,
    StaleUpdate,
)
from daemon.core.grammar import TRANSACTIONAL_DLQ, ScheduleCommand, render
from daemon.core.grammar.predicates import check_predicate, render_predicate
from daemon.core.ids import new_pipeline_id
from daemon.core.run_options import PipelineOptions, RunOptions, WindowKind
from daemon.core.schedules import check_schedule, schedule_text
from daemon.core.states import PipelineState
from daemon.core.watermarks import encode, has_new_data, low_bound
from daemon.usecases.audit import Audit
from daemon.usecases.catalog import Catalog, Source, TableRef
from daemon.usecases.dead_letters import dead_letter_options
from daemon.usecases.fire_times import next_fire
from daemon.usecases.live_approval import check_live_approval
from daemon.usecases.ports import Clusters, Notifier, TableStats, TopicAdmin
from daemon.usecases.table_runtime import check_table_runtime
from daemon.usecases.wire import pipeline_out, run_out
from store import Store
from store.models import Pipeline, Run

log = structlog.get_logger(__name__)

NO_NEW_DATA = "no new data"
BUSY = "the platform is busy"


@dataclass(frozen=True)
class PipelineDetail:
    pipeline: Pipeline
    runs: list[Run]


def slot_options(
    pipeline: Pipeline, source: Source, *, snapshot: str | None = None, table_metadata: str | None = None
) -> RunOptions:
    """A scheduled run's options: its pipeline's, with the source's defaults resolved at the slot, and
    the table version the slot's high mark was read at (the run and its reconciles read that one)."""
    options = pipeline.options
    return RunOptions(
        window=WindowKind.COMMITS if options.incremental == "snapshot" else WindowKind.WATERMARK,
        topic_mode=options.topic_mode,
        headers=dict(options.headers),
        watch=options.watch,
        where=options.where,  # the ids each run's reconcile expects are the ones it kept
        snapshot=snapshot,
        table_metadata=table_metadata,
        **dead_letter_options(options.on_error or source.on_error, source.name),
        delivery=source.delivery,  # the source's, as at each slot (a pipeline has no option of its own)
        cluster=options.cluster,  # where its topic is, whatever the source says now
    )


def pipeline_topic(source: str, pipeline_id: str) -> str:
    return f"replay.{source}.{pipeline_id}"


class _AlreadyCreated(Exception):
    """Internal: a create with the same Idempotency-Key won the race."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__(pipeline.id)
        self.pipeline = pipeline


def _same_request(pipeline: Pipeline, request: str, key: str) -> Pipeline:
    """The pipeline a retried create gets back, once it is sure the retry asks for the same thing."""
    first = pipeline.options.request
    if first is not None and first != request:
        raise ReusedIdempotencyKey(
            f"Idempotency-Key '{key}' was used for `{first}` (pipeline {pipeline.id}); this request is "
            f"`{request}`: send a new key for a new request"
        )
    return pipeline


class PipelineService:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        topics: Clusters[TopicAdmin],
        table_stats: TableStats,
        notifier: Notifier,
        clock: Callable[[], datetime],
        wake_watcher: Callable[[], None] = lambda: None,
        deprovision: Callable[[Pipeline, str], Pipeline],
        wake_scheduler: Callable[[], None] = lambda: None,
    ) -> None:
        """`deprovision(pipeline, reason)`: the janitor's removal, begun and not waited for."""
        self._deprovision = deprovision
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._topics = topics
        self._table_stats = table_stats
        self._notifier = notifier
        self._clock = clock
        self._wake_watcher = wake_watcher
        self._wake_scheduler = wake_scheduler
        self._audit = Audit(store)

    # -- helpers ------------------------------------------------------------------------------

    def get_pipeline(self, pipeline_id: str) -> Pipeline:
        return self._store.pipelines.get(pipeline_id)

    # -- creating -----------------------------------------------------------------------------

    def schedule(
        self,
        actor: str,
        command: ScheduleCommand,
        *,
        confirm_live: bool = False,
        slack_channel: str | None = None,
        idempotency_key: str | None = None,
        approved_by: str | None = None,
        vouched: bool = False,
    ) -> tuple[Pipeline, bool]:
        """Validate, provision the topic, record the pipeline, announce it. Returns (pipeline, created).

        ``slack_channel`` and ``approved_by`` (the second owner a live pipeline of a two-owner source
        needs) are taken only when ``vouched`` (the service credential: the bot saw the click)."""
        refusal = vouched_fields_refused(
            vouched=vouched, approved_by=approved_by, slack_channel=slack_channel
        )
        if refusal is not None:
            self._audit.refuse(actor, "schedule", command.source, Forbidden(refusal))
        if approved_by is not None:  # every approval is audited under the approver, refused ones too
            self._audit.refusing(
                approved_by,
                "approve",
                command.source,
                lambda: check_live_approval(
                    actor, self._catalog.get(command.source), approved_by, what="live pipeline"
                ),
                requester=actor,
            )
        request = render(command)  # canonical: the same command always renders the same
        if idempotency_key is not None:
            existing = self._store.pipelines.find_by_idempotency_key(actor, idempotency_key)
            if existing is not None:
                return _same_request(existing, request, idempotency_key), False

        def work() -> Pipeline:
            source = self._catalog.get(command.source)
            if not may_use_source(actor, source_owners=source.owners, admins=self._settings.admins):
                raise Forbidden(f"only the owners of '{source.name}' or a platform admin may schedule it")
            self._check_pipeline_caps(actor, source.name)
            if source.delivery == "transactional" and command.on_error == "dlq":  # its runs take the source's
                raise BadRequest(TRANSACTIONAL_DLQ)
            if command.incremental == "snapshot":
                check_table_runtime(source, self._settings)
                refused = self._table_stats.follow_refusal(source.table)
                if refused is not None:
                    raise BadRequest(f"'{source.name}' cannot be followed by its commits: {refused}")
                with self._catalog.blaming_table(source):
                    columns = self._table_stats.column_names(source.table)
                source.check_columns(columns, catalog_path=self._catalog.path)
            else:
                self._check_watermark(source, command)
            if command.where is not None:  # each run reads the table: the filter must fit it now
                kinds = self._table_stats.column_kinds(source.table)
                check_predicate(
                    command.where, kinds, encrypted=frozenset(source.encrypted_columns), source=source.name
                )
            schedule = schedule_text(every_seconds=command.every_seconds, cron=command.cron)
            check_schedule(schedule)  # a bad cron is refused here, before anything exists
            next_fire(schedule, self._clock())  # and so is one that never fires (`0 0 31 4 *`)
            tps = command.tps if command.tps is not None else self._settings.default_tps
            if tps > self._settings.max_tps:
                raise BadRequest(f"tps={tps} is above this platform's maximum of {self._settings.max_tps}")
            pipeline_id = new_pipeline_id()
            if command.topic == "live":
                topics = self._topics[source.cluster]
                if source.live_topic is None or topics.describe(source.live_topic) is None:
                    raise BadRequest(
                        f"source '{source.name}' has no live topic on the {source.cluster} cluster; "
                        "use topic=auto"
                    )
                if not confirm_live:
                    raise Conflict(
                        f"publishing into the live topic '{source.live_topic}' needs an explicit "
                        "confirmation (confirm_live=true)"
                    )
                check_live_approval(actor, source, approved_by, what="live pipeline")
                topic, created = source.live_topic, False
            else:
                topic, created = pipeline_topic(source.name, pipeline_id), True
                partitions = self._live_partitions(source)
                self._topics[source.cluster].create(
                    topic,
                    partitions=partitions,
                    config={"retention.ms": str(self._settings.topic_retention_ms)},
                )
            try:
                return self._store.pipelines.create(
                    pipeline_id=pipeline_id,
                    source=source.name,
                    schedule=schedule,
                    watermark_column=command.watermark,
                    topic=topic,
                    topic_created=created,
                    tps=tps,
                    created_by=actor,
                    owners=sorted({actor, *source.owners}),
                    lookback_seconds=command.lookback_seconds,
                    options=PipelineOptions(
                        topic_mode=command.topic,
                        headers=dict(command.headers),
                        on_error=command.on_error,  # None: the source's default at each run
                        watch=tuple(command.watch),  # each run watches these groups drain
                        request=request,  # what an Idempotency-Key stands for
                        incremental=command.incremental,
                        where=None if command.where is None else render_predicate(command.where),
                        cluster=source.cluster,
                    ),
                    idle_after_days=command.idle_after_days,
                    slack_channel=slack_channel,
                    idempotency_key=idempotency_key,
                    live=command.topic == "live",
                )
            except Exception as exc:
                if created:
                    self._topics[source.cluster].delete(topic)
                # a double click racing itself loses on the key or, into a live topic, on the live check
                if isinstance(exc, IntegrityError | LivePipelineExists) and idempotency_key is not None:
                    existing = self._store.pipelines.find_by_idempotency_key(actor, idempotency_key)
                    if existing is not None:
                        raise _AlreadyCreated(existing) from exc
                raise

        try:
            pipeline = self._audit.refusing(actor, "schedule", command.source, work)
        except _AlreadyCreated as raced:
            assert idempotency_key is not None, "only a keyed request can lose a race to itself"
            return _same_request(raced.pipeline, request, idempotency_key), False
        pipeline = self._store.pipelines.update(
            pipeline.id, next_run_at=next_fire(pipeline.schedule, self._clock())
        )
        self._audit.accepted(
            actor, "schedule", pipeline.id, source=pipeline.source, schedule=pipeline.schedule
        )
        if approved_by is not None:
            self._audit.accepted(approved_by, "approve", pipeline.id, requester=actor, source=pipeline.source)
        thread = self._notifier.pipeline_scheduled(pipeline_out(pipeline))
        if thread is not None:
            pipeline = self._store.pipelines.update(pipeline.id, slack_ts=thread)
        self._wake_scheduler()
        return pipeline, True

    def _check_watermark(self, source: Source, command: ScheduleCommand) -> None:
        """The watermark column is the source's, the table has it, and a lookback can move it back."""
        if source.watermark_column is None:
            raise BadRequest(f"source '{source.name}' declares no watermark column in the catalog")
        if command.watermark != source.watermark_column:
            raise BadRequest(
                f"watermark={command.watermark} is not the watermark column of '{source.name}' "
                f"in the catalog (it is '{source.watermark_column}')"
            )
        check_table_runtime(source, self._settings)
        with self._catalog.blaming_table(source):
            columns = self._table_stats.column_names(source.table)
        source.check_columns(columns, catalog_path=self._catalog.path)
        if command.lookback_seconds:
            current = self._table_stats.max_value(source.table, command.watermark)
            if isinstance(current, int):  # a sequence number cannot be moved back by a duration
                raise BadRequest(
                    f"lookback needs a timestamp watermark column; '{command.watermark}' holds integers"
                )

    def _check_pipeline_caps(self, actor: str, source: str) -> None:
        """Every pipeline holds a topic and fires on its own: one person, or one source, has a few."""
        settings = self._settings
        scheduled = [p for p in self._store.pipelines.list() if p.state != PipelineState.ARCHIVED]
        if actor not in settings.admins:
            mine = sum(1 for p in scheduled if p.created_by == actor)
            if mine >= settings.max_pipelines_per_user:
                raise CapReached(
                    f"<@{actor}> already has {mine} pipelines scheduled, the most one person may have "
                    f"(REPLAY_MAX_PIPELINES_PER_USER={settings.max_pipelines_per_user}): unschedule one first"
                )
        of_source = sum(1 for p in scheduled if p.source == source)
        if of_source >= settings.max_pipelines_per_source:
            raise CapReached(
                f"'{source}' already has {of_source} pipelines scheduled, the most one source may have "
                f"(REPLAY_MAX_PIPELINES_PER_SOURCE={settings.max_pipelines_per_source})"
            )

    def _busy(self) -> str | None:
        """Why a pipeline's slot must wait: the runs not kept for people's replays are all taken."""
        settings = self._settings
        open_to_pipelines = settings.max_active_runs - settings.reserved_runs
        unfinished = self._store.runs.unfinished_count()
        if unfinished < open_to_pipelines:
            return None
        return (
            f"{BUSY}: {unfinished} unfinished runs, and the last {settings.reserved_runs} of "
            f"REPLAY_MAX_ACTIVE_RUNS={settings.max_active_runs} are kept for replays people ask for; "
            "the next slot reads from the same watermark"
        )

    def _live_partitions(self, source: Source) -> int:
        live = self._topics[source.cluster].describe(source.live_topic) if source.live_topic else None
        return live.partitions if live is not None else 1

    # -- reading ------------------------------------------------------------------------------

    def list(self, *, owner: str | None = None, state: str | None = None) -> list[Pipeline]:
        return self._store.pipelines.list(owner=owner, state=state)

    def detail(self, pipeline_id: str, *, runs: int = 5) -> PipelineDetail:
        pipeline = self.get_pipeline(pipeline_id)
        recent, _ = self._store.runs.list(pipeline_id=pipeline_id, limit=runs)
        return PipelineDetail(pipeline=pipeline, runs=recent)

    # -- changing -----------------------------------------------------------------------------

    def _managed(self, actor: str, pipeline_id: str, action: str) -> Pipeline:
        """The pipeline, once `actor` may `action` it: a current owner of its source or an admin, and
        the pipeline not unscheduled."""
        pipeline = self.get_pipeline(pipeline_id)
        owners = self._catalog.owners_of(pipeline.source)
        if not may_manage_pipeline(actor, owners=owners, admins=self._settings.admins):
            raise Forbidden(f"only the owners of pipeline {pipeline_id} or an admin may {action} it")
        if pipeline.state == PipelineState.ARCHIVED:
            raise Conflict(f"pipeline {pipeline_id} is unscheduled; it cannot be changed")
        return pipeline

    def _change(
        self,
        actor: str,
        action: str,
        pipeline_id: str,
        state: PipelineState,
        approved_by: str | None = None,
    ) -> Pipeline:
        def work() -> Pipeline:
            pipeline = self._managed(actor, pipeline_id, action)
            resuming = state == PipelineState.ACTIVE and pipeline.state == PipelineState.PAUSED
            if resuming and pipeline.options.topic_mode == "live":
                source = self._catalog.get(pipeline.source)
                check_live_approval(actor, source, approved_by, what="live pipeline")
            changed = self._store.pipelines.set_state(pipeline_id, state)
            if state == PipelineState.ACTIVE:
                changed = self._store.pipelines.update(
                    pipeline_id, next_run_at=next_fire(changed.schedule, self._clock())
                )
            return changed

        pipeline = self._audit.refusing(actor, action, pipeline_id, work)
        self._audit.accepted(actor, action, pipeline_id)
        if approved_by is not None:
            self._audit.accepted(approved_by, "approve", pipeline_id, requester=actor, source=pipeline.source)
        self._wake_scheduler()
        return pipeline

    def pause(self, actor: str, pipeline_id: str) -> Pipeline:
        return self._change(actor, "pause", pipeline_id, PipelineState.PAUSED)

    def resume(
        self, actor: str, pipeline_id: str, *, approved_by: str | None = None, vouched: bool = False
    ) -> Pipeline:
        """Active again; a live pipeline of a two-owner source needs a second owner's approval again."""
        refusal = vouched_fields_refused(vouched=vouched, approved_by=approved_by)
        if refusal is not None:
            self._audit.refuse(actor, "resume", pipeline_id, Forbidden(refusal))
        if approved_by is not None:  # every approval is audited under the approver, refused ones too
            source = self._catalog.get(self.get_pipeline(pipeline_id).source)
            self._audit.refusing(
                approved_by,
                "approve",
                pipeline_id,
                lambda: check_live_approval(actor, source, approved_by, what="live pipeline"),
                requester=actor,
            )
        return self._change(actor, "resume", pipeline_id, PipelineState.ACTIVE, approved_by)

    def unschedule(self, actor: str, pipeline_id: str, *, confirm: bool) -> Pipeline:
        """Stop the pipeline for good through the janitor's de-provisioning: paused at once, its run in
        flight cancelled, its own topic and EMR application deleted, its owners told, then archived.
        The answer comes once the removal has begun; what must wait (a job stopping) is finished by
        the janitor within seconds, a restart included. Asking again while it goes on is harmless."""
        if not confirm:
            self.get_pipeline(pipeline_id)
            raise Conflict(
                f"unscheduling pipeline {pipeline_id} needs an explicit confirmation (confirm=true)"
            )

        pipeline = self._audit.refusing(
            actor, "unschedule", pipeline_id, lambda: self._managed(actor, pipeline_id, "unschedule")
        )
        self._audit.accepted(actor, "unschedule", pipeline_id)
        try:
            removing = self._deprovision(pipeline, f"unscheduled by <@{actor}>")
        except StaleUpdate:  # an idle answer landed between the read and the pause: read it again
            removing = self._deprovision(self.get_pipeline(pipeline_id), f"unscheduled by <@{actor}>")
        self._wake_scheduler()
        return removing

    def run_now(self, actor: str, pipeline_id: str) -> Pipeline:
        """Make the next slot due now (the scheduler fires it within a second)."""

        def work() -> Pipeline:
            pipeline = self.get_pipeline(pipeline_id)
            owners = self._catalog.owners_of(pipeline.source)
            if not may_manage_pipeline(actor, owners=owners, admins=self._settings.admins):
                raise Forbidden(f"only the owners of pipeline {pipeline_id} or an admin may run it")
            if pipeline.state != PipelineState.ACTIVE:
                raise Conflict(f"pipeline {pipeline_id} is {pipeline.state}; resume it first")
            return self._store.pipelines.update(pipeline_id, next_run_at=self._clock())

        pipeline = self._audit.refusing(actor, "run-now", pipeline_id, work)
        self._audit.accepted(actor, "run-now", pipeline_id)
        self._wake_scheduler()
        return pipeline

    # -- firing -------------------------------------------------------------------------------

    def fire(self, pipeline_id: str) -> Run | None:
        """Fire the pipeline's slot if it is due; the high mark is read before the slot is claimed."""
        pipeline = self._store.pipelines.get(pipeline_id)
        now = self._clock()
        if pipeline.state != PipelineState.ACTIVE or (pipeline.next_run_at and pipeline.next_run_at > now):
            return None
        try:
            return self._fire_slot(pipeline, now)
        except Exception as exc:  # recorded and told, not only logged: a pipeline never stalls silently
            why = str(exc) if isinstance(exc, ReplayError) else f"{type(exc).__name__}: {exc}"
            return self._fail_slot(pipeline, now, f"the slot could not start: {why}")

    def _fail_slot(self, pipeline: Pipeline, now: datetime, reason: str) -> Run | None:
        run = self._store.pipelines.claim_slot(
            pipeline.id,
            now=now,
            next_run_at=next_fire(pipeline.schedule, now),
            run_fields={
                "source": pipeline.source,
                "topic": pipeline.topic,
                "tps": pipeline.tps,
                "requester": pipeline.created_by,
                "watermark_column": pipeline.watermark_column,
                "slack_channel": pipeline.slack_channel,
                "slack_ts": pipeline.slack_ts,
                "options": RunOptions(cluster=pipeline.options.cluster),
            },
            failed_reason=reason,
        )
        log.warning("pipeline slot failed", pipeline_id=pipeline.id, reason=reason, recorded=run is not None)
        if run is not None and self._store.notifications.record_once(
            f"run:{run.id}:final", run_id=run.id, kind="final"
        ):
            try:
                self._notifier.run_finished(run_out(run))
            except ReplayError as exc:
                log.warning("notification not delivered", run_id=run.id, error=str(exc))
        return run

    def _fire_slot(self, pipeline: Pipeline, now: datetime) -> Run | None:
        pipeline_id = pipeline.id
        source = self._catalog.get(pipeline.source)
        # An Iceberg or Delta table is pinned: the high mark is read at one version, and the run reads
        # that version, so a commit landing during the run waits, whole, for the next slot.
        table_metadata = self._table_stats.metadata_file(source.table)  # the one ask of a catalog
        table = source.table.read_at(table_metadata)
        snapshot = self._table_stats.snapshot(table)
        fields: dict[str, Any] = {
            "source": pipeline.source,
            "topic": pipeline.topic,
            "tps": pipeline.tps,
            "requester": pipeline.created_by,
            "watermark_column": pipeline.watermark_column,
            "options": slot_options(pipeline, source, snapshot=snapshot, table_metadata=table_metadata),
            "slack_channel": pipeline.slack_channel,
            "slack_ts": pipeline.slack_ts,
        }
        following = next_fire(pipeline.schedule, now)
        if (busy := self._busy()) is not None:  # skipped, not failed: nothing is lost, the watermark waits
            run = self._store.pipelines.claim_slot(
                pipeline_id, now=now, next_run_at=following, run_fields=fields, skipped_reason=busy
            )
            log.info("pipeline slot: the platform is busy", pipeline_id=pipeline_id, fired=run is not None)
            return run
        if pipeline.watermark_column is None:
            selected = self._appended_since(pipeline, source, table, snapshot)
        else:
            selected = self._past_watermark(pipeline, table, snapshot)
        if selected is None:
            run = self._store.pipelines.claim_slot(
                pipeline_id, now=now, next_run_at=following, run_fields=fields, skipped_reason=NO_NEW_DATA
            )
            log.info("pipeline slot: no new data", pipeline_id=pipeline_id, fired=run is not None)
            return run
        fields["watermark_low"], fields["watermark_high"] = selected
        if pipeline.watermark_column is None:
            fields["window_label"] = f"commits ({selected[0] or '-inf'}, {selected[1]}]"
        else:
            fields["window_label"] = f"({selected[0] or '-inf'}, {selected[1]}]"
        run = self._store.pipelines.claim_slot(pipeline_id, now=now, next_run_at=following, run_fields=fields)
        if run is not None:
            log.info(
                "pipeline slot fired", pipeline_id=pipeline_id, run_id=run.id, high=fields["watermark_high"]
            )
            self._wake_watcher()
        return run

    def _past_watermark(
        self, pipeline: Pipeline, table: TableRef, snapshot: str | None
    ) -> tuple[str | None, str] | None:
        """The slot's `(low, high]` of the watermark column; None when nothing is newer than the mark."""
        assert pipeline.watermark_column is not None, "a watermark pipeline has its column"
        high = self._table_stats.max_value(table, pipeline.watermark_column, snapshot=snapshot)
        if not has_new_data(high, pipeline.watermark_value):
            return None
        assert high is not None
        return low_bound(pipeline.watermark_value, pipeline.lookback_seconds, high), encode(high)

    def _appended_since(
        self, pipeline: Pipeline, source: Source, table: TableRef, snapshot: str | None
    ) -> tuple[str | None, str] | None:
        """The slot's commits `(committed, current]`; None when none appended rows. The first slot
        publishes the whole table at its current snapshot. A commit that was not an append is refused
        here (BadRequest: the slot fails with it named, the committed snapshot stays)."""
        committed = pipeline.watermark_value
        if snapshot is None or snapshot == committed:
            return None
        if committed is None:
            return None, snapshot
        commits = self._table_stats.commits(table, after=committed, upto=snapshot)
        refused = refusal(commits, source=source.name, committed=committed)
        if refused is not None:
            raise BadRequest(refused)
        return (committed, snapshot) if appends(commits) else None

"""Store rows and use-case results as the wire contract: the one place a `Run` or a `Pipeline` becomes
what the API answers and what the notifiers render.

The contract cannot import the store, so this mapping lives on the daemon's side of it. A run keeps
both row counts apart: the plan's (from metadata, known at once) and the job's own (once it reported).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from daemon.contract.models import (
    IdlePipelineOut,
    ListedIdOut,
    OverlapOut,
    PipelineDetailOut,
    PipelineOut,
    PlanOut,
    RateChangeOut,
    RateSeriesOut,
    ReconcileOut,
    RunOut,
    SourceOut,
    VerdictIdsOut,
)
from daemon.core.grammar.predicates import render_predicate
from daemon.core.rate_shape import targets
from daemon.core.reconcile import IdList
from daemon.core.run_control import changes_from, latest_rate
from daemon.core.states import PipelineState, RunKind, RunState
from daemon.usecases.drain_wire import drain_deadline, drain_out
from store.models import Pipeline, Run

if TYPE_CHECKING:  # type names only: the use cases import this module, so no import back at run time
    from daemon.usecases.pipeline_service import PipelineDetail
    from daemon.usecases.replays import Plan, ReplayService, SourceTable


def run_out(run: Run, *, queue_position: int | None = None) -> RunOut:
    """`queue_position`: a queued run's place in line behind the running jobs
    (`ReplayService.queue_positions`), when the caller knows it."""
    options = run.options
    changes = changes_from(run.control)
    rate = latest_rate(run.tps, changes)
    return RunOut(
        id=run.id,
        kind=RunKind(run.kind),
        state=RunState(run.state),
        source=run.source,
        window=run.window_label,
        topic=run.topic,
        tps=run.tps,
        current_tps=rate.tps,
        delivery=options.delivery,
        cluster=options.cluster,
        where=options.where,
        repair_of=options.repair_of,
        redrive_of=options.redrive_of,
        fields=list(options.fields),
        keys_file=options.keys_file,
        ramp_s=options.ramp_s,
        max_mb=options.max_mb,
        speed=options.speed,
        slid_s=_slid_s(run),
        paused=rate.paused,
        rate_changes=[
            RateChangeOut(at=datetime.fromtimestamp(c.at, tz=UTC), tps=c.tps, paused=c.paused)
            for c in changes
        ],
        requester=run.requester,
        rows_planned=options.planned_rows,
        snapshot=options.snapshot,
        listed_files=None if options.files is None else len(options.files),
        rows_selected=run.rows_selected,
        confirmed=run.confirmed,
        achieved_tps=run.achieved_tps,
        failed_tasks=run.failed_tasks,
        duplicates=run.duplicates,
        dead_lettered=run.dead_lettered,
        dlq_topic=options.dlq_topic,
        failure_reason=run.failure_reason,
        failure_kind=run.failure_kind,
        on_topic_at_least=run.on_topic_at_least,
        behind_schedule_s=run.behind_schedule_s,
        bytes_held_s=run.bytes_held_s,
        transactions=run.transactions,
        longest_transaction_s=run.longest_transaction_s,
        resumed=run.resumed,
        erasures=options.erasures,
        suppressed=run.suppressed,
        erasures_as_of=run.erasures_as_of or _pinned(options.erasures_as_of),
        partition_skew=run.partition_skew,
        reconcile=ReconcileOut.model_validate(run.reconcile) if run.reconcile else None,
        window_start=run.window_start,
        window_end=run.window_end,
        window_kind=options.window,
        window_relative=options.relative,
        topic_mode=options.topic_mode,
        has_series=bool(run.rate_series),
        reconciles=run.reconciles,
        pipeline_id=run.pipeline_id,
        created_at=run.created_at,
        started_at=run.started_at,
        ended_at=run.ended_at,
        slack_channel=run.slack_channel,
        slack_ts=run.slack_ts,
        slack_progress_ts=run.slack_progress_ts,
        queue_position=queue_position if run.state == RunState.QUEUED else None,
        eta_s=options.planned_eta_s,
        watch=drain_out(run),
        watch_deadline=drain_deadline(run),
    )


def _pinned(as_of: str | None) -> datetime | None:
    """The erasure list's version a run was planned to honour (before its job reported the one it did)."""
    return None if as_of is None else datetime.fromisoformat(as_of)


def _slid_s(run: Run) -> float | None:
    """A shaped run's slide under its ceiling, as its job reported it with its series."""
    value = (run.rate_series or {}).get("slid_s")
    return float(value) if isinstance(value, int | float) else None


def rate_series_out(run: Run) -> RateSeriesOut | None:
    """The run's confirmed deliveries per second, as the job measured them; None when it has none."""
    series = run.rate_series
    if not series or not series.get("counts"):
        return None
    start, counts = int(series["start"]), [int(value) for value in series["counts"]]
    due = series.get("targets")  # a shaped run's: what its own times put in each second
    return RateSeriesOut(
        start=datetime.fromtimestamp(start, tz=UTC),
        counts=counts,
        target_tps=run.tps,
        targets=[float(value) for value in due]
        if isinstance(due, list)
        else targets(start, len(counts), run.tps, changes_from(run.control), run.options.ramp_s),
    )


def pipeline_out(pipeline: Pipeline) -> PipelineOut:
    return PipelineOut(
        id=pipeline.id,
        source=pipeline.source,
        schedule=pipeline.schedule,
        state=PipelineState(pipeline.state),
        incremental=pipeline.options.incremental,
        watermark_column=pipeline.watermark_column,
        where=pipeline.options.where,
        watermark=pipeline.watermark_value,
        lookback_seconds=pipeline.lookback_seconds,
        tps=pipeline.tps,
        topic=pipeline.topic,
        topic_mode=pipeline.options.topic_mode,
        cluster=pipeline.options.cluster,
        owners=list(pipeline.owners or ()),
        next_run_at=pipeline.next_run_at,
        last_published_at=pipeline.last_published_at,
        created_at=pipeline.created_at,
        slack_channel=pipeline.slack_channel,
        slack_ts=pipeline.slack_ts,
        deprovision_reason=pipeline.deprovision_reason if pipeline.state != PipelineState.ARCHIVED else None,
    )


def pipeline_detail_out(detail: PipelineDetail) -> PipelineDetailOut:
    return PipelineDetailOut(
        **dict(pipeline_out(detail.pipeline)), runs=[run_out(run) for run in detail.runs]
    )


def idle_pipeline_out(pipeline: Pipeline, deadline: datetime) -> IdlePipelineOut:
    return IdlePipelineOut(**dict(pipeline_out(pipeline)), deadline=deadline)


def plan_out(plan: Plan) -> PlanOut:
    return PlanOut(
        source=plan.source,
        window=plan.window,
        window_start=plan.window_start,
        window_end=plan.window_end,
        rows=plan.rows,
        tps=plan.tps,
        ramp_s=plan.ramp_s,
        max_mb=plan.max_mb,
        speed=plan.speed,
        where=None if plan.where is None else render_predicate(plan.where),
        fields=list(plan.fields),
        keys_file=plan.keys_file,
        keys_count=len(plan.keys.keys) if plan.keys is not None else None,
        peak_tps=round(plan.shaped.peak, 1) if plan.shaped is not None else None,
        slid_s=round(plan.shaped.slid_s, 1) if plan.shaped is not None else None,
        eta_s=plan.eta.total_s,
        eta_startup_s=plan.eta.startup_s,
        warm=plan.eta.warm,
        eta_publish_s=plan.eta.publish_s,
        eta_finish_s=plan.eta.finish_s,
        eta_queue_s=plan.eta.queue_s,
        runs_ahead=plan.eta.ahead,
        topic=plan.topic,
        topic_mode="live" if plan.topic_mode == "live" else "auto",
        partitions=plan.partitions,
        workers=plan.workers,
        headers=dict(plan.headers),
        ordering="none" if plan.ordering == "none" else "entity",
        timestamp="event" if plan.timestamp == "event" else "replay",
        on_error="dlq" if plan.on_error == "dlq" else "fail",
        delivery=plan.delivery,
        cluster=plan.cluster,
        overlapping=[
            OverlapOut(run_id=o.run_id, requester=o.requester, state=RunState(o.state), window=o.window)
            for o in plan.overlapping
        ],
        live_approvals=plan.live_approvals,
        rewind_instead=plan.rewind_instead,
        snapshot=plan.snapshot,
        listed_files=None if plan.files is None else len(plan.files),
        erasures=plan.erasures_path,
        erased_keys=plan.erasures.keys if plan.erasures else None,
        erasures_as_of=plan.erasures.as_of if plan.erasures else None,
    )


def source_out(listed: SourceTable) -> SourceOut:
    source = listed.source
    return SourceOut(
        name=source.name,
        description=source.description,
        live_topic=source.live_topic,
        cluster=source.cluster,
        owners=list(source.owners),
        live_approvals=source.live_approvals,
        partition_column=source.partition_column,
        watermark_column=source.watermark_column,
        table_format=source.table.format,
        value_format=source.value_format,
        retention=source.retention,
        snapshot=listed.snapshot,
        snapshot_unreadable=listed.unreadable,
    )


def verdict_ids_out(
    run_id: str, kind: IdList, service: ReplayService, *, after: int, limit: int
) -> VerdictIdsOut:
    """One page of a run's verdict list (its places run 0..listed-1, so the last page is known)."""
    listed = service.listed(run_id)[kind]
    rows = service.listed_page(run_id, kind, after=after, limit=limit)
    last = rows[-1].n if rows else None
    return VerdictIdsOut(
        run_id=run_id,
        kind=kind,
        listed=listed,
        ids=[ListedIdOut(event_id=row.event_id, records=row.copies) for row in rows],
        next_after=last if last is not None and last + 1 < listed else None,
    )

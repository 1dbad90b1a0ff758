"""What a message shows about a run or a pipeline, built from the wire contract and nothing else.

`RunView.of(RunOut)` and `PipelineView.of(PipelineOut)` are the one way from the contract to a display,
so a run looks the same in its thread (posted by the daemon's notifier) and in `/replay status`
(answered by the bot). The store's rows reach here only through `daemon.usecases.wire`.

Which row count a run shows: the job's own count of selected rows once it reported it, the plan's
count (from table metadata) until then, and "unknown" when neither exists (a scheduled run before its
job reported); never 0 for a count nobody knows. The final word is always the broker-confirmed count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from daemon.contract.models import PipelineOut, ReconcileOut, RunOut


@dataclass(frozen=True)
class RunView:
    """A run as messages show it; `rate` (the current rate) comes from the watcher's last samples."""

    run_id: str
    source: str
    window: str
    topic: str
    tps: int
    requester: str
    state: str
    rows: int | None = None  # the best count known (`RunOut.rows`); None: unknown
    rows_selected: int | None = None  # the job's own count, once it reported it
    confirmed: int = 0
    dead_lettered: int | None = None  # set aside on `dlq_topic` (on_error=dlq); None: unknown
    dlq_topic: str | None = None
    rate: float | None = None
    achieved_tps: float | None = None
    duration_s: float | None = None
    reason: str | None = None
    failure_kind: str | None = None  # `FailureKind`: launch, lost, job or plan; None unless it failed
    channel: str | None = None
    thread_ts: str | None = None
    progress_ts: str | None = None  # the one progress message, edited in place
    pipeline_id: str | None = None  # set for a scheduled run: it replies in its pipeline's thread
    failed_tasks: int = 0  # task attempts Spark retried
    duplicates: int | None = None  # records sent twice by retried tasks; None: not measured
    on_topic_at_least: int | None = None  # a failed run: what the broker had confirmed; None: unknown
    behind_schedule_s: float | None = None
    partition_skew: float | None = None  # largest / smallest Spark partition
    reconcile: ReconcileOut | None = None
    window_start: datetime | None = None  # the resolved window (a `last=6h` pinned to its run)
    window_end: datetime | None = None
    window_relative: bool = False  # `last=6h`, `today`, a zone: a retry pins window_start..window_end
    live: bool = False  # it publishes to the source's live topic (`topic=live`)
    as_of: datetime | None = None  # when the numbers shown were read (the progress message says it)
    queue_position: int | None = None  # a queued run's place in line (1: the next to start)
    planned_eta_s: float | None = None  # the plan's estimate, start-up included (`RunOut.eta_s`)
    current_tps: int | None = None  # the rate as last set by live control; None: `tps`
    paused: bool = False  # paused by live control
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @classmethod
    def of(cls, run: RunOut, *, rate: float | None = None, as_of: datetime | None = None) -> RunView:
        started, ended = run.started_at, run.ended_at
        return cls(
            run_id=run.id,
            source=run.source,
            window=run.window or "",
            topic=run.topic,
            tps=run.tps,
            requester=run.requester,
            state=str(run.state),
            rows=run.rows,
            rows_selected=run.rows_selected,
            confirmed=run.confirmed,
            dead_lettered=run.dead_lettered,
            dlq_topic=run.dlq_topic,
            rate=rate,
            achieved_tps=run.achieved_tps,
            duration_s=(ended - started).total_seconds() if started and ended else None,
            reason=run.failure_reason,
            failure_kind=None if run.failure_kind is None else str(run.failure_kind),
            channel=run.slack_channel,
            thread_ts=run.slack_ts,
            progress_ts=run.slack_progress_ts,
            pipeline_id=run.pipeline_id,
            failed_tasks=run.failed_tasks,
            duplicates=run.duplicates,
            on_topic_at_least=run.on_topic_at_least,
            behind_schedule_s=run.behind_schedule_s,
            partition_skew=run.partition_skew,
            reconcile=run.reconcile,
            window_start=run.window_start,
            window_end=run.window_end,
            window_relative=run.window_relative,
            live=run.topic_mode == "live",
            as_of=as_of,
            queue_position=run.queue_position,
            planned_eta_s=run.eta_s,
            current_tps=run.current_tps,
            paused=run.paused,
            started_at=started,
            ended_at=ended,
        )

    @property
    def eta_s(self) -> float | None:
        """The plan's estimate (start-up included), else how long the rows take at the asked rate;
        None when the count is unknown."""
        if self.planned_eta_s is not None:
            return self.planned_eta_s
        rows = self.rows
        return rows / self.tps if rows is not None and self.tps else None


@dataclass(frozen=True)
class PipelineView:
    """A pipeline as messages show it."""

    pipeline_id: str
    source: str
    schedule: str
    state: str
    watermark_column: str
    watermark: str | None
    tps: int
    topic: str
    owners: tuple[str, ...]
    next_run_at: datetime | None = None
    last_published_at: datetime | None = None
    created_at: datetime | None = None

    @classmethod
    def of(cls, pipeline: PipelineOut) -> PipelineView:
        return cls(
            pipeline_id=pipeline.id,
            source=pipeline.source,
            schedule=pipeline.schedule,
            state=str(pipeline.state),
            watermark_column=pipeline.watermark_column,
            watermark=pipeline.watermark,
            tps=pipeline.tps,
            topic=pipeline.topic,
            owners=tuple(pipeline.owners),
            next_run_at=pipeline.next_run_at,
            last_published_at=pipeline.last_published_at,
            created_at=pipeline.created_at,
        )

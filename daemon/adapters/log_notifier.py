"""`LogNotifier`: every notification as a structured log line, for an install without Slack."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from daemon.contract.models import IdlePrompt, PipelineOut, RateSeriesOut, RunOut
from daemon.slack.run_report import run_verdict
from daemon.usecases.ports import Notifier, RunThread

log = structlog.get_logger(__name__)


class LogNotifier(Notifier):
    def run_started(self, run: RunOut) -> RunThread | None:
        log.info(
            "notify run started",
            run_id=run.id,
            source=run.source,
            window=run.window,
            topic=run.topic,
            state=str(run.state),
            queue_position=run.queue_position,
        )
        return None

    def run_state_changed(self, run: RunOut) -> None:
        log.info("notify run state", run_id=run.id, state=str(run.state))

    def run_progress(self, run: RunOut, *, rate: float | None) -> None:
        log.info(
            "notify run progress",
            run_id=run.id,
            confirmed=run.confirmed,
            rows_planned=run.rows_planned,
            rate=rate,
        )

    def run_finished(
        self, run: RunOut, series: RateSeriesOut | None = None, delivered: Callable[[], None] | None = None
    ) -> None:
        """The honest report as fields: unknown counts stay None, never 0."""
        log.info(
            "notify run finished",
            run_id=run.id,
            state=str(run.state),
            confirmed=run.confirmed,
            rows_selected=run.rows_selected,
            achieved_tps=run.achieved_tps,
            dead_lettered=run.dead_lettered,
            duplicates=run.duplicates,
            failed_tasks=run.failed_tasks,
            partition_skew=run.partition_skew,
            behind_schedule_s=run.behind_schedule_s,
            on_topic_at_least=run.on_topic_at_least,
            reconcile=run_verdict(run.reconcile).text,
            series_seconds=len(series.counts) if series is not None else None,
            reason=run.failure_reason,
        )
        if delivered is not None:
            delivered()

    def run_reconciled(self, run: RunOut) -> None:
        log.info("notify run reconciled", run_id=run.id, reconcile=run_verdict(run.reconcile).text)

    def run_rate_changed(self, run: RunOut, *, actor: str, reason: str | None = None) -> None:
        log.info(
            "notify run rate changed",
            run_id=run.id,
            actor=actor,
            tps=run.current_tps,
            paused=run.paused,
            reason=reason,
        )

    def watch_started(self, run: RunOut) -> str | None:
        self.watch_progress(run, message_ts="log")
        return None

    def watch_progress(self, run: RunOut, *, message_ts: str) -> None:
        log.info(
            "notify run watch",
            run_id=run.id,
            topic=run.topic,
            groups={w.group: {"state": str(w.state), "lag": w.lag, "base": w.baseline} for w in run.watch},
        )

    def watch_concluded(self, run: RunOut, group: str) -> None:
        watched = next(w for w in run.watch if w.group == group)
        log.info(
            "notify run watch concluded",
            run_id=run.id,
            group=group,
            state=str(watched.state),
            lag=watched.lag,
            baseline=watched.baseline,
            caught_up_at=watched.caught_up_at.isoformat() if watched.caught_up_at else None,
            caught_up_after_s=watched.caught_up_after_s,
        )

    def topic_expiry(self, run: RunOut, *, deletes_at: datetime | None) -> str:
        log.info(
            "notify replay topic " + ("expiring" if deletes_at is not None else "deleted"),
            run_id=run.id,
            topic=run.topic,
            requester=run.requester,
            deletes_at=deletes_at.isoformat() if deletes_at is not None else None,
        )
        return "log"

    def pipeline_scheduled(self, pipeline: PipelineOut) -> str | None:
        log.info("notify pipeline scheduled", pipeline_id=pipeline.id, schedule=pipeline.schedule)
        return None

    def idle_prompt(self, prompt: IdlePrompt, owner: str) -> str:
        log.info(
            "notify idle pipeline",
            pipeline_id=prompt.pipeline.id,
            owner=owner,
            deadline=prompt.deadline.isoformat(),
        )
        return "log"

    def pipeline_removed(self, pipeline: PipelineOut, owner: str, removed: list[str], reason: str) -> str:
        log.info(
            "notify pipeline removed", pipeline_id=pipeline.id, owner=owner, removed=removed, reason=reason
        )
        return "log"

"""`LogNotifier`: every notification as a structured log line, for an install without Slack."""

from __future__ import annotations

import structlog

from daemon.contract.models import IdlePrompt, PipelineOut, RunOut
from daemon.usecases.ports import Notifier

log = structlog.get_logger(__name__)


class LogNotifier(Notifier):
    def run_started(self, run: RunOut) -> str | None:
        log.info("notify run started", run_id=run.id, source=run.source, window=run.window, topic=run.topic)
        return None

    def run_progress(self, run: RunOut, *, rate: float | None) -> None:
        log.info(
            "notify run progress",
            run_id=run.id,
            confirmed=run.confirmed,
            rows_planned=run.rows_planned,
            rate=rate,
        )

    def run_finished(self, run: RunOut) -> None:
        log.info(
            "notify run finished",
            run_id=run.id,
            state=str(run.state),
            confirmed=run.confirmed,
            rows_selected=run.rows_selected,
            dead_lettered=run.dead_lettered,
            reason=run.failure_reason,
        )

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

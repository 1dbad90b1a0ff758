"""`PipelineScheduler`: APScheduler inside the daemon, its jobs rebuilt from pipeline rows.

Why not APScheduler's SQLAlchemy job store: it would duplicate the schedule the pipeline row already
holds, and two daemons sharing it would both fire every job. Instead each daemon keeps an in-memory
job per active pipeline (the pipeline's own trigger, first fire at the row's `next_run_at`) and every
fire goes through `PipelineService.fire`, which claims the slot under the pipeline's row lock: the
first daemon creates the run, the others find the slot taken. A slot missed while every daemon was
down is overdue at start-up, fires once (coalesced), and the next one is computed from "now".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from daemon.core.states import PipelineState
from daemon.usecases.fire_times import trigger_for
from store import Store

log = structlog.get_logger(__name__)

SYNC_JOB = "sync-pipelines"
JANITOR_JOB = "idle-pipeline-janitor"
TOPIC_TTL_JOB = "replay-topic-ttl"
DEPROVISION_JOB = "finish-deprovisioning"


class PipelineScheduler:
    def __init__(
        self,
        *,
        store: Store,
        fire: Callable[[str], object],
        clock: Callable[[], datetime],
        sync_every_s: float = 5.0,
        janitor: Callable[[], object] | None = None,
        janitor_schedule: str | None = None,
        topic_ttl: Callable[[], object] | None = None,
        topic_ttl_every_s: float = 300.0,
        deprovisions: Callable[[], object] | None = None,
        deprovisions_every_s: float = 10.0,
    ) -> None:
        self._periodic = [
            (job_id, work, every_s)
            for job_id, work, every_s in (
                (TOPIC_TTL_JOB, topic_ttl, topic_ttl_every_s),
                (DEPROVISION_JOB, deprovisions, deprovisions_every_s),
            )
            if work is not None
        ]
        self._janitor = janitor
        self._janitor_schedule = janitor_schedule
        self._store = store
        self._fire = fire
        self._clock = clock
        self._sync_every_s = sync_every_s
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(4)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._planned: dict[str, tuple[str, datetime | None]] = {}  # pipeline id -> (schedule, next_run_at)

    def start(self) -> None:
        self.sync()
        self._scheduler.add_job(
            self.sync, IntervalTrigger(seconds=self._sync_every_s), id=SYNC_JOB, replace_existing=True
        )
        if self._janitor is not None and self._janitor_schedule:
            self._scheduler.add_job(
                self._janitor, trigger_for(self._janitor_schedule), id=JANITOR_JOB, replace_existing=True
            )
        for job_id, work, every_s in self._periodic:
            self._scheduler.add_job(work, IntervalTrigger(seconds=every_s), id=job_id, replace_existing=True)
        self._scheduler.start()
        log.info("scheduler started", pipelines=len(self._planned))

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def wake(self) -> None:
        """Re-read the pipelines now (one was created, paused, resumed, or asked to run now)."""
        if self._scheduler.running:
            self._scheduler.modify_job(SYNC_JOB, next_run_time=datetime.now(UTC))
        else:
            self.sync()

    def sync(self) -> None:
        """Make the jobs match the active pipelines and their next fire times."""
        active = {p.id: p for p in self._store.pipelines.list(state=PipelineState.ACTIVE)}
        for pipeline_id in set(self._planned) - set(active):
            with contextlib.suppress(JobLookupError):  # a trigger with no next fire already removed it
                self._scheduler.remove_job(pipeline_id)
            del self._planned[pipeline_id]
            log.info("pipeline unscheduled here", pipeline_id=pipeline_id)
        for pipeline_id, pipeline in active.items():
            plan = (pipeline.schedule, pipeline.next_run_at)
            if self._planned.get(pipeline_id) == plan:
                continue
            try:
                self._plan(pipeline_id, pipeline.schedule, pipeline.next_run_at)
            except Exception:  # one pipeline's bad row must not keep the others from being scheduled
                log.exception("pipeline could not be scheduled", pipeline_id=pipeline_id)
                continue
            self._planned[pipeline_id] = plan

    def _plan(self, pipeline_id: str, schedule: str, next_run_at: datetime | None) -> None:
        first = next_run_at or self._clock()
        self._scheduler.add_job(
            self._fire_logged,
            trigger_for(schedule),
            args=[pipeline_id],
            id=pipeline_id,
            next_run_time=max(first, self._clock()),
            replace_existing=True,
        )
        log.info("pipeline scheduled here", pipeline_id=pipeline_id, next_run_at=str(first))

    def _fire_logged(self, pipeline_id: str) -> None:
        try:
            self._fire(pipeline_id)
        except Exception:  # a failed fire (e.g. the table unreadable) waits for the next slot
            log.exception("pipeline fire failed", pipeline_id=pipeline_id)
        finally:
            self.wake()  # pick up the slot's new next_run_at

"""`PipelineScheduler.sync` on both dialects: jobs follow the rows, and one bad row stops nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.core.states import PipelineState
from daemon.runtime.scheduler import PipelineScheduler
from store import Store
from store.models import Pipeline

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def _pipeline(store: Store, schedule: str = "every=1h") -> Pipeline:
    return store.pipelines.create(
        source="orders", schedule=schedule, watermark_column="updated_at", topic="t", tps=10, created_by="U1"
    )


def _scheduler(store: Store, fired: list[str]) -> PipelineScheduler:
    return PipelineScheduler(store=store, fire=fired.append, clock=lambda: NOW)


def test_archiving_a_pipeline_whose_job_apscheduler_already_dropped_does_not_stop_sync(store: Store) -> None:
    """A trigger with no next fire time is removed by APScheduler itself; `sync` must not then fail
    on removing it, or no later pipeline, resume or run-now would be picked up until a restart."""
    fired: list[str] = []
    scheduler = _scheduler(store, fired)
    first = _pipeline(store)
    scheduler.sync()
    scheduler._scheduler.remove_job(first.id)  # what APScheduler does after a trigger's last fire
    store.pipelines.set_state(first.id, PipelineState.ARCHIVED)
    second = _pipeline(store)

    scheduler.sync()

    assert [job.id for job in scheduler._scheduler.get_jobs()] == [second.id]


def test_a_stored_schedule_that_cannot_be_planned_does_not_keep_the_others_out(store: Store) -> None:
    fired: list[str] = []
    scheduler = _scheduler(store, fired)
    broken = _pipeline(store, schedule="cron=61 * * * *")  # written around the service's validation
    good = _pipeline(store)

    scheduler.sync()

    assert [job.id for job in scheduler._scheduler.get_jobs()] == [good.id]
    assert broken.id not in [job.id for job in scheduler._scheduler.get_jobs()]

"""Firing a pipeline's slot: exactly one run per due slot, never two runs of a pipeline at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy

from store import Store
from store.models import Run
from tests.fixtures.store_rows import new_pipeline, pipeline_run

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
FIELDS = {
    "source": "orders",
    "topic": "replay.orders.p",
    "tps": 100,
    "requester": "scheduler",
    "watermark_column": "updated_at",
    "watermark_high": "2024-03-01T11:59:00+00:00",
}


def _claim(store: Store, pipeline_id: str, *, skipped_reason: str | None = None) -> Run | None:
    return store.pipelines.claim_slot(
        pipeline_id,
        now=NOW,
        next_run_at=NOW + timedelta(minutes=15),
        run_fields=FIELDS,
        skipped_reason=skipped_reason,
    )


def test_a_due_slot_creates_one_queued_run_and_moves_the_next_run_on(store: Store) -> None:
    pipeline = new_pipeline(store)
    store.pipelines.update(pipeline.id, next_run_at=NOW - timedelta(minutes=1))

    run = _claim(store, pipeline.id)

    assert run is not None
    saved = store.runs.get(run.id)
    assert (saved.state, saved.kind, saved.pipeline_id) == ("queued", "pipeline", pipeline.id)
    assert saved.scheduled_for == NOW - timedelta(minutes=1)
    assert saved.watermark_high == FIELDS["watermark_high"]
    assert store.pipelines.get(pipeline.id).next_run_at == NOW + timedelta(minutes=15)


def test_a_slot_not_yet_due_creates_nothing(store: Store) -> None:
    pipeline = new_pipeline(store)
    store.pipelines.update(pipeline.id, next_run_at=NOW + timedelta(seconds=1))

    assert _claim(store, pipeline.id) is None
    assert store.runs.list(pipeline_id=pipeline.id)[0] == []


def test_a_paused_pipeline_does_not_fire(store: Store) -> None:
    pipeline = new_pipeline(store)
    store.pipelines.set_state(pipeline.id, "paused")

    assert _claim(store, pipeline.id) is None


def test_a_slot_is_skipped_while_the_previous_run_still_goes(store: Store) -> None:
    pipeline = new_pipeline(store)
    running = pipeline_run(store, pipeline, "running")

    assert _claim(store, pipeline.id) is None
    assert [r.id for r in store.runs.list(pipeline_id=pipeline.id)[0]] == [running.id]
    assert store.pipelines.get(pipeline.id).next_run_at == NOW + timedelta(minutes=15)


def test_no_new_data_is_recorded_as_a_skipped_run(store: Store) -> None:
    pipeline = new_pipeline(store)

    run = _claim(store, pipeline.id, skipped_reason="no new data")

    assert run is not None
    saved = store.runs.get(run.id)
    assert (saved.state, saved.failure_reason, saved.ended_at) == ("skipped", "no new data", NOW)


@pytest.mark.postgres
def test_two_daemons_firing_the_same_slot_create_one_run(fresh_postgres_url: str) -> None:
    from store.migrate import upgrade

    upgrade(fresh_postgres_url)
    stores = [Store(fresh_postgres_url), Store(fresh_postgres_url)]
    pipeline = new_pipeline(stores[0])
    results: list[object] = []
    barrier = threading.Barrier(2)

    def fire(store: Store) -> None:
        barrier.wait()
        results.append(_claim(store, pipeline.id))

    threads = [threading.Thread(target=fire, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(result is not None for result in results) == 1
    assert len(stores[0].runs.list(pipeline_id=pipeline.id)[0]) == 1
    for store in stores:
        store.close()


def test_one_run_per_slot_is_enforced_by_the_schema(store: Store) -> None:
    pipeline = new_pipeline(store)
    first = _claim(store, pipeline.id)
    assert first is not None
    store.runs.transition(first.id, "succeeded")
    store.pipelines.update(pipeline.id, next_run_at=first.scheduled_for)

    with pytest.raises(sqlalchemy.exc.IntegrityError):
        _claim(store, pipeline.id)

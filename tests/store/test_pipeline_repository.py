"""PipelineRepository on both dialects, above all: the watermark moves with its run or not at all."""

from __future__ import annotations

import re

import pytest

from daemon.core.errors import InvalidTransition, PipelineNotFound, StaleUpdate
from daemon.core.run_options import PipelineOptions
from daemon.core.states import PipelineState
from store import Store
from tests.fixtures.store_rows import new_pipeline, pipeline_run


def test_round_trip_and_defaults(store: Store) -> None:
    created = new_pipeline(
        store, options=PipelineOptions(headers={"src": "lake"}), lookback_seconds=300, idle_after_days=30
    )
    assert re.fullmatch(r"p-[0-9a-f]{12}", created.id)
    pipeline = store.pipelines.get(created.id)
    assert (pipeline.state, pipeline.owners, pipeline.version) == (PipelineState.ACTIVE, ["U1"], 1)
    assert (pipeline.lookback_seconds, pipeline.idle_after_days) == (300, 30)
    assert pipeline.options == PipelineOptions(headers={"src": "lake"})
    assert pipeline.created_at.utcoffset() is not None and pipeline.last_published_at is None


def test_unknown_pipeline(store: Store) -> None:
    with pytest.raises(PipelineNotFound, match=r"^no pipeline with id 'p-1'$") as caught:
        store.pipelines.get("p-1")
    assert isinstance(caught.value, LookupError)
    with pytest.raises(PipelineNotFound, match="p-1"):
        store.runs.create(
            kind="pipeline", pipeline_id="p-1", source="s", topic="t", tps=1, requester="scheduler"
        )


def test_list_by_state_and_owner(store: Store) -> None:
    a = new_pipeline(store, owners=["U1", "U2"])
    b = new_pipeline(store, created_by="U3")
    store.pipelines.set_state(b.id, "paused")
    assert [p.id for p in store.pipelines.list()] == [a.id, b.id]
    assert [p.id for p in store.pipelines.list(state="paused")] == [b.id]
    assert [p.id for p in store.pipelines.list(owner="U2")] == [a.id]


def test_state_changes_and_archive_is_final(store: Store) -> None:
    pipeline = new_pipeline(store)
    assert store.pipelines.set_state(pipeline.id, "paused").state == PipelineState.PAUSED
    assert store.pipelines.set_state(pipeline.id, "paused").version == 2  # no-op
    assert store.pipelines.set_state(pipeline.id, "active").state == PipelineState.ACTIVE
    store.pipelines.set_state(pipeline.id, "archived")
    with pytest.raises(InvalidTransition, match="archived pipelines stay archived"):
        store.pipelines.set_state(pipeline.id, "active")


def test_update_settings_with_optimistic_check(store: Store) -> None:
    pipeline = new_pipeline(store)
    updated = store.pipelines.update(pipeline.id, expected_version=1, tps=50, owners=["U1", "U9"])
    assert (updated.tps, updated.owners, updated.version) == (50, ["U1", "U9"], 2)
    with pytest.raises(StaleUpdate):
        store.pipelines.update(pipeline.id, expected_version=1, tps=10)
    with pytest.raises(TypeError, match="watermark_value"):
        store.pipelines.update(pipeline.id, watermark_value="2030-01-01")


def test_commit_watermark_finishes_the_run_and_moves_the_watermark(store: Store) -> None:
    pipeline = new_pipeline(store)
    run = pipeline_run(store, pipeline)
    store.runs.update_progress(run.id, 40, 10.0)
    committed, finished = store.pipelines.commit_watermark(
        pipeline.id, run.id, "2024-01-02T00:00:00Z", {"confirmed": 42, "achieved_tps": 12.5}
    )
    assert committed.watermark_value == "2024-01-02T00:00:00Z"
    assert (finished.state, finished.confirmed, finished.watermark_high) == (
        "succeeded",
        42,
        "2024-01-02T00:00:00Z",
    )
    reloaded = store.pipelines.get(pipeline.id)
    assert reloaded.watermark_value == "2024-01-02T00:00:00Z"
    assert reloaded.last_published_at == finished.ended_at


def test_skipped_run_leaves_the_watermark(store: Store) -> None:
    pipeline = new_pipeline(store)
    run = pipeline_run(store, pipeline, state="queued")
    committed, finished = store.pipelines.commit_watermark(pipeline.id, run.id, None, {"state": "skipped"})
    assert finished.state == "skipped"
    assert committed.watermark_value == "2024-01-01T00:00:00Z" and committed.last_published_at is None


@pytest.mark.parametrize(
    ("final", "message"),
    [
        ({"state": "succeeded", "no_such_field": 1}, "cannot set no_such_field"),
        ({"state": "failed"}, "only success advances a watermark"),
    ],
)
def test_refused_commit_moves_nothing(store: Store, final: dict[str, object], message: str) -> None:
    pipeline = new_pipeline(store)
    run = pipeline_run(store, pipeline)
    with pytest.raises((InvalidTransition, TypeError), match=message):
        store.pipelines.commit_watermark(pipeline.id, run.id, "2024-02-01T00:00:00Z", final)
    assert store.pipelines.get(pipeline.id).watermark_value == "2024-01-01T00:00:00Z"
    assert store.runs.get(run.id).state == "running"


def test_commit_is_atomic_when_the_run_transition_fails(store: Store) -> None:
    pipeline = new_pipeline(store)
    run = pipeline_run(store, pipeline)
    store.runs.transition(run.id, "cancelled")  # e.g. the user cancelled while the job wrapped up
    with pytest.raises(InvalidTransition, match="it has finished"):
        store.pipelines.commit_watermark(pipeline.id, run.id, "2024-02-01T00:00:00Z", {"confirmed": 9})
    pipeline_after = store.pipelines.get(pipeline.id)
    assert pipeline_after.watermark_value == "2024-01-01T00:00:00Z"
    assert pipeline_after.version == pipeline.version and pipeline_after.last_published_at is None
    run_after = store.runs.get(run.id)
    assert (run_after.state, run_after.confirmed, run_after.watermark_high) == ("cancelled", 0, None)


def test_commit_refuses_a_run_of_another_pipeline(store: Store) -> None:
    mine, theirs = new_pipeline(store), new_pipeline(store)
    run = pipeline_run(store, theirs)
    with pytest.raises(InvalidTransition, match=f"does not belong to '{mine.id}'"):
        store.pipelines.commit_watermark(mine.id, run.id, "2030-01-01", None)
    assert store.runs.get(run.id).state == "running"

"""Reading runs back on both dialects: keyset pages, filters, counts and totals for metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.errors import BadRequest
from daemon.core.states import FailureKind, RunState
from store import Store
from store.migrate import upgrade
from store.models import Run
from store.pagination import decode_cursor, encode_cursor


def new_run(store: Store, **overrides: Any) -> Run:
    fields: dict[str, Any] = {"kind": "replay", "source": "lake.orders", "topic": "t", "tps": 5}
    fields.update({"requester": "U123"} | overrides)
    return store.runs.create(**fields)


def test_list_is_newest_first_with_keyset_pages(database_url: str) -> None:
    ticks = iter(datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=i // 2) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:  # pairs share a created_at
        upgrade(store.engine)
        ids = [new_run(store, requester="U1" if i % 3 else "U2").id for i in range(11)]
        seen: list[str] = []
        cursor = None
        while True:
            page, cursor = store.runs.list(limit=4, cursor=cursor)
            seen += [run.id for run in page]
            if cursor is None:
                break
        expected = [
            run.id for run in sorted((store.runs.get(i) for i in ids), key=lambda r: (r.created_at, r.id))
        ]
        assert seen == expected[::-1]
        mine, _ = store.runs.list(requester="U2")
        assert {run.id for run in mine} == {ids[i] for i in range(0, 11, 3)}


def test_list_filters_by_state_and_pipeline(store: Store) -> None:
    pipeline = store.pipelines.create(
        source="lake.orders",
        schedule="every=15m",
        watermark_column="updated_at",
        topic="t",
        tps=1,
        created_by="U1",
    )
    a = new_run(store, kind="pipeline", pipeline_id=pipeline.id)
    b = new_run(store)
    store.runs.transition(b.id, "running")
    assert [r.id for r in store.runs.list(pipeline_id=pipeline.id)[0]] == [a.id]
    assert [r.id for r in store.runs.list(state="running")[0]] == [b.id]
    assert {r.id for r in store.runs.list(state=["running", "queued"])[0]} == {a.id, b.id}
    with pytest.raises(BadRequest, match=r"^invalid cursor 'not-a-cursor'$"):
        store.runs.list(cursor="not-a-cursor")
    with pytest.raises(BadRequest, match=r"^'done' is not a valid RunState$"):
        store.runs.list(state="done")


def test_count_by_state_includes_zeros(store: Store) -> None:
    new_run(store)
    store.runs.transition(new_run(store).id, "failed")
    counts = store.runs.count_by_state()
    assert counts[RunState.QUEUED] == 1 and counts[RunState.FAILED] == 1
    assert set(counts) == set(RunState) and sum(counts.values()) == 2


def test_totals_for_metrics(store: Store) -> None:
    assert store.runs.totals() == {
        "runs": 0,
        "confirmed": 0,
        "launch_failures": 0,
    }
    store.runs.transition(new_run(store).id, "succeeded", confirmed=70)
    store.runs.transition(
        new_run(store).id, "failed", failure_reason="no spark-submit", failure_kind=FailureKind.LAUNCH
    )
    store.runs.transition(
        new_run(store).id, "failed", failure_reason="lost", failure_kind=FailureKind.LOST, confirmed=5
    )
    # the reason's words count for nothing: the kind is the fact
    store.runs.transition(
        new_run(store).id, "failed", failure_reason="could not launch the job", failure_kind=FailureKind.JOB
    )
    assert store.runs.totals() == {"runs": 4, "confirmed": 75, "launch_failures": 1}


def test_find_by_idempotency_key(store: Store) -> None:
    assert store.runs.find_by_idempotency_key("U1", "k") is None
    run, _ = store.runs.create_or_get("U1", "k", kind="replay", source="s", topic="t", tps=1)
    found = store.runs.find_by_idempotency_key("U1", "k")
    assert found is not None and found.id == run.id
    assert store.runs.find_by_idempotency_key("U2", "k") is None


@given(
    at=st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    run_id=st.text(min_size=1, max_size=40),
)
def test_cursor_round_trips(at: datetime, run_id: str) -> None:
    assert decode_cursor(encode_cursor(at, run_id)) == (at, run_id)

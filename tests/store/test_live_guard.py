"""The live-topic guard: overlap as a pure property, then the guarded insert on both dialects.

Two responders clicking at once are two threads inserting the same window: exactly one run exists
afterwards and the other gets OverlappingReplay naming it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event

from daemon.core.errors import Conflict, OverlappingReplay
from daemon.core.grammar import ReplayCommand, parse, render
from daemon.core.run_options import RunOptions
from daemon.core.windows import overlaps
from store import Store
from store.live_guard import LiveGuard
from store.models import Run
from tests.fixtures.store_rows import in_parallel

DAY = timedelta(days=1)
JAN_1 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
GUARD = LiveGuard(since=NOW - timedelta(hours=24))

moments = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
intervals = st.tuples(moments, moments).filter(lambda pair: pair[0] < pair[1])


# --- the pure overlap rule ---------------------------------------------------------------------------


@given(intervals, intervals)
def test_overlap_is_symmetric(first: tuple[datetime, datetime], second: tuple[datetime, datetime]) -> None:
    assert overlaps(first, second) == overlaps(second, first)


@given(intervals)
def test_an_interval_overlaps_itself(interval: tuple[datetime, datetime]) -> None:
    assert overlaps(interval, interval)


@given(intervals, intervals)
def test_overlap_means_a_shared_instant(
    first: tuple[datetime, datetime], second: tuple[datetime, datetime]
) -> None:
    start, end = max(first[0], second[0]), min(first[1], second[1])
    assert overlaps(first, second) == (start < end)


@given(intervals, st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=365)))
def test_touching_half_open_intervals_do_not_overlap(
    first: tuple[datetime, datetime], gap: timedelta
) -> None:
    after = (first[1], first[1] + gap)
    assert not overlaps(first, after)


@pytest.mark.parametrize(
    ("text", "force"), [("orders 2024-01-01 topic=live force=yes", True), ("orders 2024-01-01", False)]
)
def test_force_is_a_run_option_that_round_trips(text: str, force: bool) -> None:
    parsed = parse(text)

    assert isinstance(parsed, ReplayCommand)
    assert parsed.force is force
    assert parse(render(parsed)) == parsed


# --- the guarded insert, on SQLite and PostgreSQL ------------------------------------------------------


def live_run(
    store: Store, *, days: tuple[int, int] = (0, 1), guard: LiveGuard | None = GUARD, **fields: Any
) -> Run:
    first, last = days
    values: dict[str, Any] = {
        "kind": "replay",
        "source": "orders",
        "topic": "orders-live",
        "tps": 100,
        "requester": "U0ALICE",
        "window_start": JAN_1 + first * DAY,
        "window_end": JAN_1 + last * DAY,
        "window_label": f"day {first}..{last}",
        "live_guard": guard,
        **fields,
    }
    return store.runs.create(**values)


def test_an_overlapping_replay_into_the_same_live_topic_is_refused_naming_the_other_run(store: Store) -> None:
    first = live_run(store, days=(0, 2))

    with pytest.raises(OverlappingReplay) as refused:
        live_run(store, days=(1, 3), requester="U0BOB")

    assert isinstance(refused.value, Conflict)
    assert (refused.value.run_id, refused.value.requester, refused.value.state) == (
        first.id,
        "U0ALICE",
        "queued",
    )
    assert first.id in str(refused.value) and "force=yes" in str(refused.value)
    assert [run.id for run in store.runs.list()[0]] == [first.id]


@pytest.mark.parametrize("state", ["submitted", "running", "cancelling"])
def test_every_going_state_blocks(store: Store, state: str) -> None:
    first = live_run(store)
    if state != "submitted":
        store.runs.transition(first.id, "running")
    if state == "cancelling":
        store.runs.transition(first.id, "cancelling")
    elif state == "submitted":
        store.runs.transition(first.id, "submitted")

    with pytest.raises(OverlappingReplay, match=state):
        live_run(store)


@pytest.mark.parametrize(
    ("days", "fields"),
    [
        ((1, 2), {}),  # the next day: windows only touch
        ((0, 1), {"topic": "orders-live-2"}),  # another topic
        ((0, 1), {"source": "payments"}),  # another source
        ((0, 1), {"guard": None}),  # force=yes: no guard
    ],
)
def test_what_does_not_collide(store: Store, days: tuple[int, int], fields: dict[str, Any]) -> None:
    live_run(store)

    second = live_run(store, days=days, **fields)

    assert second.state == "queued"


def test_a_failed_or_cancelled_run_does_not_block(store: Store) -> None:
    failed, cancelled = live_run(store), live_run(store, guard=None)
    store.runs.transition(failed.id, "failed", failure_reason="broker down")
    store.runs.transition(cancelled.id, "cancelled")

    assert live_run(store).state == "queued"


def test_a_recent_success_blocks_and_an_old_one_does_not(store: Store) -> None:
    done = live_run(store)
    store.runs.transition(done.id, "succeeded")
    ended = store.runs.get(done.id).ended_at
    assert ended is not None

    with pytest.raises(OverlappingReplay, match="succeeded"):
        live_run(store, guard=LiveGuard(since=ended - timedelta(hours=1)))
    assert live_run(store, guard=LiveGuard(since=ended + timedelta(seconds=1))).state == "queued"


def test_overlapping_lists_what_a_plan_would_warn_about(store: Store) -> None:
    first, _other_topic = live_run(store, days=(0, 2)), live_run(store, topic="elsewhere")

    found = store.runs.overlapping(
        source="orders", topic="orders-live", start=JAN_1 + DAY, end=JAN_1 + 3 * DAY, since=GUARD.since
    )

    assert [run.id for run in found] == [first.id]


def _insert_or_refusal(store: Store, worker: int, days: tuple[int, int]) -> str:
    try:
        return live_run(store, days=days, requester=f"U0RESPONDER{worker}").id
    except OverlappingReplay as refused:
        return f"refused:{refused.run_id}"


@pytest.fixture
def slow_inserts(store: Store) -> Iterator[None]:
    """Widen the gap between the check and the insert, so both checks would pass without a lock."""

    def pause(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO RUNS"):
            time.sleep(0.3)

    event.listen(store.engine, "before_cursor_execute", pause)
    yield
    event.remove(store.engine, "before_cursor_execute", pause)


@pytest.mark.usefixtures("slow_inserts")
@pytest.mark.parametrize("attempt", range(2))
def test_two_concurrent_guarded_inserts_of_one_window_create_exactly_one_run(
    store: Store, attempt: int
) -> None:
    days = (10 * attempt, 10 * attempt + 1)

    outcomes = in_parallel(2, lambda worker: _insert_or_refusal(store, worker, days))

    created = [o for o in outcomes if not o.startswith("refused:")]
    refused = [o.removeprefix("refused:") for o in outcomes if o.startswith("refused:")]
    assert len(created) == 1, outcomes
    assert refused == created, outcomes
    assert [run.id for run in store.runs.list()[0]] == created


def _filtered(where: str | None) -> dict[str, Any]:
    return {"options": RunOptions(topic_mode="live", where=where)}


def test_filtered_replays_of_disjoint_keys_run_together_and_overlapping_ones_do_not(store: Store) -> None:
    first = live_run(store, **_filtered("order_id IN ('ord-1', 'ord-2')"))

    beside = live_run(store, requester="U0BOB", **_filtered("order_id = 'ord-3' AND amount > 5"))
    assert beside.state == "queued"
    for where in ("order_id IN ('ord-2', 'ord-9')", "amount > 5", None):
        with pytest.raises(OverlappingReplay) as refused:
            live_run(store, requester="U0BOB", **_filtered(where))
        assert refused.value.run_id == first.id
    assert (
        store.runs.overlapping(
            source="orders",
            topic="orders-live",
            start=JAN_1,
            end=JAN_1 + DAY,
            since=JAN_1,
            where="order_id = 'ord-4'",
        )
        == []
    )
    assert [
        run.id
        for run in store.runs.overlapping(
            source="orders", topic="orders-live", start=JAN_1, end=JAN_1 + DAY, since=JAN_1, where=None
        )
    ] == [first.id, beside.id]

"""The wait for a launcher slot (pure): list scheduling of the runs ahead, oldest first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.queue_wait import places_in_line, queue_wait_s

SECONDS = st.floats(min_value=0, max_value=10_000, allow_nan=False)
RUNS = st.lists(SECONDS, max_size=8)
CAPACITY = st.integers(min_value=1, max_value=6)


def test_runs_wait_for_the_ones_ahead_on_the_slots_they_free() -> None:
    assert queue_wait_s([], [], 1) == 0
    assert queue_wait_s([30.0], [], 1) == 30.0
    assert queue_wait_s([30.0], [40.0], 1) == 70.0
    # two slots free at 10 and 30: the 40 s run takes the first (to 50), the 5 s one the second (to 35)
    assert queue_wait_s([30.0, 10.0], [40.0, 5.0], 2) == 35.0
    assert queue_wait_s([], [], None) == 0


def test_more_runs_holding_slots_than_there_are_free_one_slot_when_enough_ended() -> None:
    assert queue_wait_s([5.0, 20.0, 50.0], [], 2) == 20.0


@given(in_flight=RUNS, queued=RUNS, capacity=CAPACITY)
def test_the_wait_is_never_negative_and_none_with_a_free_slot(
    in_flight: list[float], queued: list[float], capacity: int
) -> None:
    wait = queue_wait_s(in_flight, queued, capacity)
    assert wait >= 0
    if len(in_flight) + len(queued) < capacity:
        assert wait == 0


@given(in_flight=RUNS, queued=RUNS, capacity=CAPACITY)
def test_one_slot_waits_for_the_longest_holder_then_every_queued_run(
    in_flight: list[float], queued: list[float], capacity: int
) -> None:
    expected = (max(in_flight) if in_flight else 0.0) + sum(queued)
    assert queue_wait_s(in_flight, queued, 1) == pytest.approx(expected)


@given(in_flight=RUNS, queued=RUNS, extra=SECONDS, capacity=CAPACITY)
def test_one_more_run_ahead_never_shortens_the_wait(
    in_flight: list[float], queued: list[float], extra: float, capacity: int
) -> None:
    wait = queue_wait_s(in_flight, queued, capacity)
    assert queue_wait_s(in_flight, [*queued, extra], capacity) >= wait
    assert queue_wait_s([*in_flight, extra], queued, capacity) >= wait


@given(in_flight=RUNS, queued=RUNS, capacity=CAPACITY)
def test_one_more_slot_never_lengthens_the_wait(
    in_flight: list[float], queued: list[float], capacity: int
) -> None:
    assert queue_wait_s(in_flight, queued, capacity + 1) <= queue_wait_s(in_flight, queued, capacity)


@given(in_flight=RUNS, queued=RUNS, capacity=CAPACITY)
def test_the_wait_is_never_longer_than_everything_ahead_one_after_another(
    in_flight: list[float], queued: list[float], capacity: int
) -> None:
    assert queue_wait_s(in_flight, queued, capacity) <= max(in_flight, default=0.0) + sum(queued) + 1e-6


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        queue_wait_s([], [], 0)


def test_a_run_a_free_slot_takes_next_waits_for_no_one() -> None:
    assert places_in_line(["a"], holding=0, capacity=1) == {}
    assert places_in_line(["a", "b", "c"], holding=0, capacity=1) == {"b": 1, "c": 2}
    assert places_in_line(["a", "b"], holding=1, capacity=1) == {"a": 1, "b": 2}
    assert places_in_line(["a", "b"], holding=3, capacity=2) == {"a": 1, "b": 2}  # a cap lowered
    assert places_in_line(["a", "b"], holding=0, capacity=None) == {}


@given(
    waiting=st.lists(st.text(min_size=1, max_size=4), unique=True, max_size=8),
    holding=st.integers(min_value=0, max_value=8),
    capacity=CAPACITY,
)
def test_places_count_from_one_behind_the_free_slots_in_line_order(
    waiting: list[str], holding: int, capacity: int
) -> None:
    places = places_in_line(waiting, holding, capacity)
    free = max(0, capacity - holding)

    assert list(places) == waiting[free:]  # the last in line are the ones that wait, in order
    assert list(places.values()) == list(range(1, len(places) + 1))


@given(
    holding=st.lists(st.floats(min_value=0.1, max_value=10_000), max_size=8),
    queued=st.lists(st.floats(min_value=0.1, max_value=10_000), max_size=8),
    capacity=CAPACITY,
)
def test_a_run_has_a_place_exactly_when_the_eta_makes_it_wait(
    holding: list[float], queued: list[float], capacity: int
) -> None:
    # the run at each place in line waits behind the runs holding slots and the queued ones ahead
    waiting = [f"r{i}" for i in range(len(queued))]
    places = places_in_line(waiting, len(holding), capacity)
    for index, run_id in enumerate(waiting):
        waits = queue_wait_s(holding, queued[:index], capacity) > 0
        assert (run_id in places) == waits, (index, places)

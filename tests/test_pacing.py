"""Pacing math: real-valued shares that add up to the requested TPS, absolute deadlines, no drift."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_job.publish.pacing import Pacer, PartitionSchedule, Segment, due_time, schedules, slot_rates

TPS = st.integers(min_value=1, max_value=1_000_000)
SLOTS = st.integers(min_value=1, max_value=512)


class FakeClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self, now: float = 100.0, overshoot: float = 0.0, seed: int = 0) -> None:
        self.now = now
        self.overshoot = overshoot
        self.random = random.Random(seed)
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds + self.random.uniform(0, self.overshoot)


def send_all(pacer: Pacer, clock: FakeClock, count: int, *, chunk: int = 1_000) -> list[float]:
    """Drive the pacer like the publisher does and return each event's send time."""
    times: list[float] = []
    while len(times) < count:
        granted = pacer.take(min(chunk, count - len(times)))
        times.extend([clock.now] * granted)
        if not granted:
            pacer.wait(max_wait_s=0.1)
    return times


def all_deadlines(sizes: list[int], tps: float, slots: int) -> list[float]:
    plans = schedules(sizes, tps, slots)
    return sorted(plan.due(i) for plan, rows in zip(plans, sizes, strict=True) for i in range(rows))


@given(tps=TPS, slots=SLOTS)
def test_slot_rates_sum_to_tps(tps: int, slots: int) -> None:
    rates = slot_rates(tps, slots)
    assert len(rates) == slots
    assert math.isclose(sum(rates), tps, rel_tol=1e-12)
    assert all(rate > 0 for rate in rates)


def test_slot_rates_have_no_floor_of_one_per_slot() -> None:
    assert slot_rates(10, 56) == [10 / 56] * 56  # one event every 5.6 s per slot, 10/s in total


@given(
    tps=st.integers(1, 50_000),
    slots=st.integers(1, 16),
    data=st.data(),
)
def test_all_deadlines_form_one_even_sequence_whatever_the_sizes(
    tps: int, slots: int, data: st.DataObject
) -> None:
    rounds = data.draw(st.integers(1, 3))
    sizes = data.draw(st.lists(st.integers(0, 60), min_size=slots * rounds, max_size=slots * rounds))
    deadlines = all_deadlines(sizes, tps, slots)
    # Event g of the whole run is due at g / tps: exactly tps per second, no bursts, no gaps, no tail.
    assert all(math.isclose(due, g / tps, rel_tol=1e-9, abs_tol=1e-9) for g, due in enumerate(deadlines))


@given(tps=TPS, slots=SLOTS, rows=st.integers(1, 10_000))
def test_equal_shares_pace_each_slot_at_tps_over_w(tps: int, slots: int, rows: int) -> None:
    for slot, plan in enumerate(schedules([rows] * slots, tps, slots)):
        (segment,) = plan.segments
        assert (segment.stride, segment.rank) == (slots, slot)  # rate tps / W, phase slot / W
        assert math.isclose(plan.due(1) - plan.due(0), slots / tps)


def test_staggered_slots_give_even_seconds_at_low_tps() -> None:
    # 8 slots at 10 TPS in phase would give seconds of 8 and 16 events; staggered they give 10.
    deadlines = all_deadlines([50] * 8, 10, 8)
    assert [sum(1 for d in deadlines if s <= d < s + 1) for s in range(40)] == [10] * 40


def test_uneven_partitions_keep_fewer_events_per_second_than_slots_even() -> None:
    deadlines = all_deadlines([13, 13, 14, 13, 13, 13, 13, 13], 5, 8)  # T < W, round-robin sizes
    assert [sum(1 for d in deadlines if s <= d < s + 1) for s in range(21)] == [5] * 21


def test_larger_partitions_speed_up_when_smaller_ones_finish() -> None:
    small, large = schedules([2, 6], 10, 2)
    assert [small.due(i) for i in range(2)] == [0.0, 0.2]
    assert [large.due(i) for i in range(6)] == pytest.approx([0.1, 0.3, 0.4, 0.5, 0.6, 0.7])


def test_a_slots_next_partition_continues_where_its_round_ended() -> None:
    plans = schedules([3, 3, 3, 3], 6, 2)  # two rounds of two
    assert plans[2].due(0) == pytest.approx(plans[0].due(2) + 2 / 6)
    assert plans[3].due(0) == pytest.approx(1.0 + 1 / 6)


def test_unthrottled_schedules_are_always_due() -> None:
    plan = schedules([3, 4], 0, 2)[1]
    assert (plan.rows, plan.events_due(0.0), plan.due(3)) == (4, 4, 0.0)


def test_due_time_is_absolute() -> None:
    plan = PartitionSchedule(4.0, (Segment(start_s=2.0, first=0, count=10, stride=2, rank=1),))
    assert due_time(plan, 3, t0=1000.0) == 1000.0 + 2.0 + (3 * 2 + 1) / 4.0


@given(tps=st.floats(0.01, 1e6), slots=st.integers(1, 64), start=st.floats(0, 1e6), data=st.data())
def test_an_event_is_due_exactly_at_its_deadline(
    tps: float, slots: int, start: float, data: st.DataObject
) -> None:
    rank = data.draw(st.integers(0, slots - 1))
    segment = Segment(start, first=0, count=2_000_000, stride=slots, rank=rank)
    index = data.draw(st.integers(0, 1_000_000))
    assert segment.events_due(segment.due(index, tps), tps) == index + 1


@settings(max_examples=60, deadline=None)
@given(
    tps=st.floats(0.2, 50_000),
    slots=st.integers(1, 8),
    rows=st.integers(1, 3_000),
    overshoot=st.sampled_from([0.0, 0.0002, 0.003]),
)
def test_pacer_sends_each_event_at_its_deadline_without_drift(
    tps: float, slots: int, rows: int, overshoot: float
) -> None:
    clock = FakeClock(overshoot=overshoot)
    plan = schedules([rows] * slots, tps, slots)[slots - 1]
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep, min_sleep_s=0.001)
    times = send_all(pacer, clock, rows)
    late_bound = 0.001 + overshoot + 1e-9
    for index, sent in enumerate(times):
        due = due_time(plan, index, 100.0)
        assert due - 1e-9 <= sent <= due + late_bound
    # N events at rate r span (N - 1) / r: oversleeping never accumulates.
    assert times[-1] - times[0] == pytest.approx((rows - 1) * slots / tps, abs=late_bound)


def test_pacer_batches_events_that_are_already_due() -> None:
    clock = FakeClock()
    pacer = Pacer(
        schedules([20_000], 20_000, 1)[0], clock.now, clock=clock, sleep=clock.sleep, min_sleep_s=0.002
    )
    send_all(pacer, clock, 20_000)
    assert len(clock.sleeps) <= 501  # ~1 s at >= 2 ms a sleep, not one sleep per event


def test_a_late_start_shifts_the_schedule_by_whole_intervals() -> None:
    clock = FakeClock()
    plan = schedules([10_000, 10_000], 200, 2)[1]  # 100/s, due at 0.005 + i / 100
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep)
    clock.now += 10.0 + 0.0071  # the task started 10 s late (a retry, the next round)
    assert pacer.take(10_000) == 1  # one event, not a 1000-event burst
    assert pacer.late_start_s == pytest.approx(10.0)
    assert pacer.next_due() == pytest.approx(clock.now - 0.0071 + 0.005 + 0.01)  # stagger kept


def test_falling_behind_mid_run_catches_up_at_most_max_lag() -> None:
    clock = FakeClock()
    pacer = Pacer(schedules([10_000], 100, 1)[0], clock.now, clock=clock, sleep=clock.sleep, max_lag_s=0.5)
    assert pacer.take(10) == 1
    clock.now += 10.0  # a 10 s pause mid-run
    assert pacer.take(10_000) == 51  # half a second of catch-up, not a 1000-event burst
    assert pacer.skipped_s == pytest.approx(10.0 - 0.01 - 0.5)


def test_unthrottled_pacer_never_sleeps() -> None:
    clock = FakeClock()
    pacer = Pacer(schedules([5_000], 0, 1)[0], clock.now, clock=clock, sleep=clock.sleep)
    assert pacer.take(5_000) == 5_000
    pacer.wait()
    assert clock.sleeps == []

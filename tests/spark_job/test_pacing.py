"""Pacing math: real-valued shares that add up to the requested TPS, absolute deadlines, no drift, and
a ceiling after a stall (docs/rules.md rules 6 and 8)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_job.publish.pacing import (
    CATCH_UP,
    MAX_STEP_S,
    Pacer,
    PartitionSchedule,
    Segment,
    due_time,
    partition_schedule,
    schedules,
    window_cap,
)
from tests.fixtures.pacing import FakeClock, Grant, busiest_second

TPS = st.integers(min_value=1, max_value=1_000_000)
SLOTS = st.integers(min_value=1, max_value=512)


def send_all(pacer: Pacer, clock: FakeClock, count: int, *, chunk: int = 1_000) -> list[float]:
    """Drive the pacer like the publisher does and return each event's send time."""
    times: list[float] = []
    while len(times) < count:
        granted = pacer.take(min(chunk, count - len(times)))
        times.extend([clock.now] * granted)
        if not granted:
            pacer.wait(max_wait_s=0.1)
    return times


def drive(
    pacer: Pacer,
    clock: FakeClock,
    count: int,
    *,
    stalls: Sequence[tuple[int, float]] = (),
    chunk: int = 1_000,
    max_wait_s: float = 0.1,
) -> list[Grant]:
    """Drive like the publisher, but the clock jumps ``seconds`` (a stall) before the first take after
    ``at`` events of this drive went out, for each ``(at, seconds)`` of ``stalls``; return the grants."""
    grants: list[Grant] = []
    pending = sorted(stalls)
    done = 0
    for _ in range(1_000_000):  # a bound, so a pacer that stops granting fails instead of hanging
        if done >= count:
            return grants
        while pending and done >= pending[0][0]:
            clock.now += pending.pop(0)[1]
        granted = pacer.take(min(chunk, count - done))
        if granted:
            grants.append((clock.now, granted))
            done += granted
        else:
            before = clock.now
            pacer.wait(max_wait_s)
            assert clock.now > before, f"nothing granted and no wait, {done} of {count} events sent"
    raise AssertionError(f"the pacer stopped granting after {done} of {count} events")


def all_deadlines(sizes: list[int], tps: float, slots: int) -> list[float]:
    plans = schedules(sizes, tps, slots)
    return sorted(plan.due(i) for plan, rows in zip(plans, sizes, strict=True) for i in range(rows))


def round_sizes(data: st.DataObject, slots: int, most: int = 60) -> list[int]:
    rounds = data.draw(st.integers(1, 3), label="rounds")
    return data.draw(st.lists(st.integers(0, most), min_size=slots * rounds, max_size=slots * rounds))


@given(tps=TPS, slots=st.integers(1, 16), data=st.data())
def test_shares_are_proportional_to_size_and_sum_to_tps_in_every_round(
    tps: int, slots: int, data: st.DataObject
) -> None:
    sizes = round_sizes(data, slots, most=10_000)
    for first in range(0, len(sizes), slots):
        members = sizes[first : first + slots]
        shares = [
            1 / schedules(sizes, tps, slots)[first + slot].interval(0)
            for slot, rows in enumerate(members)
            if rows
        ]
        if shares:
            assert math.isclose(sum(shares), tps, rel_tol=1e-9)
            assert all(
                math.isclose(share, tps * rows / sum(members))
                for share, rows in zip(shares, [rows for rows in members if rows], strict=True)
            )


def test_rates_are_real_numbers_with_no_floor_of_one_per_slot() -> None:
    plans = schedules([10] * 56, 10, 56)
    assert [plan.interval(0) for plan in plans] == [pytest.approx(5.6)] * 56  # 10/s in total


@settings(deadline=None)
@given(
    tps=st.integers(1, 50_000),
    slots=st.integers(1, 16),
    data=st.data(),
)
def test_every_rounds_deadlines_are_the_grid_k_over_tps_whatever_the_skew(
    tps: int, slots: int, data: st.DataObject
) -> None:
    """Proportional shares on one grid: round r's N events are due at start + k / tps, k = 0 .. N - 1,
    each exactly once, so its last event is due at (N - 1) / tps and the next round starts at N / tps."""
    sizes = round_sizes(data, slots)
    plans = schedules(sizes, tps, slots)
    start = 0
    for first in range(0, len(sizes), slots):
        members = range(first, min(first + slots, len(sizes)))
        ticks = sorted(plans[p].due(i) * tps for p in members for i in range(sizes[p]))
        assert ticks == pytest.approx([start + k for k in range(len(ticks))], abs=1e-6)
        start += len(ticks)
    # hence never more than ceil(tps) deadlines in any second [a, a + 1), one more if closed
    ticks = [round(due * tps) for due in all_deadlines(sizes, tps, slots)]
    assert all(bisect.bisect_left(ticks, tick + tps) - at <= math.ceil(tps) for at, tick in enumerate(ticks))


@given(sizes=st.lists(st.integers(1, 5_000), min_size=1, max_size=12), tps=st.floats(0.5, 1e5))
def test_every_partition_of_a_round_ends_within_its_own_interval_of_the_rounds_end(
    sizes: list[int], tps: float
) -> None:
    total, slots = sum(sizes), len(sizes)
    for partition, rows in enumerate(sizes):
        last = partition_schedule(sizes, tps, slots, partition).due(rows - 1)
        assert last * tps >= total - total / (2 * rows) - slots / 2 - 1
        assert last * tps <= total - 1 + 1e-6


@settings(deadline=None)
@given(tps=st.floats(1, 20_000), slots=st.integers(1, 8), data=st.data())
def test_a_task_never_has_more_deadlines_in_a_second_than_its_window_share_allows(
    tps: float, slots: int, data: st.DataObject
) -> None:
    sizes = data.draw(st.lists(st.integers(1, 400), min_size=slots, max_size=slots))
    for plan in schedules(sizes, tps, slots):
        deadlines = [plan.due(i) for i in range(plan.rows)]
        busiest = max(bisect.bisect_left(deadlines, d + 1) - at for at, d in enumerate(deadlines))
        assert busiest <= window_cap(plan.window_share(0))


@given(
    tps=st.integers(1, 50_000), slots=st.integers(1, 16), rows=st.integers(1, 60), rounds=st.integers(1, 3)
)
def test_equal_partitions_form_one_even_sequence(tps: int, slots: int, rows: int, rounds: int) -> None:
    deadlines = all_deadlines([rows] * (slots * rounds), tps, slots)
    # Event g of the whole run is due at g / tps: exactly tps per second, no bursts, no gaps, no tail.
    assert all(math.isclose(due, g / tps, rel_tol=1e-9, abs_tol=1e-9) for g, due in enumerate(deadlines))


@given(tps=TPS, slots=SLOTS, rows=st.integers(1, 10_000))
def test_equal_shares_pace_each_slot_at_tps_over_w(tps: int, slots: int, rows: int) -> None:
    for slot, plan in enumerate(schedules([rows] * slots, tps, slots)):
        for index in (0, rows // 2, rows - 1):  # rate tps / W, phase slot / W
            assert math.isclose(plan.due(index), (index * slots + slot) / tps, rel_tol=1e-12)


def test_staggered_slots_give_even_seconds_at_low_tps() -> None:
    # 8 slots at 10 TPS in phase would give seconds of 8 and 16 events; staggered they give 10.
    deadlines = all_deadlines([50] * 8, 10, 8)
    assert [sum(1 for d in deadlines if s <= d < s + 1) for s in range(40)] == [10] * 40


def test_uneven_partitions_keep_every_second_at_tps_to_the_end() -> None:
    deadlines = all_deadlines([13, 13, 14, 13, 13, 13, 13, 13], 5, 8)  # T < W, near-equal sizes
    seconds = [sum(1 for d in deadlines if s <= d < s + 1) for s in range(22)]
    assert seconds == [5] * 21 + [0]  # no tail: the larger partition does not finish alone


def test_a_larger_partition_carries_a_larger_share_interleaved_with_the_smaller_one() -> None:
    """Ideal times (i + 1/2) / n in order, ties to the lower partition: L S L L L S L L, 1/tps apart."""
    small, large = schedules([2, 6], 10, 2)
    assert [small.due(i) for i in range(2)] == pytest.approx([0.1, 0.5])
    assert [large.due(i) for i in range(6)] == pytest.approx([0.0, 0.2, 0.3, 0.4, 0.6, 0.7])


def test_a_hot_key_partition_carries_most_of_the_rate() -> None:
    cold, hot = schedules([10, 990], 100, 2)
    assert 1 / hot.interval(0) == pytest.approx(99.0) and 1 / cold.interval(0) == pytest.approx(1.0)
    assert hot.due(989) == pytest.approx(9.99) and cold.due(9) == pytest.approx(9.5, abs=0.02)


def test_the_next_round_starts_when_this_ones_rows_are_sent_at_tps() -> None:
    plans = schedules([3, 3, 3, 3], 6, 2)  # two rounds of two
    assert plans[2].due(0) == pytest.approx(plans[1].due(2) + 1 / 6)
    assert plans[3].due(0) == pytest.approx(1.0 + 1 / 6)
    uneven = schedules([2, 4, 3, 3], 6, 2)
    assert uneven[2].due(0) == pytest.approx(6 / 6)  # its 6 rows at 6/s: no tail to wait out


def test_empty_partitions_give_their_share_to_the_others() -> None:
    empty, full = schedules([0, 4], 10, 2)
    assert empty.rows == 0
    assert [full.due(i) for i in range(4)] == pytest.approx([0.0, 0.1, 0.2, 0.3])


def test_unthrottled_schedules_are_always_due() -> None:
    plan = schedules([3, 4], 0, 2)[1]
    assert (plan.rows, plan.events_due(0.0), plan.due(3)) == (4, 4, 0.0)


def test_due_time_is_absolute() -> None:
    plan = PartitionSchedule(4.0, (Segment(start_s=2.0, first=0, members=(10, 10), own=1),))
    assert due_time(plan, 3, t0=1000.0) == 1000.0 + 2.0 + (3 * 2 + 1) / 4.0


@given(tps=st.floats(0.01, 1e6), start=st.floats(0, 1e6), data=st.data())
def test_an_event_is_due_exactly_at_its_deadline(tps: float, start: float, data: st.DataObject) -> None:
    members = tuple(data.draw(st.lists(st.integers(1, 2_000_000), min_size=1, max_size=64)))
    own = data.draw(st.integers(0, len(members) - 1))
    segment = Segment(start, first=0, members=members, own=own)
    index = data.draw(st.integers(0, members[own] - 1))
    assert segment.events_due(segment.due(index, tps), tps) == index + 1
    if index:
        assert segment.events_due(math.nextafter(segment.due(index, tps), -math.inf), tps) == index


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
    start = clock.now
    clock.now += 10.0 + 0.0071  # the task started 10 s late (a retry, the next round)
    assert pacer.take(10_000) == 0  # nothing yet: its next slot on its own grid is 3 ms away
    assert pacer.late_start_s == pytest.approx(10.01)  # whole intervals, rounded up
    assert pacer.skipped_s == 0.0  # starting late is not falling behind: nothing is owed
    assert pacer.next_due() == pytest.approx(start + 10.01 + 0.005)  # stagger kept
    clock.now = pacer.next_due()
    assert pacer.take(10_000) == 1  # one event, not a 1000-event burst


def test_a_start_less_than_half_a_grid_step_late_is_on_time_and_shifts_nothing() -> None:
    """T=5 on 8 slots: each task's own interval is over a second, the round's grid step 0.2 s. A task
    10 ms late sent its event at its next own slot, 1.28 s later, and the whole run ended that late."""
    plans = schedules([19, 25, 14, 20, 22, 17, 21, 16], 5, 8)
    plan = plans[1]
    clock = FakeClock()
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep)
    start = clock.now
    clock.now = start + plan.due(0) + 0.01
    assert pacer.take(10) == 1  # at once: the next event of any task is 0.19 s away
    assert pacer.late_start_s == pytest.approx(0.01)
    grants = [(clock.now, 1), *drive(pacer, clock, plan.rows - 1)]
    assert [at - start for at, _ in grants[1:]] == pytest.approx(
        [plan.due(i) for i in range(1, plan.rows)], abs=0.002
    )
    late = Pacer(plan, start, clock=clock, sleep=clock.sleep)
    clock.now = start + plan.due(0) + 0.11  # over half a step: it waits for its own next slot
    assert late.take(10) == 0
    assert late.late_start_s == pytest.approx(plan.interval(0))


def test_a_task_starting_within_an_interval_late_keeps_every_second_at_tps() -> None:
    """T=3 on two slots, the second task starting 0.8 s late: it waits for its next slot on its grid
    instead of sending its overdue first event at once, which paired two events and let the window
    cap hold the third back (seconds cycled 4, 3, 2, 3 on the topic)."""
    grants: list[Grant] = []
    for slot, plan in enumerate(schedules([30, 30], 3, 2)):
        clock = FakeClock()
        pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep)
        clock.now += 0.8 * slot
        grants += drive(pacer, clock, plan.rows)
    first = min(at for at, _ in grants)
    seconds = [0] * 25
    for at, granted in grants:
        seconds[int(at - first + 1 / 6)] += granted  # buckets from half an interval before the first
    assert seconds[1:19] == [3] * 18, seconds


def test_a_stall_mid_run_is_recovered_at_most_catch_up_above_the_share() -> None:
    clock = FakeClock()
    pacer = Pacer(schedules([10_000], 100, 1)[0], clock.now, clock=clock, sleep=clock.sleep)
    assert pacer.take(10) == 1
    clock.now += 10.0  # a 10 s pause mid-run
    # Only the first MAX_STEP_S of the pause earns schedule time (at 1 + CATCH_UP): 15 events, not 1000.
    assert pacer.take(10_000) == math.floor((1 + CATCH_UP) * MAX_STEP_S * 100) == 15
    assert pacer.skipped_s == pytest.approx(10.0 - (1 + CATCH_UP) * MAX_STEP_S)
    grants = drive(pacer, clock, 10_000 - 16)
    assert busiest_second(grants) <= window_cap(100) == 106  # 105/s while behind, never a burst
    # ~95 s of catch-up at 1.05x recover ~4.75 s of the ~10 s owed; the rest is still owed at the end.
    assert pacer.sent == 10_000
    catching_up = grants[-1][0] - 110.0
    assert pacer.skipped_s == pytest.approx(10.0 - CATCH_UP * catching_up, abs=0.05)
    assert grants[-1][0] - 100.0 == pytest.approx(99.99 + pacer.skipped_s, abs=0.01)


def test_a_short_stall_is_made_up_and_nothing_is_owed_at_the_end() -> None:
    clock = FakeClock()
    pacer = Pacer(schedules([3_000], 100, 1)[0], clock.now, clock=clock, sleep=clock.sleep)
    drive(pacer, clock, 300)
    clock.now += 0.5  # 0.35 s owed after it, 0.35 / 0.05 = 7 s to make up, 27 s of run left
    assert pacer.take(3_000) > 0 and pacer.skipped_s > 0.3
    grants = drive(pacer, clock, 3_000 - pacer.sent)
    assert busiest_second(grants) <= window_cap(100)
    assert pacer.skipped_s == 0.0
    assert grants[-1][0] - 100.0 == pytest.approx(29.99, abs=0.002)  # it finishes on schedule


def test_unthrottled_pacer_never_sleeps() -> None:
    clock = FakeClock()
    pacer = Pacer(schedules([5_000], 0, 1)[0], clock.now, clock=clock, sleep=clock.sleep)
    assert pacer.take(5_000) == 5_000
    pacer.wait()
    assert clock.sleeps == []


# --- the ceiling after a stall (docs/rules.md rule 8) -------------------------------------------
#
# What these properties hold, for one task of window share s events/s (its share, or with unequal
# sizes the most its interleaved deadlines put in one second) and any clock: the events granted in any window
# [a, a + 1) of the clock number at most window_cap(s) = floor((1 + CATCH_UP) * s) + 1, which is at
# most ceil((1 + CATCH_UP) * s) + 1. So W tasks whose shares sum to tps grant at most
# (1 + CATCH_UP) * tps + W in any second, whichever of them stall.


@given(share=st.floats(1e-3, 1e6))
def test_the_window_cap_allows_the_catch_up_and_one_event_more(share: float) -> None:
    cap = window_cap(share)
    assert (1 + CATCH_UP) * share < cap <= math.ceil((1 + CATCH_UP) * share) + 1


def _sizes(data: st.DataObject, tps: float, slots: int, seconds: float, most: int) -> list[int]:
    """Partition sizes for one round whose schedule lasts at most about ``seconds``."""
    largest = max(1, min(most, int(tps * seconds / slots)))
    return data.draw(st.lists(st.integers(1, largest), min_size=slots, max_size=slots))


@settings(max_examples=60, deadline=None)
@given(
    tps=st.floats(1, 50_000),
    slots=st.integers(1, 8),
    overshoot=st.sampled_from([0.0, 0.0002, 0.003]),
    chunk=st.sampled_from([7, 1_000]),
    data=st.data(),
)
def test_without_a_stall_every_event_goes_at_the_first_look_after_its_deadline(
    tps: float, slots: int, overshoot: float, chunk: int, data: st.DataObject
) -> None:
    # Steady state is exactly the schedule: the catch-up rule and the cap never hold anything back.
    sizes = _sizes(data, tps, slots, seconds=30, most=800)
    plan = schedules(sizes, tps, slots)[data.draw(st.integers(0, slots - 1))]
    clock = FakeClock(overshoot=overshoot, seed=slots)
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep)
    deadlines = [due_time(plan, index, 100.0) for index in range(plan.rows)]
    while pacer.sent < plan.rows:
        limit = min(chunk, plan.rows - pacer.sent)
        due = sum(1 for deadline in deadlines[pacer.sent : pacer.sent + limit] if deadline <= clock.now)
        assert pacer.take(limit) == due
        if not due:
            pacer.wait(0.1)
    assert (pacer.skipped_s, pacer.late_start_s) == (0.0, 0.0)


@settings(max_examples=80, deadline=None)
@given(
    tps=st.floats(1, 20_000),
    slots=st.integers(1, 8),
    overshoot=st.sampled_from([0.0, 0.0002, 0.003]),
    data=st.data(),
)
def test_after_any_stalls_no_second_exceeds_the_cap_and_every_event_goes(
    tps: float, slots: int, overshoot: float, data: st.DataObject
) -> None:
    sizes = _sizes(data, tps, slots, seconds=20, most=2_000)
    partition = data.draw(st.integers(0, slots - 1))
    plan = schedules(sizes, tps, slots)[partition]
    stalls = data.draw(
        st.lists(st.tuples(st.integers(0, plan.rows - 1), st.floats(0, 8)), max_size=4), label="stalls"
    )
    clock = FakeClock(overshoot=overshoot, seed=len(stalls))
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep)
    grants = drive(pacer, clock, plan.rows, stalls=stalls)
    assert sum(granted for _, granted in grants) == pacer.sent == plan.rows  # nothing lost
    share = plan.window_share(0)
    assert busiest_second(grants) <= math.ceil((1 + CATCH_UP) * share) + 1
    stalled = sum(seconds for _, seconds in stalls)
    assert 0.0 <= pacer.skipped_s <= stalled  # what is owed at the end comes from the stalls only
    if stalled == 0:
        assert pacer.skipped_s == 0.0


@settings(max_examples=30, deadline=None)
@given(
    tps=st.floats(10, 20_000),
    slots=st.integers(2, 6),
    stall_s=st.floats(0.2, 8),
    data=st.data(),
)
def test_the_slots_together_stay_under_the_ceiling_when_one_of_them_stalls(
    tps: float, slots: int, stall_s: float, data: st.DataObject
) -> None:
    rows = max(1, min(1_500, int(tps / slots * 15)))
    stalled = data.draw(st.integers(0, slots - 1), label="stalled slot")
    at = data.draw(st.integers(0, rows - 1), label="after events")
    grants: list[Grant] = []
    for slot, plan in enumerate(schedules([rows] * slots, tps, slots)):  # shares sum to tps
        clock = FakeClock(overshoot=0.002, seed=slot)  # one timeline: every clock starts at 100.0
        pacer = Pacer(plan, 100.0, clock=clock, sleep=clock.sleep)
        grants += drive(pacer, clock, rows, stalls=[(at, stall_s)] if slot == stalled else [])
    assert sum(granted for _, granted in grants) == rows * slots
    assert busiest_second(grants) <= (1 + CATCH_UP) * tps + slots


@settings(max_examples=30, deadline=None)
@given(tps=st.floats(1, 500), slots=st.integers(2, 6), data=st.data())
def test_skewed_slots_starting_late_stay_under_the_ceiling(
    tps: float, slots: int, data: st.DataObject
) -> None:
    """Any skew, any start delays: a late task shifts its own schedule by whole intervals of its own,
    off the round's grid when sizes differ, so a second may hold an event more per slot, no more."""
    most = max(1, int(tps * 4 / slots))
    sizes = data.draw(st.lists(st.integers(1, most), min_size=slots, max_size=slots), label="sizes")
    delays = data.draw(st.lists(st.floats(0, 3), min_size=slots, max_size=slots), label="delays")
    grants: list[Grant] = []
    for slot, plan in enumerate(schedules(sizes, tps, slots)):
        clock = FakeClock(overshoot=0.001, seed=slot)
        pacer = Pacer(plan, 100.0, clock=clock, sleep=clock.sleep)
        clock.now += delays[slot]
        grants += drive(pacer, clock, plan.rows)
    assert sum(granted for _, granted in grants) == sum(sizes)
    assert busiest_second(grants) <= (1 + CATCH_UP) * tps + slots


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(2, 2_000), tps=st.integers(1, 5_000), data=st.data())
def test_a_resumed_pacer_sends_the_rest_on_their_own_deadlines(
    rows: int, tps: int, data: st.DataObject
) -> None:
    """A transactional retry skips what its predecessor committed: its first event keeps its own
    deadline (it is not owed, so nothing bursts), and the rest follow the schedule from there."""
    resumed = data.draw(st.integers(1, rows - 1))
    clock = FakeClock()
    plan = schedules([rows], tps, 1)[0]
    pacer = Pacer(plan, clock.now, clock=clock, sleep=clock.sleep, min_sleep_s=0.001)
    pacer.resume(resumed)
    times = send_all(pacer, clock, rows - resumed)
    for index, sent in enumerate(times, start=resumed):
        due = due_time(plan, index, 100.0)
        assert due - 1e-9 <= sent <= due + 0.001 + 1e-9
    assert pacer.take(1) == 0  # every row of the partition is accounted for

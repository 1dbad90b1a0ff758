"""Time-shaped pacing in the math: the warp keeps every event at its own scaled time until the ceiling
would break, then lets them out first in first out at the ceiling; tasks follow their events' own
deadlines, and one that starts late catches up within the ceiling of rule 8."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_job.publish.pacing import CATCH_UP, Pacer, TimedSchedule
from spark_job.publish.time_shape import BUCKET_S, MAX_BUCKETS, Shaped, bucket_width, shape
from spark_job.publish.timeline import Timeline
from tests.fixtures.pacing import FakeClock, Grant, busiest_second

COUNTS = st.lists(st.integers(0, 400), min_size=1, max_size=300)


def per_second(shaped: Shaped) -> list[float]:
    """Events due in each whole second of the schedule: the histogram's span, or until the last goes."""
    departures = shaped.departures
    span = max(shaped.last_s, len(departures.departed) * departures.width)
    return [departures.between(s, s + 1) for s in range(math.ceil(span))]


def arrivals(counts: list[int], width: float, seed: int = 0) -> list[float]:
    """Events spread at random inside their buckets, in time order."""
    rng = random.Random(seed)
    times = [(i + rng.random()) * width for i, count in enumerate(counts) for _ in range(count)]
    return sorted(times)


@settings(max_examples=200, deadline=None)
@given(counts=COUNTS, ceiling=st.integers(1, 2_000))
def test_the_warp_keeps_order_never_sends_early_and_idles_only_when_nothing_waits(
    counts: list[int], ceiling: int
) -> None:
    width = BUCKET_S
    shaped = shape(counts, width, ceiling)
    xs = [i * width / 7 for i in range(len(counts) * 7 + 1)]
    ys = [shaped.warp.at(x) for x in xs]

    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(ys))  # monotone: order is kept
    assert all(y >= x - 1e-9 for x, y in zip(xs, ys, strict=True))  # never before its own time
    if all(count / width <= ceiling for count in counts):
        assert all(math.isclose(x, y, abs_tol=1e-9) for x, y in zip(xs, ys, strict=True))
    assert shaped.rows == sum(counts)
    assert math.isclose(sum(per_second(shaped)), sum(counts), rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=200, deadline=None)
@given(counts=COUNTS, ceiling=st.integers(1, 2_000))
def test_the_fluid_schedule_never_puts_more_than_the_ceiling_in_a_second(
    counts: list[int], ceiling: int
) -> None:
    shaped = shape(counts, BUCKET_S, ceiling)

    assert all(target <= ceiling * (1 + 1e-9) + 1e-6 for target in per_second(shaped)), per_second(shaped)
    # and it ends when a queue served at the ceiling would: never before all of it could have gone
    assert shaped.last_s >= sum(counts) / ceiling - 1e-9
    assert shaped.last_s >= shaped.unshaped_last_s - 1e-9


def test_a_burst_above_the_ceiling_slides_later_and_the_lull_after_it_absorbs_it() -> None:
    # one second of 300 events then four quiet seconds, at most 100 a second: 3 s to let the burst out
    counts = [30] * 10 + [0] * 40  # tenths of a second
    shaped = shape(counts, 0.1, 100)

    assert shaped.peak == 300
    assert [round(t) for t in per_second(shaped)[:4]] == [100, 100, 100, 0]
    assert shaped.warp.at(0.999) == pytest.approx(0.999 * 3, rel=1e-6)  # the last of the burst at ~3 s
    assert shaped.warp.at(4.0) == pytest.approx(4.0)  # back on its own time once the queue is empty
    assert shaped.last_s == pytest.approx(3.0)


@pytest.mark.parametrize("offset", [0.25, 0.5, 0.86])
def test_the_target_line_at_any_offset_counts_the_deadlines_that_fall_in_each_second(offset: float) -> None:
    """The chart's seconds are wall-clock seconds, a fraction of a second off the schedule's: read at
    the histogram's resolution, each holds what the events' own deadlines put in it. Spreading each
    whole schedule second evenly instead misplaced a burst's draining edge by tens of events."""
    width = 0.02
    counts = [4] * 150 + [100] * 25 + [4] * 150  # 200/s, half a second at 5,000/s, 200/s again
    shaped = shape(counts, width, 2_000)
    deadlines = [shaped.warp.at((i + (j + 0.5) / n) * width) for i, n in enumerate(counts) for j in range(n)]
    seconds = range(math.ceil(shaped.last_s) - 1)
    due = [sum(1 for d in deadlines if k + offset <= d < k + 1 + offset) for k in seconds]
    line = [shaped.departures.between(k + offset, k + 1 + offset) for k in seconds]
    assert max(abs(a - b) for a, b in zip(due, line, strict=True)) <= 2, (due, line)
    whole = per_second(shaped)
    spread = [(1 - offset) * whole[k] + offset * whole[k + 1] for k in seconds]
    assert max(abs(a - b) for a, b in zip(due, spread, strict=True)) > 50  # what the line was before


def test_a_window_under_the_ceiling_keeps_its_own_times() -> None:
    counts = [1, 5, 0, 0, 9, 2]  # tenths of a second
    shaped = shape(counts, 0.1, 1_000)

    assert shaped.slid_s == 0
    assert shaped.warp.at(0.42) == pytest.approx(0.42)
    assert shaped.peak == sum(counts)


def test_buckets_widen_so_a_long_window_stays_bounded() -> None:
    assert bucket_width(60) == BUCKET_S
    assert bucket_width(86_400) * MAX_BUCKETS == pytest.approx(86_400)


def drive(
    pacer: Pacer, clock: FakeClock, schedule: TimedSchedule, dues: list[float], batch: int
) -> list[Grant]:
    """Like the publisher: a batch's deadlines are learnt, then its events go as they fall due."""
    grants: list[Grant] = []
    for start in range(0, len(dues), batch):
        schedule.extend(dues[start : start + batch])
        done = start
        end = min(len(dues), start + batch)
        while done < end:
            granted = pacer.take(end - done)
            if granted:
                grants.append((clock.now, granted))
                done += granted
            else:
                pacer.wait(0.1)
    return grants


@settings(max_examples=50, deadline=None)
@given(counts=st.lists(st.integers(0, 200), min_size=5, max_size=100), ceiling=st.integers(50, 1_000))
def test_a_task_sends_each_event_at_its_deadline_and_no_second_above_the_ceiling(
    counts: list[int], ceiling: int
) -> None:
    shaped = shape(counts, BUCKET_S, ceiling)
    dues = [shaped.warp.at(x) for x in arrivals(counts, BUCKET_S)]
    schedule = TimedSchedule(len(dues))
    clock = FakeClock(0.0)
    pacer = Pacer(schedule, 0.0, clock=clock, sleep=clock.sleep)

    grants = drive(pacer, clock, schedule, dues, batch=64)

    assert pacer.sent == len(dues) and pacer.skipped_s == 0
    sent_at = [at for at, granted in grants for _ in range(granted)]
    assert all(at >= due - 1e-9 and at - due < 0.01 for at, due in zip(sent_at, dues, strict=True))
    # the fluid model holds each whole bucket to the ceiling; events bunched inside the buckets at a
    # second's two edges can put up to those buckets' counts more in it
    assert busiest_second(grants) <= ceiling + 2 * max(counts)


def test_a_task_that_starts_late_catches_up_within_the_ceiling_never_as_a_burst() -> None:
    dues = [k / 100 for k in range(1_000)]  # 100/s for 10 s
    schedule = TimedSchedule(len(dues))
    clock = FakeClock(2.0)  # it looks for the first time 2 s after t0
    pacer = Pacer(schedule, 0.0, clock=clock, sleep=clock.sleep)

    grants = drive(pacer, clock, schedule, dues, batch=100)

    assert pacer.late_start_s == pytest.approx(2.0)
    assert busiest_second(grants) <= (1 + CATCH_UP) * 100 + 1
    assert pacer.sent == 1_000


def test_a_pause_holds_a_shaped_task_and_the_resume_continues_its_own_times() -> None:
    """Live control bends a shaped schedule as it bends a flat one: nothing goes while paused, and
    the events after the resume keep their spacing (no burst of what the pause held)."""
    dues = [k / 50 for k in range(500)]  # 50/s for 10 s
    schedule = TimedSchedule(len(dues))
    clock = FakeClock(0.0)
    timeline = Timeline.of(0.0, [(3.0, 0.0), (6.0, 1.0)])  # paused from 3 s to 6 s
    pacer = Pacer(schedule, 0.0, clock=clock, sleep=clock.sleep, timeline=timeline)

    grants = drive(pacer, clock, schedule, dues, batch=100)

    assert not [at for at, _ in grants if 3.01 < at < 6.0], "sent while paused"
    assert busiest_second(grants) <= 50 + 1
    assert max(at for at, _ in grants) == pytest.approx(10 + 3 - 1 / 50, abs=0.02)  # ends 3 s later

"""Pacing math: how W independent tasks add up to exactly ``tps`` events per second (docs/rules.md, rule 6).

There is no coordinator at run time, so the schedule is fixed up front from the partition sizes
(counted on the driver) and each task only follows its own deadlines:

* Rates are real numbers, never floored: 10 TPS over 56 slots is one event every 5.6 s per slot.
* Partitions run in rounds of W (Spark launches tasks in partition order, one per free slot), so
  partition ``p`` is slot ``p mod W`` of round ``p // W``; a round lasts ``rows_in_round / tps``
  seconds and the next one starts where it ended, so a slot's next partition continues its
  schedule instead of restarting.
* Within a round, the tasks that still hold rows share ``tps`` equally, staggered: with A of them
  active, the one ranked ``q`` sends its j-th event of that stretch at ``(j * A + q) / tps``. With
  equal partitions that is simply ``tps / W`` per slot, phases ``s / W`` of an interval apart; when
  smaller partitions run out, the larger ones speed up to keep the total (no tail). Either way the
  union of all deadlines is one evenly spaced sequence, ``1 / tps`` apart, whatever the sizes.
* Deadlines are absolute (on a monotonic clock), so sleep overshoot never accumulates into drift.
  Events already due go out as one batch, which keeps per-event Python overhead low.
* Lateness is absorbed, not burst out: see ``Pacer``.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Segment:
    """A stretch of a partition's events while ``stride`` tasks share the rate; this one is ``rank``."""

    start_s: float  # seconds after the job-wide t0 at which the stretch begins
    first: int  # partition-local index of its first event
    count: int
    stride: int  # tasks active in the stretch
    rank: int  # this task's place among them (its stagger)

    def due(self, index: int, tps: float) -> float:
        return self.start_s + ((index - self.first) * self.stride + self.rank) / tps

    def events_due(self, elapsed: float, tps: float) -> int:
        """Events of this stretch due ``elapsed`` seconds after t0, exactly consistent with ``due``."""
        if self.count == 0 or elapsed < self.due(self.first, tps):
            return 0
        done = math.floor(((elapsed - self.start_s) * tps - self.rank) / self.stride) + 1
        done = max(1, min(self.count, done))
        while done < self.count and self.due(self.first + done, tps) <= elapsed:
            done += 1
        while done > 1 and self.due(self.first + done - 1, tps) > elapsed:
            done -= 1
        return done


@dataclass(frozen=True)
class PartitionSchedule:
    """When each event of one partition is due, in seconds after t0; ``tps`` 0 = unthrottled."""

    tps: float
    segments: tuple[Segment, ...]

    @cached_property
    def rows(self) -> int:
        return sum(segment.count for segment in self.segments)

    @cached_property
    def _firsts(self) -> list[int]:
        return [segment.first for segment in self.segments]

    def due(self, index: int) -> float:
        if self.tps == 0:
            return 0.0
        return self._segment(index).due(index, self.tps)

    def interval(self, index: int) -> float:
        """Seconds between this task's events around ``index`` (0 when unthrottled)."""
        return 0.0 if self.tps == 0 else self._segment(index).stride / self.tps

    def events_due(self, elapsed: float) -> int:
        """How many events are due ``elapsed`` seconds after t0."""
        if self.tps == 0:
            return self.rows
        due = 0
        for segment in self.segments:
            reached = segment.events_due(elapsed, self.tps)
            due += reached
            if reached < segment.count:
                break
        return due

    def _segment(self, index: int) -> Segment:
        return self.segments[max(0, bisect.bisect_right(self._firsts, index) - 1)]


def slot_rates(tps: float, slots: int) -> list[float]:
    """Each slot's rate when shares are equal: a real-valued ``tps / W``, summing to ``tps``."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    if tps < 0:
        raise ValueError(f"tps must be >= 0, got {tps}")
    return [tps / slots] * slots


def partition_schedule(sizes: Sequence[int], tps: float, slots: int, partition: int) -> PartitionSchedule:
    """The schedule of ``partition`` when partitions of ``sizes`` rows run ``slots`` at a time."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    if tps == 0:
        return PartitionSchedule(0, (Segment(0.0, 0, sizes[partition], 1, 0),))
    first = partition - partition % slots
    members = sizes[first : first + slots]
    own = partition - first
    start = sum(sizes[:first]) / tps  # rounds are back to back: earlier rows / tps
    segments: list[Segment] = []
    level = 0  # rows per active task already scheduled
    for top in sorted({rows for rows in members if rows > 0}):
        if members[own] <= level:
            break
        active = [slot for slot, rows in enumerate(members) if rows > level]
        if own in active:
            segments.append(Segment(start, level, top - level, len(active), active.index(own)))
        start += len(active) * (top - level) / tps
        level = top
    return PartitionSchedule(tps, tuple(segments))


def schedules(sizes: Sequence[int], tps: float, slots: int) -> list[PartitionSchedule]:
    return [partition_schedule(sizes, tps, slots, partition) for partition in range(len(sizes))]


def due_time(schedule: PartitionSchedule, index: int, t0: float) -> float:
    """Absolute (clock) time at which event ``index`` of the partition is due."""
    return t0 + schedule.due(index)


class Pacer:
    """Hands out permission to send, by absolute deadline, for one task.

    ``take(limit)`` returns how many events may go now; ``wait(max_wait_s)`` sleeps until the next
    deadline (at least ``min_sleep_s``, so due events gather into small batches; at most
    ``max_wait_s``, so the caller can serve callbacks and progress).

    Lateness is never sent out as a burst. A task that starts late (slow launch, next round, retry)
    shifts its schedule by whole intervals of its own, which keeps its stagger among the slots; a
    task that falls behind mid-run catches up at most ``max_lag_s`` and skips the rest.
    """

    def __init__(
        self,
        schedule: PartitionSchedule,
        t0: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        min_sleep_s: float = 0.001,
        max_lag_s: float = 0.25,
    ) -> None:
        self._schedule = schedule
        self._t0 = t0  # clock time of the schedule's zero; moves later when lateness is given up
        self._clock = clock
        self._sleep = sleep
        self._min_sleep_s = min_sleep_s
        self._max_lag_s = max_lag_s
        self.sent = 0
        self._started = False
        self.late_start_s = 0.0  # how late the first event was, in whole intervals given up
        self.skipped_s = 0.0  # schedule time given up mid-run, beyond max_lag_s

    @property
    def unthrottled(self) -> bool:
        return self._schedule.tps == 0

    def next_due(self) -> float:
        return self._t0 + self._schedule.due(self.sent)

    def take(self, limit: int) -> int:
        """Claim up to ``limit`` events that are due now; the caller must send exactly that many."""
        if self.unthrottled:
            self.sent += limit
            return limit
        now = self._clock()
        lag = now - self.next_due()
        if not self._started:  # the task's first look at the clock
            self._started = True
            if lag > 0:
                interval = self._schedule.interval(self.sent)
                self.late_start_s = math.floor(lag / interval) * interval
                self._t0 += self.late_start_s
        elif lag > self._max_lag_s:
            self._t0 += lag - self._max_lag_s
            self.skipped_s += lag - self._max_lag_s
        due = self._schedule.events_due(now - self._t0)
        rows = self._schedule.rows
        while due < rows and self._t0 + self._schedule.due(due) <= now:  # agree with next_due()
            due += 1
        count = min(limit, max(0, due - self.sent))
        self.sent += count
        return count

    def wait(self, max_wait_s: float = 0.1) -> None:
        """Sleep toward the next deadline: no longer than ``max_wait_s``, no shorter than the floor."""
        if self.unthrottled or self.sent >= self._schedule.rows:
            return
        delay = self.next_due() - self._clock()
        if delay > 0:
            self._sleep(min(max(delay, self._min_sleep_s), max_wait_s))

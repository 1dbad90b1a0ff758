"""Schedule time versus clock time: how a rate change or a pause bends one shared schedule.

The pacing math (``spark_job.publish.pacing``) plans every slot's deadlines in *schedule seconds*
at the run's first rate. Live control (``spark_job.control``) changes the rate from an instant on:
schedule time then runs at ``new_tps / planned_tps`` schedule seconds per clock second (0 while
paused). Every task applies the same changes at the same instants, so the map from clock to schedule
time is the same on every task, and the deadlines of all slots, which were one evenly spaced grid in
schedule time, stay one grid in clock time: ``new_tps`` apart instead of the old rate, and nothing
during a pause. Resuming continues the schedule where it stopped: no deficit, no burst.

Pure: times are plain floats on whichever clock the caller uses (the pacer's monotonic clock).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Bend:
    """From clock time ``clock`` on, schedule time runs at ``speed``; it reads ``schedule`` there."""

    clock: float
    schedule: float
    speed: float


@dataclass(frozen=True)
class Timeline:
    """A continuous, non-decreasing map between clock time and schedule time, piecewise linear.

    ``bends[0]`` is the schedule's zero (``origin``); before it, the first speed extends backwards.
    """

    bends: tuple[Bend, ...]

    @classmethod
    def fixed(cls, origin: float) -> Timeline:
        """No change: schedule time is clock time since ``origin``."""
        return cls((Bend(origin, 0.0, 1.0),))

    @classmethod
    def of(cls, origin: float, changes: Sequence[tuple[float, float]]) -> Timeline:
        """``changes``: (clock time, speed) in time order; a change at or before ``origin`` sets the
        speed from the start (a run whose rate changed before it began publishing)."""
        bends = [Bend(origin, 0.0, 1.0)]
        for at, speed in changes:
            if speed < 0 or math.isnan(speed):
                raise ValueError(f"speed must be >= 0, got {speed}")
            last = bends[-1]
            if at <= last.clock:
                bends[-1] = Bend(last.clock, last.schedule, speed)
            else:
                bends.append(Bend(at, last.schedule + (at - last.clock) * last.speed, speed))
        return cls(tuple(bends))

    @cached_property
    def _clocks(self) -> list[float]:
        return [bend.clock for bend in self.bends]

    @cached_property
    def _schedules(self) -> list[float]:
        return [bend.schedule for bend in self.bends]

    def _at_clock(self, clock: float) -> Bend:
        return self.bends[max(0, bisect.bisect_right(self._clocks, clock) - 1)]

    def schedule_of(self, clock: float) -> float:
        """The schedule time it is at clock time ``clock``."""
        bend = self._at_clock(clock)
        return bend.schedule + (clock - bend.clock) * bend.speed

    def clock_of(self, schedule: float) -> float:
        """The first clock time at which the schedule reaches ``schedule`` (``inf``: not while paused)."""
        first = self.bends[0]
        if schedule < first.schedule:
            return first.clock + (schedule - first.schedule) / first.speed if first.speed > 0 else -math.inf
        index = bisect.bisect_right(self._schedules, schedule) - 1
        bend = self.bends[index]
        if bend.schedule == schedule:  # reached exactly at a bend: the first bend that reads it
            return self.bends[bisect.bisect_left(self._schedules, schedule)].clock
        if bend.speed == 0:  # paused for good (so far) before reaching it
            return math.inf
        return bend.clock + (schedule - bend.schedule) / bend.speed

    def speed_at(self, clock: float) -> float:
        return self._at_clock(clock).speed

    def max_speed(self, start: float, end: float) -> float:
        """The fastest the schedule ran at any time in ``[start, end]``."""
        first = max(0, bisect.bisect_right(self._clocks, start) - 1)
        last = max(0, bisect.bisect_right(self._clocks, end) - 1)
        return max(bend.speed for bend in self.bends[first : last + 1])

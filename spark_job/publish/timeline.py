"""Schedule time versus clock time: how a rate change or a pause bends one shared schedule.

The pacing math (``spark_job.publish.pacing``) plans every slot's deadlines in *schedule seconds*
at the run's first rate. Live control (``spark_job.control``) changes the rate from an instant on:
schedule time then runs at ``new_tps / planned_tps`` schedule seconds per clock second (0 while
paused). Every task applies the same changes at the same instants, so the map from clock to schedule
time is the same on every task, and the deadlines of all slots, which were one evenly spaced grid in
schedule time, stay one grid in clock time: ``new_tps`` apart instead of the old rate, and nothing
during a pause. Resuming continues the schedule where it stopped: no deficit, no burst. Paused
clock time makes no schedule time, so it earns a task nothing (``ran_at_most``): a task behind at the
pause owes the same after it, and sends it after the resume.

Pure: times are plain floats on whichever clock the caller uses (the pacer's monotonic clock).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
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

    @cached_property
    def _next_running(self) -> list[int]:
        """For each bend, the index of the first bend from it on whose speed is above 0 (or ``len``)."""
        found, nexts = len(self.bends), [0] * len(self.bends)
        for index in range(len(self.bends) - 1, -1, -1):
            if self.bends[index].speed > 0:
                found = index
            nexts[index] = found
        return nexts

    def paused_until(self, clock: float) -> float:
        """When the pause holding at ``clock`` ends (``inf``: no resume yet); ``-inf`` if not paused."""
        index = max(0, bisect.bisect_right(self._clocks, clock) - 1)
        if self.bends[index].speed > 0:
            return -math.inf
        resume = self._next_running[index]
        return self.bends[resume].clock if resume < len(self.bends) else math.inf

    def ran_at_most(self, start: float, end: float, ceiling: float) -> float:
        """Schedule time made in ``[start, end]`` by the stretches running at no more than ``ceiling``
        (all of it with ``ceiling=inf``; paused stretches make none)."""
        return sum(seconds * speed for seconds, speed in self._stretches(start, end) if 0 < speed <= ceiling)

    def _stretches(self, start: float, end: float) -> Iterator[tuple[float, float]]:
        """``(clock seconds, speed)`` of each piece of ``[start, end]`` at one speed, in time order."""
        if end <= start:
            return
        first = max(0, bisect.bisect_right(self._clocks, start) - 1)
        for index in range(first, len(self.bends)):
            bend = self.bends[index]
            span_start = bend.clock if index > 0 else -math.inf  # the first speed extends backwards
            if span_start >= end:
                return
            span_end = self.bends[index + 1].clock if index + 1 < len(self.bends) else math.inf
            yield min(end, span_end) - max(start, span_start), bend.speed


MAX_RAMP_STEP_S = 1.0  # a ramp rises in steps no longer than this
MAX_RAMP_STEPS = 10_000  # and no more of them (a day-long ramp then steps every 8.64 s)


def ramped(
    origin: float, ramp_s: float, start: float, changes: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """``changes`` (clock time, speed; in time order) times a ramp that rises from ``start`` to 1 over
    ``ramp_s`` seconds after ``origin``: the input of ``Timeline.of`` for a ramped run.

    The ramp is a staircase of at most ``MAX_RAMP_STEP_S`` steps, each at the ramp's value at its
    middle, so at the end of every step the schedule has run exactly as far as the straight line says
    (what the plan's ETA assumes) and no speed is ever above what the changes alone allow. Before its
    first step (a change made before the run began) the first step's factor holds.
    """
    if ramp_s <= 0 or not 0 < start <= 1:
        raise ValueError(f"a ramp needs seconds > 0 and a start in (0, 1], got {ramp_s}, {start}")
    steps = max(1, min(math.ceil(ramp_s / MAX_RAMP_STEP_S), MAX_RAMP_STEPS))
    width = ramp_s / steps
    ramp = [(origin + k * width, start + (1 - start) * (k + 0.5) / steps) for k in range(steps)]
    ramp.append((origin + ramp_s, 1.0))
    factor, speed = ramp[0][1], 1.0
    merged: list[tuple[float, float]] = []
    r = c = 0
    while r < len(ramp) or c < len(changes):
        at = min(ramp[r][0] if r < len(ramp) else math.inf, changes[c][0] if c < len(changes) else math.inf)
        while r < len(ramp) and ramp[r][0] == at:
            factor = ramp[r][1]
            r += 1
        while c < len(changes) and changes[c][0] == at:
            speed = changes[c][1]
            c += 1
        merged.append((at, factor * speed))
    return merged

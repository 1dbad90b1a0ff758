"""Time-shaped pacing (``tps=original speed=10x max=5000``): each event at its own time, scaled.

A flat rate turns a day of bursts and lulls into a line; a downstream tested that way never sees a
realistic morning peak. A shaped replay sends every event at ``(event_time - window start) / speed``
seconds after the schedule's start, so the topic gets the original traffic's shape, ``speed`` times
faster, with per-entity order kept (each task sends its partition in event-time order).

``max`` is a hard ceiling per second. Where the scaled traffic would exceed it, events slide later
exactly as a queue served at ``max`` events a second would let them out, first in first out: the
fluid model of the window's histogram (counts per ``width`` seconds of scaled time, uniform within a
bucket). ``Warp`` is that queue's answer as a map from an event's scaled time ``x`` to its deadline
``y >= x``: the identity where the traffic stays under the ceiling, ``x + backlog(x) / max`` where it
does not. The map is monotone, so order is kept, and it is computed once from the histogram (on the
driver for the job, from the table's metadata and rows for the plan) and applied by every task to its
own events: no coordination at run time, one shared clock as for a flat rate.

Pure: lists of counts in, breakpoints out.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

BUCKET_S = 0.02  # a histogram bucket of scaled time: the warp holds the ceiling to this resolution
MAX_BUCKETS = 500_000  # wider buckets beyond (10,000 s of scaled time at 0.02 s)


def bucket_width(span_s: float) -> float:
    """The histogram's bucket for ``span_s`` seconds of scaled time: ``BUCKET_S``, or wider so that
    there are at most ``MAX_BUCKETS``."""
    return max(BUCKET_S, span_s / MAX_BUCKETS)


@dataclass(frozen=True)
class Warp:
    """A monotone, piecewise-linear map from scaled time to deadline: ``xs``/``ys`` are its corners,
    the identity before the first and (shifted by the last backlog, which is 0) after the last."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    def at(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        if not xs or x <= xs[0]:
            return x + (ys[0] - xs[0] if xs else 0.0)
        if x >= xs[-1]:
            return ys[-1] + (x - xs[-1])
        index = bisect.bisect_right(xs, x) - 1
        x0, x1, y0, y1 = xs[index], xs[index + 1], ys[index], ys[index + 1]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1


@dataclass(frozen=True)
class Departures:
    """The queue's cumulative departures at each bucket's end, then what still waits going at the
    ceiling: how many events are due by any schedule time, to the histogram's resolution."""

    departed: tuple[float, ...]
    width: float
    ceiling: float
    rows: int

    def out_by(self, t: float) -> float:
        """Events due in schedule time ``[0, t)`` (uniform within a bucket, as the warp assumes)."""
        if t <= 0 or not self.departed:
            return 0.0
        end = len(self.departed) * self.width
        if t >= end:
            return min(float(self.rows), self.departed[-1] + (t - end) * self.ceiling)
        index = int(t / self.width)
        before = self.departed[index - 1] if index > 0 else 0.0
        return before + (self.departed[index] - before) * (t - index * self.width) / self.width

    def between(self, start: float, end: float) -> float:
        return self.out_by(end) - self.out_by(start)


@dataclass(frozen=True)
class Shaped:
    """What a shaped window does under its ceiling: the map, and what a plan and a chart tell."""

    warp: Warp
    rows: int
    last_s: float  # the last event's deadline (end of its bucket): the publishing time
    unshaped_last_s: float  # ... had there been no ceiling
    peak: float  # the busiest second of the scaled traffic, events per second (before the ceiling)
    departures: Departures  # events due by any schedule time: a target line at any offset

    @property
    def slid_s(self) -> float:
        """How much later than its own time the last event goes because of the ceiling."""
        return max(0.0, self.last_s - self.unshaped_last_s)


def shape(counts: Sequence[int], width: float, ceiling: float) -> Shaped:
    """The window's histogram (``counts[i]`` events in scaled time ``[i * width, (i + 1) * width)``)
    served first in first out at most ``ceiling`` events a second."""
    if width <= 0 or ceiling <= 0:
        raise ValueError(f"a shape needs a bucket width and a ceiling above 0, got {width}, {ceiling}")
    xs: list[float] = [0.0]
    ys: list[float] = [0.0]
    backlog = 0.0  # events that arrived and wait
    departed: list[float] = []  # cumulative departures at each bucket's end
    total_out = 0.0
    for index, count in enumerate(counts):
        start, end = index * width, (index + 1) * width
        rate = count / width
        if backlog <= 0 and rate <= ceiling:  # nothing waits and nothing will: the identity
            _corner(xs, ys, end, end)
            total_out += count
        elif rate >= ceiling:  # the backlog grows (or stays) through the bucket
            backlog += (rate - ceiling) * width
            _corner(xs, ys, end, end + backlog / ceiling)
            total_out += ceiling * width
        else:  # it drains, maybe to empty inside the bucket
            empties = start + backlog / (ceiling - rate)
            if empties < end:
                _corner(xs, ys, empties, empties)
                _corner(xs, ys, end, end)
                total_out += backlog + count
                backlog = 0.0
            else:
                backlog -= (ceiling - rate) * width
                _corner(xs, ys, end, end + backlog / ceiling)
                total_out += ceiling * width
        departed.append(total_out)
    rows = sum(counts)
    last = max((i for i, c in enumerate(counts) if c), default=-1)
    unshaped = (last + 1) * width if last >= 0 else 0.0
    drained_s = len(counts) * width + backlog / ceiling  # the histogram's end, plus what still waits
    warp = Warp(tuple(xs), tuple(ys))
    return Shaped(
        warp=warp,
        rows=rows,
        last_s=warp.at(unshaped) if backlog <= 0 else drained_s,
        unshaped_last_s=unshaped,
        peak=_peak(counts, width),
        departures=Departures(tuple(departed), width, ceiling, rows),
    )


def _corner(xs: list[float], ys: list[float], x: float, y: float) -> None:
    """Add a corner, merging it into the last segment when the three points are collinear."""
    if x <= xs[-1]:
        ys[-1] = max(ys[-1], y)
        return
    if len(xs) >= 2:
        x0, y0, x1, y1 = xs[-2], ys[-2], xs[-1], ys[-1]
        if math.isclose((y1 - y0) * (x - x1), (y - y1) * (x1 - x0), rel_tol=1e-12, abs_tol=1e-12):
            xs[-1], ys[-1] = x, y
            return
    xs.append(x)
    ys.append(y)


def _peak(counts: Sequence[int], width: float) -> float:
    """The most events in any one second of scaled time (whole buckets), as events per second."""
    per = max(1, round(1 / width))
    if width >= 1:
        return max(counts, default=0) / width
    busiest = running = 0
    for index, count in enumerate(counts):
        running += count
        if index >= per:
            running -= counts[index - per]
        busiest = max(busiest, running)
    return float(busiest)

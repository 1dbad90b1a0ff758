"""Per-second figures from broker timestamps, shared by bench/throttle.py and bench/e2e.py.

A run's first and last seconds are partial by definition: the first starts with the first record
and holds whatever the tasks' start-up let through, the last ends with the last record. Averages and
tails over them would report start-up and the end of the window as rate errors, so the *trimmed*
figures leave them out; the *full* figures keep every second, so nothing is dropped silently, and
``max_second_ratio`` is always taken over every second (a burst in a partial second is still a burst).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass


def per_second(stamps: list[int], tps: int) -> list[int]:
    """Records per whole second, windows starting half an event interval before the first record.

    A perfectly paced stream puts an event every 1/tps s, so at low TPS windows aligned on an
    event would split ms-level broker jitter into 4/6 pairs; aligning between events does not.
    """
    if not stamps:
        return []
    origin = min(stamps) - 500 / max(tps, 1)
    counts = Counter(int((stamp - origin) // 1000) for stamp in stamps)
    return [counts.get(second, 0) for second in range(max(counts) + 1)]


@dataclass(frozen=True)
class Figures:
    """How a list of per-second counts compares with the target T."""

    seconds: int
    achieved: float  # mean records per second
    ratio: float  # achieved / T
    p95_dev: float  # 95th percentile of |count - T| / T
    max_second_ratio: float  # the largest second / T
    tail: float  # share of seconds below 95 % of T

    def line(self) -> str:
        return (
            f"achieved={self.achieved:.2f} ratio={self.ratio:.4f} p95_dev={self.p95_dev:.4f} "
            f"max_second_ratio={self.max_second_ratio:.4f} tail={self.tail:.3f}"
        )


def figures(seconds: list[int], tps: int) -> Figures:
    if not seconds:
        return Figures(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    achieved = sum(seconds) / len(seconds)
    deviations = sorted(abs(count - tps) / tps for count in seconds)
    p95 = deviations[min(len(deviations) - 1, math.ceil(0.95 * len(deviations)) - 1)]
    tail = sum(1 for count in seconds if count < 0.95 * tps) / len(seconds)
    return Figures(len(seconds), achieved, achieved / tps, p95, max(seconds) / tps, tail)


def trimmed(every_second: list[int]) -> list[int]:
    """Without the first and the last second, both partial (see the module docstring)."""
    return every_second[1:-1]


def summary(every_second: list[int], tps: int) -> tuple[Figures, Figures]:
    """(trimmed, full); the trimmed figures carry the max over every second, bursts are never trimmed."""
    full = figures(every_second, tps)
    whole = figures(trimmed(every_second), tps)
    whole = Figures(
        whole.seconds, whole.achieved, whole.ratio, whole.p95_dev, full.max_second_ratio, whole.tail
    )
    return whole, full


def span_rate(stamps: list[int]) -> float:
    """Records per second over the broker's span, first to last record (ms stamps)."""
    if len(stamps) < 2:
        return math.nan
    span_s = (max(stamps) - min(stamps)) / 1000
    return (len(stamps) - 1) / span_s if span_s > 0 else math.inf

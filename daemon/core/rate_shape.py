"""How a run's rate is shaped beyond one number: a ramp up to it, and a byte ceiling beside it.

**A ramp** (``ramp=5m``): a run starts at a tenth of its rate and rises linearly to it. A downstream
that has been idle (cold caches, scaled-in consumers, a connection pool at its floor) takes a
replay's full rate better after a warm-up. The ramp is a factor on the rate that goes from
``RAMP_FROM`` at the first event to 1 at ``ramp_s`` seconds, and it multiplies whatever the rate is at
that instant, so a live ``tps`` change or a pause during the ramp still holds and the ceiling never
rises above the asked rate. The job follows the ramp as steps of at most a second
(``spark_job.publish.timeline.ramped``), each at the factor of its middle, so by the end of every step
it has sent exactly what the straight line promises; the plan's ETA uses the straight line
(``publish_s``).

**A byte ceiling** (``max_mb=5``): at most that many megabytes (10^6 bytes of keys, values and
headers) per second, whatever the records' sizes, beside the event rate; whichever is tighter wins
(``spark_job.publish.byte_budget``). The plan cannot know the records' sizes before the job builds
them, so it promises the event rate and says the ceiling; the report says how long the ceiling held
events back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from daemon.core.quantities import render_duration
from daemon.core.run_control import RateChange, rate_at

RAMP_FROM = 0.1  # the share of the rate a ramp starts at
MAX_RAMP_S = 24 * 3600
MAX_MB = 10_000  # max_mb: at most this many megabytes per second (10 GB/s: above any one link)
MEGABYTE = 1_000_000


def factor(elapsed_s: float, ramp_s: int | None) -> float:
    """The share of the rate the ramp allows ``elapsed_s`` seconds after the first event."""
    if not ramp_s or elapsed_s >= ramp_s:
        return 1.0
    return RAMP_FROM + (1 - RAMP_FROM) * max(0.0, elapsed_s) / ramp_s


def publish_s(rows: int, tps: float, ramp_s: int | None) -> float:
    """Seconds to send ``rows`` at ``tps`` when the rate ramps up over ``ramp_s`` first.

    In the ramp's first ``t`` seconds the run sends what the full rate sends in
    ``RAMP_FROM * t + (1 - RAMP_FROM) * t**2 / (2 * ramp_s)`` seconds (``(1 + RAMP_FROM) / 2`` of the
    ramp at its end), so a run longer than the ramp takes ``(1 - RAMP_FROM) / 2 * ramp_s`` more than
    at a flat rate, and a shorter one ends inside it.
    """
    if tps <= 0:
        return 0.0
    flat = rows / tps
    if not ramp_s:
        return flat
    in_ramp = (1 + RAMP_FROM) / 2 * ramp_s  # full-rate seconds sent during the whole ramp
    if flat >= in_ramp:
        return flat + (ramp_s - in_ramp)
    a, b = (1 - RAMP_FROM) / (2 * ramp_s), RAMP_FROM  # a t^2 + b t = flat
    return (-b + math.sqrt(b * b + 4 * a * flat)) / (2 * a)


def rate_label(tps: int, ramp_s: int | None, max_mb: int | None = None, speed: float | None = None) -> str:
    """``2,000/s``, ``2,000/s after a 5m ramp from 200/s``, ``2,000/s, at most 5 MB/s``, ``the original
    timeline at 60x, at most 2,000/s``: the rate as the card and the CLI say it."""
    if speed is not None:
        bytes_too = f", at most {max_mb:,} MB/s" if max_mb else ""
        return f"the original timeline at {speed:g}x, at most {tps:,}/s{bytes_too}"
    shape = shape_label(tps, ramp_s, max_mb)
    return f"{tps:,}/s" + (f" {shape}" if ramp_s else f", {shape}" if shape else "")


def shape_label(tps: int, ramp_s: int | None, max_mb: int | None) -> str:
    """What shapes the rate, or "": ``after a 5m ramp from 200/s, at most 5 MB/s``."""
    parts = []
    if ramp_s:
        parts.append(f"after a {render_duration(ramp_s)} ramp from {RAMP_FROM * tps:,.0f}/s")
    if max_mb:
        parts.append(f"at most {max_mb:,} MB/s")
    return ", ".join(parts)


SAMPLES_PER_SECOND = 10


def targets(
    start: float, seconds: int, tps: int, changes: Sequence[RateChange], ramp_s: int | None
) -> list[float]:
    """The rate the run was asked to keep in each second from ``start`` (epoch seconds): the launch
    rate, its live changes and pauses, under its ramp, which began at ``start`` (the chart's first
    second, the first confirmed event's, within a second of the job's schedule start). Each second's
    target is its mean over ``SAMPLES_PER_SECOND`` instants, so a change mid-second shows as a step
    between the two rates."""
    out: list[float] = []
    for second in range(seconds):
        total = 0.0
        for sample in range(SAMPLES_PER_SECOND):
            offset = second + (sample + 0.5) / SAMPLES_PER_SECOND
            rate = rate_at(tps, changes, start + offset)
            total += 0.0 if rate.paused else rate.tps * factor(offset, ramp_s)
        out.append(total / SAMPLES_PER_SECOND)
    return out


def shape_note(speed: float, ceiling: int, peak: float | None, slid_s: float | None) -> str:
    """What a plan of ``tps=original`` found in the window's own times: its busiest second sped up,
    and how much later the ceiling lets the last event go."""
    busiest = "busiest second unknown" if peak is None else f"busiest second {peak:,.0f}/s"
    if slid_s is None:
        held = "how far the ceiling slides it unknown"
    elif slid_s < 0.5:
        held = f"never above max={ceiling:,}/s"
    else:
        held = f"max={ceiling:,}/s slides the last event {render_duration(round(slid_s))} later"
    return f"its own times at {speed:g}x: {busiest}; {held}"

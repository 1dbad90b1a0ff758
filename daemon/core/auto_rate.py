"""``tps=auto``: steer a replay's rate from a consumer group's lag, never above the ceiling asked for.

The daemon samples the group's lag on the replay's topic every few seconds and asks ``decide`` for
the next rate. The controller is model-based rather than blind: between two samples it measures how
fast the group really consumes (``drain``: committed offsets per second), which is the most a replay
can send without the lag growing (the topic's live traffic shares that capacity). So:

- lag above the limit: send below what the group consumes (``DRAIN_SHARE`` of it), so the lag falls;
- lag in the upper half of the limit: match the group's pace, the lag holds;
- lag low: probe upward (``PROBE_STEP`` at a time) toward the ceiling, the way TCP finds a link's
  capacity, since the group may consume faster than it has had to so far.

A decision is only sent when it moves the rate by at least ``MIN_CHANGE`` (the control topic is not
a chat), and never more often than once per ``HOLD_S``, so a new rate is measured before the next.
Pure: figures in, a decision out; ``daemon.core.lag`` computes the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

DRAIN_SHARE = 0.8  # above the limit: this share of what the group consumes, so its lag falls
PROBE_STEP = 1.25  # lag low: the next rate is at most this times the current one
MIN_CHANGE = 0.05  # smaller moves are not worth a control message
HOLD_S = 5.0  # at least this long between two decisions: the last one must show in the lag first
START_SHARE = 0.25  # a run starts at this share of its ceiling and probes up from there


@dataclass(frozen=True)
class AutoRate:
    """What ``tps=auto max=N lag<M group=G`` asked for."""

    ceiling: int  # N: never above
    lag_limit: int  # M: keep the group's lag under this
    group: str  # G

    def __post_init__(self) -> None:
        if self.ceiling < 1 or self.lag_limit < 1:
            raise ValueError("an auto rate needs a ceiling and a lag limit of at least 1")

    @property
    def floor(self) -> int:
        """The slowest it goes: a run that never ends helps nobody (1 % of the ceiling, at least 1)."""
        return max(1, self.ceiling // 100)

    @property
    def start(self) -> int:
        return max(self.floor, int(self.ceiling * START_SHARE))


@dataclass(frozen=True)
class Decision:
    tps: int
    reason: str  # one line for the run's thread: why this rate


def decide(
    auto: AutoRate,
    *,
    current_tps: int,
    lag: int,
    drain_per_s: float | None,
    since_last_change_s: float,
) -> Decision | None:
    """The next rate, or None to keep the current one.

    ``drain_per_s`` is what the group consumed per second between the last two samples (None: not
    measured yet, e.g. the first sample); ``since_last_change_s``: time since the last decision took
    effect.
    """
    if since_last_change_s < HOLD_S:
        return None
    limit = auto.lag_limit
    if lag > limit:
        if drain_per_s is None or drain_per_s <= 0:
            target = current_tps // 2
            why = f"lag {lag:,} > {limit:,} and the group is not consuming"
        else:  # never faster while over the limit, even if the group now drains faster than that
            target = min(current_tps, int(drain_per_s * DRAIN_SHARE))
            why = f"lag {lag:,} > {limit:,}: below what {auto.group} consumes ({drain_per_s:,.0f}/s)"
    elif lag > limit // 2:
        if drain_per_s is None:
            return None
        target = int(drain_per_s)
        why = f"lag {lag:,} near {limit:,}: at {auto.group}'s pace ({drain_per_s:,.0f}/s)"
    else:
        target = int(current_tps * PROBE_STEP)
        why = f"lag {lag:,} < {limit // 2:,}: probing up"
    target = max(auto.floor, min(auto.ceiling, target))
    if target == current_tps or abs(target - current_tps) < MIN_CHANGE * current_tps:
        return None
    if target == auto.ceiling and target > current_tps:
        why += f", to the ceiling {auto.ceiling:,}/s"
    return Decision(tps=target, reason=why)

"""Watching consumer groups drain after a replay: the per-group state, one step, the "caught up?" verdict.

A run that names groups (``watch=orders-consumer``) samples each one's lag on the run's topic at launch
(the baseline), then, once the run has ended, every interval until the lag is back to at most the
baseline plus a tolerance, or the deadline passes. The tolerance is what the topic's own producers
write in one interval (end offsets' advance between the last two samples, measured after the run's
last event, so the replay is not in it): a group on a busy live topic is never exactly at its
baseline, it is within one interval of it. An unknown baseline (no committed offset when the run
started) counts as 0 for the verdict and is shown as unknown; an unknown lag is never caught up.

Pure: the use case takes the samples and stores ``GroupDrain.to_dict()`` on the run; this module
only decides. Times are epoch seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from daemon.core.lag import OffsetSample, PartitionOffsets, drain, known_total

MAX_WATCHED_GROUPS = 5
BASELINE_UNKNOWN = "no committed offsets on this topic when the run started (counted as 0)"


class DrainStage(StrEnum):
    BASELINE = "baseline"  # the run is still publishing: only the baseline is known
    WATCHING = "watching"  # the run ended; the group is not back to its baseline yet
    CAUGHT_UP = "caught_up"  # back to at most its baseline (plus the tolerance)
    TIMED_OUT = "timed_out"  # the deadline passed first
    SKIPPED = "skipped"  # the run published nothing: there is nothing to catch up on

    @property
    def concluded(self) -> bool:
        return self in (DrainStage.CAUGHT_UP, DrainStage.TIMED_OUT, DrainStage.SKIPPED)


@dataclass(frozen=True)
class GroupDrain:
    """One group's watch, as stored on the run (``watch`` column) and shown by every front end."""

    group: str
    state: DrainStage
    baseline: int | None  # known lag at launch; None: no committed offset then (or Kafka did not say)
    note: str | None = None  # why a figure is unknown ("no committed offsets on this topic yet", ...)
    lag: int | None = None  # the latest known lag
    last_at: float | None = None  # when it was sampled
    drain_per_s: float | None = None  # lag shrinking per second (consumed - produced); negative: growing
    produced_per_s: float | None = None  # the topic's own producers, after the run's last event
    seconds_to_baseline: float | None = None  # at the current drain; None: not draining or unknown
    caught_up_at: float | None = None
    sample: OffsetSample | None = None  # the latest sample, kept for the next drain (and restarts)

    def to_dict(self) -> dict[str, Any]:
        sample = None
        if self.sample is not None:
            sample = {
                "at": self.sample.at,
                "partitions": [[p.topic, p.partition, p.committed, p.end] for p in self.sample.partitions],
            }
        return {
            "group": self.group,
            "state": str(self.state),
            "baseline": self.baseline,
            "note": self.note,
            "lag": self.lag,
            "last_at": self.last_at,
            "drain_per_s": self.drain_per_s,
            "produced_per_s": self.produced_per_s,
            "seconds_to_baseline": self.seconds_to_baseline,
            "caught_up_at": self.caught_up_at,
            "sample": sample,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupDrain:
        raw = data.get("sample")
        sample = None
        if isinstance(raw, Mapping):
            sample = OffsetSample(
                at=float(raw["at"]),
                partitions=tuple(
                    PartitionOffsets(str(t), int(p), None if c is None else int(c), int(e))
                    for t, p, c, e in raw["partitions"]
                ),
            )
        return cls(
            group=str(data["group"]),
            state=DrainStage(data["state"]),
            baseline=_int(data.get("baseline")),
            note=data.get("note"),
            lag=_int(data.get("lag")),
            last_at=_float(data.get("last_at")),
            drain_per_s=_float(data.get("drain_per_s")),
            produced_per_s=_float(data.get("produced_per_s")),
            seconds_to_baseline=_float(data.get("seconds_to_baseline")),
            caught_up_at=_float(data.get("caught_up_at")),
            sample=sample,
        )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def groups_from(stored: Mapping[str, Any] | None) -> tuple[GroupDrain, ...]:
    """The groups of a run's ``watch`` column (None: the run watches nothing)."""
    if not stored:
        return ()
    return tuple(GroupDrain.from_dict(item) for item in stored.get("groups", ()))


def tolerance(produced_per_s: float | None, interval_s: float) -> int:
    """Events the topic's own producers write in one interval: how far above its baseline a group on
    a busy topic may be and still count as caught up (0 until measured)."""
    if produced_per_s is None or produced_per_s <= 0:
        return 0
    return math.ceil(produced_per_s * interval_s)


def caught_up(lag: int | None, baseline: int | None, allowance: int) -> bool:
    """Back to at most its baseline (an unknown baseline counts as 0) plus ``allowance``; an unknown
    lag never is."""
    if lag is None:
        return False
    return lag <= (baseline or 0) + allowance


def baseline_of(group: str, sample: OffsetSample | None, note: str | None = None) -> GroupDrain:
    """The group as the run starts: its known lag then (unknown, never 0, without a committed offset)."""
    baseline = known_total(sample.partitions) if sample is not None else None
    if baseline is None and note is None:
        note = BASELINE_UNKNOWN
    return GroupDrain(
        group=group,
        state=DrainStage.BASELINE,
        baseline=baseline,
        note=note,
        lag=baseline,
        last_at=sample.at if sample is not None else None,
        sample=sample,
    )


def advance(
    watched: GroupDrain,
    sample: OffsetSample | None,
    *,
    now: float,
    ended_at: float,
    deadline: float,
    interval_s: float,
    note: str | None = None,
) -> GroupDrain:
    """One step after the run ended: the new sample (None: Kafka did not answer, ``note`` says why)
    judged against the baseline; at or past ``deadline`` an unfinished watch times out."""
    if watched.state.concluded:
        return watched
    if sample is None:
        state = DrainStage.TIMED_OUT if now >= deadline else DrainStage.WATCHING
        return replace(watched, state=state, note=note or watched.note)
    lag = known_total(sample.partitions)
    previous = watched.sample
    drain_per_s = produced = to_baseline = None
    # a rate is measured only between two samples taken after the run ended: the replay is not in it
    if previous is not None and previous.at >= ended_at and sample.at > previous.at:
        measured = drain(previous, sample)
        if measured.consumed_per_s is not None and measured.produced_per_s is not None:
            drain_per_s = measured.consumed_per_s - measured.produced_per_s
            produced = measured.produced_per_s
    allowance = tolerance(produced, interval_s)
    done = caught_up(lag, watched.baseline, allowance)
    if lag is not None and not done and drain_per_s is not None and drain_per_s > 0:
        to_baseline = (lag - (watched.baseline or 0) - allowance) / drain_per_s
    if lag is None:
        note = note or "no committed offsets on this topic yet"
    elif watched.baseline is None:
        note = BASELINE_UNKNOWN
    state = DrainStage.CAUGHT_UP if done else DrainStage.WATCHING
    if not done and max(now, sample.at) >= deadline:
        state = DrainStage.TIMED_OUT
    return replace(
        watched,
        state=state,
        note=note,
        lag=lag,
        last_at=sample.at,
        drain_per_s=drain_per_s,
        produced_per_s=produced,
        seconds_to_baseline=to_baseline,
        caught_up_at=sample.at if done else None,
        sample=sample,
    )


def skipped(groups: Iterable[GroupDrain]) -> tuple[GroupDrain, ...]:
    """The run published nothing: every unfinished watch ends without waiting."""
    return tuple(
        g if g.state.concluded else replace(g, state=DrainStage.SKIPPED, note="the run published nothing")
        for g in groups
    )

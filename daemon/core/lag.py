"""Consumer lag from offsets: per partition, in total, the hottest partition, and the drain.

Unknown is not zero: a partition on which the group never committed has no lag figure (its consumer
would start wherever ``auto.offset.reset`` says), so it is counted apart, never folded into a total.
The drain comes from two samples of the same group: events consumed per second (the committed
offsets' advance over the time between them) against events produced per second (the end offsets'),
both over the partitions whose lag is known in both samples. Pure: the daemon's adapter takes the
samples, this module only does the arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class GroupState(StrEnum):
    """A consumer group's state, as this platform reads Kafka's (the adapter's table maps them all)."""

    STABLE = "stable"  # members consuming
    REBALANCING = "rebalancing"  # members joining or leaving
    EMPTY = "empty"  # no members; committed offsets kept
    DEAD = "dead"  # no members and no offsets (or being removed)
    UNKNOWN = "unknown"  # Kafka would not say

    @property
    def may_reset(self) -> bool:
        """Only a group nobody consumes with may have its offsets moved (Kafka's rule too)."""
        return self in (GroupState.EMPTY, GroupState.DEAD)


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition as one sample saw it."""

    topic: str
    partition: int
    committed: int | None  # None: the group has no committed offset here
    end: int  # the log-end offset (the next offset to be written)

    @property
    def lag(self) -> int | None:
        """Events not yet consumed (end - committed, as Kafka's own tool computes it); None: unknown."""
        return None if self.committed is None else self.end - self.committed


@dataclass(frozen=True)
class OffsetSample:
    """Every partition of interest at one moment; ``at`` is seconds on a monotonic clock."""

    at: float
    partitions: tuple[PartitionOffsets, ...]


class DrainState(StrEnum):
    CAUGHT_UP = "caught_up"  # no lag left on the partitions with a committed offset
    DRAINING = "draining"  # consumed faster than produced: the lag shrinks
    NOT_DRAINING = "not_draining"  # produced as fast as (or faster than) consumed
    UNKNOWN = "unknown"  # no partition had a committed offset in both samples


@dataclass(frozen=True)
class Drain:
    """How fast the lag goes down between two samples, and when it would reach zero at that pace."""

    seconds: float
    consumed_per_s: float | None
    produced_per_s: float | None
    lag: int | None  # the known lag at the second sample
    seconds_to_zero: float | None  # lag / (consumed - produced) when that is positive

    @property
    def state(self) -> DrainState:
        if self.consumed_per_s is None or self.produced_per_s is None or self.lag is None:
            return DrainState.UNKNOWN
        if self.lag <= 0:
            return DrainState.CAUGHT_UP
        if self.seconds_to_zero is None:
            return DrainState.NOT_DRAINING
        return DrainState.DRAINING


@dataclass(frozen=True)
class LagReport:
    """What ``lag`` answers: partitions hottest first (unknown ones last), totals, and the drain."""

    partitions: tuple[PartitionOffsets, ...]
    total: int | None  # the sum of the known lags; None when no partition has one
    unknown: int  # partitions without a committed offset
    hottest: PartitionOffsets | None
    drain: Drain | None  # None: one sample only


def known_total(partitions: Iterable[PartitionOffsets]) -> int | None:
    lags = [p.lag for p in partitions if p.lag is not None]
    return sum(lags) if lags else None


def hottest_first(partitions: Iterable[PartitionOffsets]) -> tuple[PartitionOffsets, ...]:
    """Largest known lag first; ties by topic and partition; partitions with no lag figure last."""
    return tuple(
        sorted(
            partitions,
            key=lambda p: (p.lag is None, -(p.lag or 0), p.topic, p.partition),
        )
    )


def drain(first: OffsetSample, second: OffsetSample) -> Drain:
    """The drain between two samples (``second`` taken after ``first``)."""
    seconds = second.at - first.at
    if seconds <= 0:
        raise ValueError(f"the second sample must come after the first (got {seconds}s between them)")
    before = {(p.topic, p.partition): p for p in first.partitions}
    pairs = [
        (before[(p.topic, p.partition)], p)
        for p in second.partitions
        if (p.topic, p.partition) in before
        and p.committed is not None
        and before[(p.topic, p.partition)].committed is not None
    ]
    lag = known_total(second.partitions)
    if not pairs:
        return Drain(seconds, None, None, lag, None)
    consumed = sum((now.committed or 0) - (then.committed or 0) for then, now in pairs) / seconds
    produced = sum(now.end - then.end for then, now in pairs) / seconds
    net = consumed - produced
    to_zero = None
    if lag is not None and lag > 0 and net > 0:
        to_zero = lag / net
    elif lag is not None and lag <= 0:
        to_zero = 0.0
    return Drain(seconds, consumed, produced, lag, to_zero)


def lag_report(second: OffsetSample, first: OffsetSample | None = None) -> LagReport:
    """The report of the latest sample, with the drain when an earlier sample is given."""
    ordered = hottest_first(second.partitions)
    hottest = ordered[0] if ordered and ordered[0].lag is not None else None
    return LagReport(
        partitions=ordered,
        total=known_total(second.partitions),
        unknown=sum(1 for p in second.partitions if p.committed is None),
        hottest=hottest,
        drain=drain(first, second) if first is not None else None,
    )

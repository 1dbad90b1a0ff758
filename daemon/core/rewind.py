"""Rewinding a consumer group: where each partition's committed offset goes, and what that costs.

``to`` is an instant (the first offset whose record is at or after it: Kafka's own
``--to-datetime``), ``earliest`` or ``latest``. A partition with no record at or after the instant
goes to its end, as Kafka's tool does. The preview counts the events the group will consume again
(current - new, summed); a negative count is a move forward that skips events, and a partition with
no committed offset has no count (unknown is not zero). Pure; the adapter reads the offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias

from daemon.core.quantities import InvalidValue
from daemon.core.windows import instant_label, parse_instant

RewindTo: TypeAlias = datetime | Literal["earliest", "latest"]
_SHAPES = "a time (2024-01-01T10:00, UTC), a day (2024-01-01), earliest or latest"


def parse_target(text: str) -> RewindTo:
    """What ``to=`` says: ``earliest``, ``latest`` or an instant (UTC)."""
    if text.lower() == "earliest":
        return "earliest"
    if text.lower() == "latest":
        return "latest"
    if not text:
        raise InvalidValue(text, f"say where to rewind to: {_SHAPES}")
    try:
        return parse_instant(text)
    except InvalidValue as exc:
        raise InvalidValue(text, f"{exc.reason} (give {_SHAPES})") from None


def target_label(to: RewindTo) -> str:
    """Canonical text of a target; ``parse_target(target_label(t)) == t``."""
    return to if isinstance(to, str) else instant_label(to)


@dataclass(frozen=True)
class OffsetMove:
    partition: int
    current: int | None  # the committed offset now; None: the group never committed here
    new: int

    @property
    def re_consumed(self) -> int | None:
        """Events consumed again (negative: skipped by a move forward); None when current is unknown."""
        return None if self.current is None else self.current - self.new


@dataclass(frozen=True)
class RewindPreview:
    group: str
    topic: str
    to: RewindTo
    moves: tuple[OffsetMove, ...]  # by partition

    @property
    def re_consumed(self) -> int | None:
        """The sum over partitions with a committed offset; None when no partition has one."""
        counts = [move.re_consumed for move in self.moves if move.re_consumed is not None]
        return sum(counts) if counts else None

    @property
    def unknown(self) -> int:
        """Partitions whose current offset is unknown (their count is not in ``re_consumed``)."""
        return sum(1 for move in self.moves if move.current is None)

    @property
    def changes(self) -> bool:
        return any(move.current != move.new for move in self.moves)


def new_offset(to: RewindTo, *, earliest: int, end: int, for_time: int | None) -> int:
    """One partition's new offset; ``for_time`` is Kafka's answer for an instant (None: no record
    at or after it, so the end, as ``kafka-consumer-groups --to-datetime`` does)."""
    if to == "earliest":
        return earliest
    if to == "latest" or for_time is None or for_time < 0:
        return end
    return min(max(for_time, earliest), end)


def preview(
    group: str,
    topic: str,
    to: RewindTo,
    *,
    current: Mapping[int, int | None],
    earliest: Mapping[int, int],
    end: Mapping[int, int],
    for_time: Mapping[int, int | None],
) -> RewindPreview:
    """Every partition of the topic (``end``'s keys), current -> new."""
    moves = tuple(
        OffsetMove(
            partition=partition,
            current=current.get(partition),
            new=new_offset(
                to, earliest=earliest[partition], end=end[partition], for_time=for_time.get(partition)
            ),
        )
        for partition in sorted(end)
    )
    return RewindPreview(group=group, topic=topic, to=to, moves=moves)


def refusal_with_members(group: str, state: str, members: int) -> str:
    """Why offsets cannot move now: Kafka takes new committed offsets only from an empty group."""
    return (
        f"consumer group '{group}' is {state} with {members} active member{'s' if members != 1 else ''}: "
        "stop its consumers first (Kafka only moves the offsets of a group nobody consumes with), "
        "then rewind"
    )

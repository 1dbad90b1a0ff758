"""How long a run asked for now waits for a launcher slot: the runs ahead of it, on `capacity` slots.

Admission is oldest first across daemons and a run holds its slot until it ends (docs/decisions/0033),
so the wait is list scheduling: each slot is free when the run holding it ends; each queued run, in
line order, takes the slot that frees first and holds it for its own expected duration; the new run
takes the first slot free after them. Durations are estimates (the ETA's own terms), so the wait is
one too; what it may not do is ignore the runs ahead (a third run of three that queue on one slot
waits for the other two, and an ETA that leaves that out is wrong by their whole length).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def queue_wait_s(in_flight_left_s: Sequence[float], queued_s: Sequence[float], capacity: int | None) -> float:
    """Seconds until a new run takes a slot. ``in_flight_left_s``: how long each run holding a slot
    still holds it; ``queued_s``: each queued run's expected duration, first in line first;
    ``capacity``: the launcher's slots (None: no limit, so no wait)."""
    if capacity is None:
        return 0.0
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, got {capacity}")
    held = sorted(max(0.0, left) for left in in_flight_left_s)
    # With more runs holding slots than there are (a cap lowered at a restart), a slot frees only
    # when enough of them ended: the slots free at the `capacity` latest ends.
    slots = ([0.0] * capacity + held)[-capacity:]
    heapq.heapify(slots)
    for duration in queued_s:
        heapq.heappush(slots, heapq.heappop(slots) + max(0.0, duration))
    return slots[0]


def places_in_line(waiting: Sequence[str], holding: int, capacity: int | None) -> dict[str, int]:
    """Each queued run's place among those that wait for a running job to end (1: the next to start).

    ``waiting``: the queued runs not yet admitted, first in line first; ``holding``: the runs holding
    a slot. The first runs in line that the free slots take at the watcher's next look wait for no
    one, so they have no place: "it starts when a running job ends" would be untrue of them. With
    no limit (``capacity`` None) nothing waits.
    """
    if capacity is None:
        return {}
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, got {capacity}")
    free = max(0, capacity - holding)
    return {run_id: place for place, run_id in enumerate(waiting[free:], start=1)}

"""A byte ceiling beside the rate (``max_mb=``): a task's share of the bytes per second, never more.

The rate paces events, but records differ in size, and a downstream can be bound by bytes (a link, a
broker quota, a consumer's network). Each task keeps its part of the byte budget the way it keeps
its part of the rate: ``max_bytes_per_s * n_p / N`` (its rows' share of the round, as its event
share), and it sends a record only while the bytes it sent in the last ``WINDOW_S`` of real time and
the record's together stay within that. Whichever ceiling is tighter wins: an event due by the
schedule that does not fit waits, and the time events waited for bytes is reported (``held_s``), so
a run slowed by ``max_mb`` says so instead of hiding it in its rate. The tasks together send at most
``max_bytes_per_s`` plus one record each in any second. A record larger than a task's whole share
still goes, alone in its window: nothing is stuck for ever.

A record's size is what the producer is handed: key, value, and header names and values, before
compression and the protocol's own framing.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence

WINDOW_S = 1.0


class ByteBudget:
    """One task's byte ceiling on its own clock (the pacer's: any monotonic seconds)."""

    def __init__(self, share_bytes_per_s: float) -> None:
        if share_bytes_per_s <= 0 or math.isnan(share_bytes_per_s):
            raise ValueError(f"a byte budget needs a share above 0, got {share_bytes_per_s}")
        self._share = share_bytes_per_s
        self._sent: deque[tuple[float, int]] = deque()  # (time, bytes) of each grant in the window
        self._in_window = 0
        self._held_since: float | None = None
        self.held_s = 0.0  # how long due events waited for bytes, in all

    @property
    def share(self) -> float:
        return self._share

    def fitting(self, ends: Sequence[int], done: int, limit: int, now: float) -> int:
        """How many of the next ``limit`` records fit now, given ``ends``, the running totals of a
        batch's record sizes (``ends[i]``: bytes of records ``0..i``), of which ``done`` were sent."""
        if limit <= 0:
            return 0
        self._expire(now)
        before = ends[done - 1] if done > 0 else 0
        room = self._share - self._in_window
        fit = bisect.bisect_right(ends, before + room, done, done + limit) - done
        if fit == 0 and self._in_window == 0:  # larger than the whole share: it goes alone
            return 1
        return fit

    def spend(self, size: int, now: float) -> None:
        """``size`` bytes were handed to the producer at ``now``; a hold ends here."""
        if self._held_since is not None:
            self.held_s += max(0.0, now - self._held_since)
            self._held_since = None
        if size > 0:
            self._sent.append((now, size))
            self._in_window += size

    def hold(self, now: float) -> None:
        """A due event did not fit: the hold runs from ``now`` until the next ``spend``."""
        if self._held_since is None:
            self._held_since = now

    def frees_at(self) -> float:
        """When the oldest bytes in the window leave it (``-inf``: nothing is in it)."""
        return self._sent[0][0] + WINDOW_S if self._sent else -math.inf

    def _expire(self, now: float) -> None:
        while self._sent and now - self._sent[0][0] >= WINDOW_S:
            self._in_window -= self._sent.popleft()[1]

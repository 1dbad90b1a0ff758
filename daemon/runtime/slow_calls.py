"""Calls that take seconds (a lag's two samples, a rewind, a chart) are bounded per caller and in all.

The API answers synchronous routes from one pool of worker threads. A caller with many slow calls
in flight would otherwise hold that pool and every other route would queue behind them (the
health check has its own path, but the bot's and the CLI's requests do not). A call over either
bound is refused at once with 429, naming the bound and its setting; nothing waits.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from daemon.core.errors import CapReached


class SlowCalls:
    def __init__(self, *, per_user: int, total: int) -> None:
        self._per_user = per_user
        self._total = total
        self._lock = threading.Lock()
        self._running: Counter[str] = Counter()

    @contextmanager
    def held(self, user: str, what: str) -> Iterator[None]:
        """One slow call of ``user`` (``what`` names it in a refusal) for the length of the block."""
        with self._lock:
            mine, everyone = self._running[user], self._running.total()
            if mine >= self._per_user:
                raise CapReached(
                    f"<@{user}> already has {mine} slow calls (lag, rewind, chart) under way, the most "
                    f"one caller may (REPLAY_MAX_SLOW_CALLS_PER_USER={self._per_user}): {what} once one "
                    "has answered"
                )
            if everyone >= self._total:
                raise CapReached(
                    f"{everyone} slow calls (lag, rewind, chart) are under way, the service's limit "
                    f"(REPLAY_MAX_SLOW_CALLS={self._total}): {what} again in a few seconds"
                )
            self._running[user] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[user] -= 1
                if not self._running[user]:
                    del self._running[user]

    def running(self) -> int:
        with self._lock:
            return self._running.total()

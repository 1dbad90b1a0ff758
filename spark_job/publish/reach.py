"""Whether a task's producer can reach any broker: what its last flushes may usefully wait for.

librdkafka reports ``_ALL_BROKERS_DOWN`` when it has lost every broker connection; a confirmation
arriving afterwards proves one is back. While no broker is reachable, a flush cannot confirm
anything, so a failing task skips its bounded waits and reports the failure at once (its count so
far is already as true as it can be).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import KafkaError

STEP_S = 0.1  # how often a flush looks again at whether a broker is still reachable


class BrokerReach:
    """The producer's ``error_cb``; ``unreachable`` compares its last outage with the last confirmation."""

    def __init__(self) -> None:
        self.down_at: float | None = None  # time.time() of the last "all brokers down"

    def __call__(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.down_at = time.time()

    def unreachable(self, last_confirmed_at: float | None) -> bool:
        """True when every broker was lost and nothing was confirmed since."""
        if self.down_at is None:
            return False
        return last_confirmed_at is None or last_confirmed_at < self.down_at


class Flushable(Protocol):
    """A producer, or the delivery counter in front of one (which counts as it polls)."""

    def poll(self, timeout_s: float, /) -> int: ...

    def flush(self, timeout_s: float, /) -> int: ...


def flush_while_reachable(
    producer: Flushable, timeout_s: float, reach: BrokerReach, last_confirmed_at: Callable[[], float | None]
) -> None:
    """``producer.flush(timeout_s)``, cut short once no broker is reachable."""
    deadline = time.monotonic() + timeout_s
    producer.poll(0)  # serve reports (and outage news) already in
    while not reach.unreachable(last_confirmed_at()):
        left = deadline - time.monotonic()
        if left <= 0 or producer.flush(min(left, STEP_S)) == 0:
            return

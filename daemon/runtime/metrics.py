"""Prometheus metrics, computed from the store at scrape time.

The store is the source of truth (several daemons may share it), so nothing is counted in memory:
a scrape asks for runs by state, confirmed events and launch failures, and renders them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from collections.abc import Iterator

    from daemon.usecases.replays import ReplayService


class _StoreCollector:
    def __init__(self, service: ReplayService) -> None:
        self._service = service

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        totals = self._service.totals()
        runs = GaugeMetricFamily("replay_runs", "Runs by state", labels=["state"])
        for state, count in sorted(self._service.counts_by_state().items()):
            runs.add_metric([state], count)
        yield runs
        yield CounterMetricFamily(
            "replay_events_confirmed", "Events confirmed by the broker, all runs", value=totals["confirmed"]
        )
        yield CounterMetricFamily(
            "replay_launch_failures", "Runs whose job could not be launched", value=totals["launch_failures"]
        )


def render_metrics(service: ReplayService) -> tuple[bytes, str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StoreCollector(service))
    return generate_latest(registry), CONTENT_TYPE_LATEST

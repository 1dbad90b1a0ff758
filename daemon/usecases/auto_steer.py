"""``tps=auto max=N lag<M group=G``: the daemon steers a running replay's rate from G's lag.

Every ``interval_s`` (on the watcher's tick) it samples G's committed offsets and the end offsets of
the run's topic, computes the lag and how fast G consumed since the last sample
(``daemon.core.lag``), asks the pure controller (``daemon.core.auto_rate.decide``) for the next
rate, and applies it through the same control channel as a person's ``/replay tps`` (so every task
switches at one instant and the pacing stays exact). Each decision is audited as ``auto`` with its
reason and shown in the run's thread.

A group with no committed offsets on the topic yet (its consumers not started) gives no lag figure:
the rate holds where it is, since unknown is not zero. A paused run is left alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from daemon.core.auto_rate import AutoRate, decide
from daemon.core.lag import OffsetSample, PartitionOffsets, lag_report
from daemon.core.run_control import changes_from, latest_rate
from daemon.core.states import RunState
from daemon.usecases.ports import Clusters, ConsumerGroupAdmin
from daemon.usecases.run_control import RunControlService
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

SAMPLE_EVERY_S = 2.0


def auto_rate_of(run: Run) -> AutoRate | None:
    """The run's ``tps=auto`` request (kept in its options), or None for a fixed rate."""
    return run.options.auto


@dataclass
class _Steering:
    previous: OffsetSample | None
    changed_at: float  # monotonic time of the last decision (or of the first look)


class AutoSteer:
    def __init__(
        self,
        *,
        store: Store,
        groups: Clusters[ConsumerGroupAdmin],
        control: RunControlService,
        interval_s: float = SAMPLE_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._groups = groups
        self._control = control
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._runs: dict[str, _Steering] = {}

    def tick(self) -> None:
        """Steer every running ``tps=auto`` run whose last sample is older than the interval."""
        runs, _ = self._store.runs.list(state=[str(RunState.RUNNING)], limit=200)
        going = set()
        for run in runs:
            auto = auto_rate_of(run)
            if auto is None:
                continue
            going.add(run.id)
            try:
                self._steer(run, auto)
            except Exception as exc:  # a broker hiccup costs one sample, never the watcher's tick
                log.warning("auto rate: no sample this time", run_id=run.id, error=str(exc))
        for gone in set(self._runs) - going:
            del self._runs[gone]

    def _sample(self, group: str, topic: str, cluster: str) -> OffsetSample:
        groups = self._groups[cluster]
        before = self._monotonic()
        committed = groups.committed(group, topic)
        partitions = tuple(
            PartitionOffsets(topic, partition, committed.get((topic, partition)), end)
            for partition, end in sorted(groups.end_offsets(topic).items())
        )
        return OffsetSample(at=(before + self._monotonic()) / 2, partitions=partitions)

    def _steer(self, run: Run, auto: AutoRate) -> None:
        now = self._monotonic()
        steering = self._runs.setdefault(run.id, _Steering(previous=None, changed_at=now))
        if steering.previous is not None and now - steering.previous.at < self._interval_s:
            return
        current = latest_rate(run.tps, changes_from(run.control))
        sample = self._sample(auto.group, run.topic, run.options.cluster)
        report = lag_report(sample, steering.previous)
        steering.previous = sample
        if current.paused or report.total is None:
            return
        drained = report.drain.consumed_per_s if report.drain is not None else None
        decision = decide(
            auto,
            current_tps=current.tps,
            lag=report.total,
            drain_per_s=drained,
            since_last_change_s=now - steering.changed_at,
        )
        if decision is None:
            return
        log.info("auto rate", run_id=run.id, tps=decision.tps, reason=decision.reason)
        if self._control.steer(run.id, decision.tps, reason=decision.reason) is not None:
            steering.changed_at = now

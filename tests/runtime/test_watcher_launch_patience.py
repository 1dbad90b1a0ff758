"""A launch refused because a dependency is unavailable is tried again, for a while, before it fails.

Found by the suite: a pipeline slot fired right after the broker came back failed at once, because
reading the control topic's end offset met a partition still electing its leader.
"""

from __future__ import annotations

import time
from pathlib import Path

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.log_notifier import LogNotifier
from daemon.core.errors import Unavailable
from daemon.core.states import RunKind, RunState
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.usecases.ports import Clusters
from store import Store
from store.models import Run
from tests.fixtures.progress import NoBeacons

PATIENCE_S = 0.5


class BlinkingKafka:
    """A spec builder whose broker is away for the first `refusals` calls."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.calls = 0

    def __call__(self, _run: Run) -> str:
        self.calls += 1
        if self.calls <= self.refusals:
            raise Unavailable(
                "Kafka at 127.0.0.1:9: reading the end offset failed (NOT_LEADER_FOR_PARTITION)"
            )
        return "{}"


def _watcher(store: Store, tmp_path: Path, build_spec: BlinkingKafka) -> Watcher:
    return Watcher(
        store=store,
        launcher=LocalSparkLauncher(
            runs_dir=tmp_path / "runs", spark_submit="true"
        ),  # a job that exits at once
        notifier=LogNotifier(),
        build_spec=build_spec,
        progress=Clusters.one(NoBeacons()),
        owner="d1",
        timing=WatcherTiming(launch_patience_s=PATIENCE_S),
    )


def _queued(store: Store) -> str:
    return store.runs.create(kind=RunKind.REPLAY, source="orders", topic="t", tps=1, requester="U1").id


def test_a_launch_that_met_an_unavailable_broker_is_tried_again_and_goes_ahead(
    store: Store, tmp_path: Path
) -> None:
    run_id = _queued(store)
    watcher = _watcher(store, tmp_path, BlinkingKafka(refusals=2))

    watcher.tick()
    watcher.tick()
    assert store.runs.get(run_id).state == RunState.QUEUED  # not failed: the broker may be back soon
    watcher.tick()

    assert store.runs.get(run_id).state in (RunState.SUBMITTED, RunState.RUNNING, RunState.FAILED)
    assert store.runs.get(run_id).launcher_handle is not None  # it was launched


def test_a_dependency_away_longer_than_the_patience_fails_the_run_with_its_reason(
    store: Store, tmp_path: Path
) -> None:
    run_id = _queued(store)
    watcher = _watcher(store, tmp_path, BlinkingKafka(refusals=1000))

    watcher.tick()
    assert store.runs.get(run_id).state == RunState.QUEUED
    time.sleep(PATIENCE_S + 0.1)
    watcher.tick()

    failed = store.runs.get(run_id)
    assert failed.state == RunState.FAILED
    assert "NOT_LEADER_FOR_PARTITION" in (failed.failure_reason or "")


def test_a_run_concluded_elsewhere_while_its_launch_waits_leaves_nothing_kept_for_it(
    store: Store, tmp_path: Path
) -> None:
    """A daemon runs for months: what it keeps per run must go with the run, wherever it ended."""
    run_id = _queued(store)
    watcher = _watcher(store, tmp_path, BlinkingKafka(refusals=1000))
    watcher.tick()
    assert any(run_id in kept for kept in watcher._per_run())  # its launch's first refusal, noted

    store.runs.transition(run_id, RunState.CANCELLED, ended_at=store.now())  # as another daemon would
    watcher.tick()

    assert not any(run_id in kept for kept in watcher._per_run())

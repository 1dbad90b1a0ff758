"""A cancel that lands while the launcher is still submitting the job stops that job, and says so.

The real local launcher starts a real `spark-submit` of a job that would publish for minutes; the
cancel is recorded in the store between the watcher's decision to launch and the moment `submit()`
returns (an EMR submit takes seconds: a user pressing Cancel right after the command lands there).
The run must end cancelled with the job's handle recorded and the job's process gone: before, the
handle was dropped with the refused state change and the job published on, untracked.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.log_notifier import LogNotifier
from daemon.core.states import RunKind, RunState
from daemon.runtime.watcher import Watcher
from daemon.usecases.ports import Clusters, Handle, JobState
from store import Store
from tests.fixtures.kafka import unique_topic
from tests.fixtures.progress import NoBeacons
from tests.fixtures.spark import job_spec

pytestmark = [pytest.mark.kafka]


class CancelledWhileSubmitting(LocalSparkLauncher):
    """The real launcher; the run is cancelled (as the API does it) while its submit is under way."""

    def __init__(self, store: Store, runs_dir: Path) -> None:
        super().__init__(runs_dir=runs_dir)
        self._store = store
        self.handles: list[Handle] = []

    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        self._store.runs.transition(run_id, RunState.CANCELLING)
        handle = super().submit(run_id, spec_json, workers=workers, application_id=application_id)
        self.handles.append(handle)
        return handle


def test_a_cancel_during_submit_stops_the_job_it_started(
    store: Store, sample_table: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique_topic("cancel-in-launch")
    run = store.runs.create(kind=RunKind.REPLAY, source="orders", topic=topic, tps=1, requester="U1")
    spec = json.dumps(job_spec(sample_table, kafka_bootstrap, topic, run_id=run.id, tps=1))  # minutes long
    launcher = CancelledWhileSubmitting(store, tmp_path / "runs")
    watcher = Watcher(
        store=store,
        launcher=launcher,
        notifier=LogNotifier(),
        build_spec=lambda _run: spec,
        progress=Clusters.one(NoBeacons()),
        owner="test",
    )

    watcher.tick()

    (handle,) = launcher.handles
    ended = store.runs.get(run.id)
    assert ended.state == RunState.CANCELLED
    assert ended.launcher_handle == handle  # recorded: a restart would know what to stop
    deadline = time.monotonic() + 15
    while launcher.state(handle) == JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.2)
    assert launcher.state(handle) != JobState.RUNNING, "the job runs on after its run was cancelled"

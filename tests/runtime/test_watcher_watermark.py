"""The watcher's commit rule on both dialects: a pipeline run that selected nothing moves no watermark;
one that read a table's commits moves its snapshot only when it succeeded, even after publishing.

The job is represented by an in-process launcher that reports a fixed final line (the launcher port is
ours; what is under test is the watcher's decision and the store's transaction, not a job).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.adapters.log_notifier import LogNotifier
from daemon.core.run_options import RunOptions, WindowKind
from daemon.core.states import RunState
from daemon.runtime.watcher import Watcher
from daemon.usecases.ports import Clusters, Handle, JobOutcome, JobState, Launcher
from store import Store
from tests.fixtures.progress import NoBeacons

SLOT = datetime(2024, 1, 2, tzinfo=UTC)


class ReportingLauncher(Launcher):
    """Starts nothing; every job has already ended with `payload` as its final line."""

    kind = "in-process"

    def __init__(self, payload: dict[str, Any], *, succeeded: bool = True) -> None:
        self._payload = payload
        self._succeeded = succeeded

    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        return {"run_id": run_id}

    def state(self, handle: Handle) -> JobState:
        return JobState.EXITED

    def outcome(self, handle: Handle) -> JobOutcome | None:
        return JobOutcome(succeeded=self._succeeded, payload=self._payload)

    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        return []

    def cancel(self, handle: Handle) -> None:
        return None


def launch_and_conclude(store: Store, launcher: Launcher) -> None:
    """One watcher's two ticks: the first launches the claimed run, the second concludes it."""
    watcher = Watcher(
        store=store,
        launcher=launcher,
        notifier=LogNotifier(),
        build_spec=lambda _run: "{}",
        progress=Clusters.one(NoBeacons()),
        owner="test",
    )
    watcher.tick()
    watcher.tick()


@pytest.mark.parametrize(("selected", "moves"), [(0, False), (40, True)])
def test_only_a_run_that_selected_rows_commits_its_high_mark(
    store: Store, selected: int, moves: bool
) -> None:
    pipeline = store.pipelines.create(
        source="orders",
        schedule="every=1h",
        watermark_column="updated_at",
        topic="t",
        tps=10,
        created_by="U1",
    )
    high = "2024-01-02T00:00:00+00:00"
    run = store.pipelines.claim_slot(
        pipeline.id,
        now=SLOT,
        next_run_at=SLOT.replace(hour=1),
        run_fields={
            "source": "orders",
            "topic": "t",
            "tps": 10,
            "requester": "U1",
            "watermark_column": "updated_at",
            "watermark_high": high,
        },
    )
    assert run is not None
    payload = {"status": "succeeded", "rows_selected": selected, "confirmed": selected, "failed_tasks": 0}
    launch_and_conclude(store, ReportingLauncher(payload))

    assert store.runs.get(run.id).state == RunState.SUCCEEDED
    assert store.pipelines.get(pipeline.id).watermark_value == (high if moves else None)


@pytest.mark.parametrize(
    ("succeeded", "selected", "confirmed", "moves"),
    [
        (False, 40, 25, False),  # published 25 of 40, then failed: the next slot sends those 40 again
        (True, 40, 40, True),
        (True, 0, 0, True),  # the commits read are fixed: nothing more can come in them
    ],
)
def test_a_snapshot_pipeline_run_moves_its_snapshot_only_when_it_succeeded(
    store: Store, succeeded: bool, selected: int, confirmed: int, moves: bool
) -> None:
    """`incremental=snapshot` keeps the watermark's rule: publish, then commit; a run that failed
    after some deliveries leaves the published snapshot where it was, whatever it sent."""
    published, read = "7001", "7002"
    pipeline = store.pipelines.create(
        source="orders",
        schedule="every=1h",
        watermark_column=None,
        topic="t",
        tps=10,
        created_by="U1",
        watermark_value=published,
    )
    run = store.pipelines.claim_slot(
        pipeline.id,
        now=SLOT,
        next_run_at=SLOT.replace(hour=1),
        run_fields={
            "source": "orders",
            "topic": "t",
            "tps": 10,
            "requester": "U1",
            "watermark_column": None,
            "watermark_low": published,
            "watermark_high": read,
            "options": RunOptions(window=WindowKind.COMMITS, snapshot=read),
        },
    )
    assert run is not None
    payload = {
        "status": "succeeded" if succeeded else "failed",
        "rows_selected": selected,
        "confirmed": confirmed,
        "failed_tasks": 0 if succeeded else 1,
        **({} if succeeded else {"reason": "lost the broker after sending"}),
    }
    launch_and_conclude(store, ReportingLauncher(payload, succeeded=succeeded))

    finished = store.runs.get(run.id)
    assert (finished.state, finished.confirmed) == (
        RunState.SUCCEEDED if succeeded else RunState.FAILED,
        confirmed,
    )
    assert store.pipelines.get(pipeline.id).watermark_value == (read if moves else published)

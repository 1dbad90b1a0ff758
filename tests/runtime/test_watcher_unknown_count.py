"""A run whose final count cannot be read says "unknown", with what progress saw as the lower bound.

The watcher follows a real local job process (a stand-in `spark-submit` that only sleeps); its progress
source reads 700 confirmed once, then nothing (the beacons cannot be read any more). Cancelled then,
the run's confirmed count is unknown, never 0, and at least 700 records are on the topic.
"""

from __future__ import annotations

import stat
from collections.abc import Collection
from pathlib import Path

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.log_notifier import LogNotifier
from daemon.core.run_options import RunOptions
from daemon.core.states import RunKind, RunState
from daemon.runtime.watcher import Watcher
from daemon.slack.run_messages import final_reply
from daemon.usecases.ports import Clusters, ProgressSample, ProgressSource
from daemon.usecases.wire import run_out
from store import Store


class ReadOnceThenSilent(ProgressSource):
    """Beacons that answer once (700 confirmed) and cannot be read after that."""

    def __init__(self) -> None:
        self.reads = 0

    def sample(self, run_id: str, since: float | None = None) -> ProgressSample | None:
        self.reads += 1
        return ProgressSample(confirmed=700) if self.reads == 1 else None

    def forget(self, run_id: str) -> None:
        return None

    def forget_all_but(self, run_ids: Collection[str]) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_cancelled_run_whose_beacons_went_silent_has_an_unknown_count_not_zero(
    store: Store, tmp_path: Path
) -> None:
    submit = tmp_path / "spark-submit"
    submit.write_text("#!/bin/sh\nexec sleep 60\n")
    submit.chmod(submit.stat().st_mode | stat.S_IXUSR)
    run = store.runs.create(
        kind=RunKind.REPLAY,
        source="orders",
        topic="t",
        tps=10,
        requester="U1",
        options=RunOptions(planned_rows=1_000),
    )
    watcher = Watcher(
        store=store,
        launcher=LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit=str(submit)),
        notifier=LogNotifier(),
        build_spec=lambda _run: "{}",
        progress=Clusters.one(ReadOnceThenSilent()),
        owner="d1",
    )

    watcher.tick()  # launched
    watcher.tick()  # running: progress reads 700
    assert store.runs.get(run.id).confirmed == 700
    store.runs.transition(run.id, RunState.CANCELLING)
    watcher.tick()  # the cancel: the beacons are silent now

    ended = store.runs.get(run.id)
    assert ended.state == RunState.CANCELLED
    assert (ended.confirmed, ended.on_topic_at_least) == (None, 700)
    text = final_reply(run_out(ended)).text
    assert "*unknown* of 1,000 events were confirmed" in text and "At least *700*" in text
    assert "0 of 1,000" not in text

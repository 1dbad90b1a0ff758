"""A daemon killed the instant after it started a job, before it stored anything about it, comes back
to that job: one job per run, never two (the local launcher's pid file and run lock).

The crash is exact (`tests.fixtures.crash_points`: SIGKILL as `Popen` returns); the job is a stand-in
`spark-submit` that records each start and then waits, so the only thing under test is how many jobs
the run got. The same window with real Spark jobs is the chaos suite's `launch-kill` scenario.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from daemon.contract.models import ReplayBody
from store import Store
from tests.fixtures.daemon import ADMIN, OWNER, running_daemon
from tests.fixtures.runs import TERMINAL, wait_for

pytestmark = pytest.mark.kafka

SETTLE_S = 4.0  # several watcher passes after the restart: time enough to start a second job


def _recording_spark_submit(directory: Path) -> Path:
    """A `spark-submit` that appends its pid to `starts` beside the spec, then waits to be cancelled."""
    script = directory / "recording-spark-submit"
    script.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do spec="$arg"; done\n'
        'echo "$$" >> "$(dirname "$spec")/starts"\n'
        "exec sleep 300\n"
    )
    script.chmod(0o700)
    return script


def test_a_daemon_killed_right_after_starting_a_job_re_attaches_and_never_starts_a_second(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(
        tmp_path,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={  # the cold start under test: a standby would take the run without a spawn
            "REPLAY_SPARK_SUBMIT": str(_recording_spark_submit(tmp_path)),
            "REPLAY_LOCAL_STANDBY": "false",
        },
        crash_point="after-job-spawn",
    )
    try:
        run_id = daemon.client().create_replay(OWNER, ReplayBody(source="orders", window="2024-01-03")).id
        assert daemon.crashed(), daemon.log_text()[-2000:]
        run_dir = daemon.state_dir / "runs" / run_id
        with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
            assert store.runs.get(run_id).launcher_handle is None  # the store knows of no job

        daemon.start()
        running = wait_for(daemon.client(), run_id, {"running"} | TERMINAL)
        time.sleep(SETTLE_S)
        starts = (run_dir / "starts").read_text().split()
        with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
            handle = store.runs.get(run_id).launcher_handle

        daemon.client().cancel_replay(ADMIN, run_id)
        cancelled = wait_for(daemon.client(), run_id, TERMINAL)
    finally:
        daemon.stop()

    assert running.state == "running", running
    assert len(starts) == 1, starts  # one job for the run
    assert handle is not None and str(handle["pid"]) == starts[0]  # the one the crashed daemon started
    assert cancelled.state == "cancelled"

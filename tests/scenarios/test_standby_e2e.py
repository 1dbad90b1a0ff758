"""A warm start through a real daemon: `replayd`'s local launcher keeps a real standby driver (Spark's
JVM, the job's imports and its SparkSession, waiting), the next replay takes it and publishes exactly
its window, and a daemon killed outright leaves no idle JVM behind (ADR 0049)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from daemon.contract.models import ReplayBody
from daemon.usecases.eta import WARM_STARTUP_S
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.kafka import topic_record_count
from tests.fixtures.leftovers import process_running
from tests.fixtures.runs import TERMINAL, daemon_store, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DAY_ROWS = 300  # the sample table's rows on 2024-01-02 (tests.fixtures.spark.SAMPLE_ROWS_PER_DAY)
READY_WITHIN_S = 120.0


def _ready_standbys(state_dir: Path) -> list[int]:
    """The pids of the standby drivers that said they are ready."""
    return [
        int((directory / "pid").read_text().split()[0])
        for directory in sorted((state_dir / "standby").glob("s-*"))
        if (directory / "ready").exists() and not (directory / "claim").exists()
    ]


def _wait_ready(state_dir: Path, other_than: int | None = None) -> int:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        ready = [pid for pid in _ready_standbys(state_dir) if pid != other_than]
        if ready:
            return ready[0]
        time.sleep(0.2)
    raise AssertionError("no standby driver got ready")


def test_a_replay_takes_the_warm_standby_and_publishes_exactly_its_window(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, standby=True)
    try:
        warm = _wait_ready(daemon.state_dir)
        body = ReplayBody(source="orders", window="2024-01-02", tps=2000)
        planned = daemon.client().plan(OWNER, body)
        run = daemon.client().create_replay(OWNER, body)
        done = wait_for(daemon.client(), run.id, TERMINAL)
        with daemon_store(daemon) as store:
            handle = store.runs.get(run.id).launcher_handle
        run_dir = daemon.state_dir / "runs" / run.id
        log = (run_dir / "stdout.log").read_text(errors="replace")  # the driver's Python prints there
        next_one = _wait_ready(daemon.state_dir, other_than=warm)
    finally:
        daemon.stop()

    assert planned.warm is True and planned.eta_startup_s == WARM_STARTUP_S["local"]  # nothing learned yet
    assert done.state == "succeeded", done
    assert handle is not None and handle["pid"] == warm
    assert handle["standby"] is True and handle["warm"] is True  # taken ready: a warm start
    assert "standby ready" in log and "phase=session s=0.00" in log  # its session was built beforehand
    assert done.confirmed == DAY_ROWS and topic_record_count(kafka_bootstrap, done.topic) == DAY_ROWS
    assert done.reconcile is not None and done.reconcile.verdict().clean, done.reconcile
    assert next_one != warm  # one run per standby: the next run gets a fresh one


def test_a_killed_daemon_leaves_no_idle_standby_behind(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, standby=True)
    try:
        idle = _wait_ready(daemon.state_dir)
        daemon.kill()  # SIGKILL: no teardown of its own runs
        deadline = time.monotonic() + 30
        while process_running(idle) and time.monotonic() < deadline:
            time.sleep(0.1)
        still_alive = process_running(idle)
    finally:
        if process_running(idle):
            os.killpg(idle, signal.SIGKILL)
        daemon.stop()

    assert not still_alive  # it saw its daemon gone and exited by itself

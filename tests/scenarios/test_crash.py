"""Crash safety: a daemon killed mid-run, two daemons on one store, a cancelled job.

Each test runs real jobs under local Spark against the session's broker; the daemon is a child
process so SIGKILL is a real crash (no shutdown handler runs).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.adapters.local_standby import process_start_ticks
from daemon.contract.models import ReplayBody
from store import Store
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import topic_record_count
from tests.fixtures.runs import TERMINAL, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SLOW = ReplayBody(source="orders", window="2024-01-03..2024-01-04", tps=60)


def _finished_events(daemon: DaemonProcess, run_id: str) -> list[dict[str, Any]]:
    events = []
    for line in daemon.log_text().splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "notify run finished" and event.get("run_id") == run_id:
                events.append(event)
    return events


def _alive(handle: dict[str, Any]) -> bool:
    return process_start_ticks(int(handle["pid"])) == handle.get("start_ticks")


def test_daemon_killed_mid_run_reattaches_and_notifies_once(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, standby=True)
    try:
        client = daemon.client()
        # "running" means the job process is alive: its Spark start-up alone outlasts the restart below,
        # so the daemon comes back to a job still running without slowing the window's sending.
        run_id = client.create_replay(OWNER, SLOW.model_copy(update={"tps": 300})).id
        running = wait_for(client, run_id, {"running"} | TERMINAL)
        assert running.state == "running", running

        daemon.kill()
        daemon.start()

        run = wait_for(daemon.client(), run_id, TERMINAL)
    finally:
        daemon.stop()

    expected = window_event_ids(sample_table, "2024-01-03", "2024-01-04")
    assert run.state == "succeeded", run
    assert run.confirmed == len(expected)
    assert topic_record_count(kafka_bootstrap, run.topic) == len(expected)  # launched once, not twice
    assert len(_finished_events(daemon, run_id)) == 1
    with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
        assert store.notifications.get(f"run:{run_id}:final") is not None
    stdout = (daemon.state_dir / "runs" / run_id / "stdout.log").read_text()
    assert stdout.count("REPLAY_RESULT ") == 1


def test_two_daemons_on_one_postgres_launch_a_run_once(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str, fresh_postgres_url: str
) -> None:
    first = running_daemon(
        tmp_path / "a", sample_table=sample_table, bootstrap=kafka_bootstrap, database_url=fresh_postgres_url
    )
    second = running_daemon(
        tmp_path / "b", sample_table=sample_table, bootstrap=kafka_bootstrap, database_url=fresh_postgres_url
    )
    try:
        run_id = first.client().create_replay(OWNER, SLOW.model_copy(update={"tps": 2000})).id
        run = wait_for(second.client(), run_id, TERMINAL)
    finally:
        first.stop()
        second.stop()

    launched_by = [d for d in (first, second) if (d.state_dir / "runs" / run_id / "pid").exists()]
    assert len(launched_by) == 1
    assert run.state == "succeeded", run
    assert topic_record_count(kafka_bootstrap, run.topic) == run.confirmed
    assert len(_finished_events(first, run_id)) + len(_finished_events(second, run_id)) == 1


def test_cancel_mid_run_stops_the_job_and_reports_the_count_so_far(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, standby=True)
    try:
        client = daemon.client()
        run_id = client.create_replay(OWNER, SLOW.model_copy(update={"tps": 20})).id
        wait_for(client, run_id, {"running"})
        assert _wait_confirmed(daemon, run_id) > 0

        client.cancel_replay(OWNER, run_id)
        run = wait_for(client, run_id, TERMINAL)
        with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
            handle = store.runs.get(run_id).launcher_handle
    finally:
        daemon.stop()

    assert run.state == "cancelled"
    assert handle is not None and not _alive(handle)
    assert run.confirmed is not None  # the cancel read the job's beacons
    assert 0 < run.confirmed < len(window_event_ids(sample_table, "2024-01-03", "2024-01-04"))
    assert run.confirmed <= topic_record_count(kafka_bootstrap, run.topic)


def _wait_confirmed(daemon: DaemonProcess, run_id: str, timeout_s: float = 120.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = daemon.client().get_replay(OWNER, run_id)
        if run.confirmed:  # some confirmed (None is unknown, only after a run ended)
            return run.confirmed
        time.sleep(0.5)
    return 0


def test_pid_check_survives_pid_reuse() -> None:
    handle = {"pid": os.getpid(), "start_ticks": -1}

    assert not _alive(handle)

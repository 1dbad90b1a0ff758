"""`REPLAY_LAUNCHER=spark`: replays through `replayd` on the loopback standalone cluster, whose two
one-core workers give a run its executors (JVMs of their own, not the driver's threads)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from daemon.contract.models import ReplayBody
from scripts.local_spark_cluster import Cluster
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import consume_all, headers_of, value_of
from tests.fixtures.runs import TERMINAL, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _cluster_daemon(
    tmp_path: Path,
    cluster: Cluster,
    sample_table: Path,
    bootstrap: str,
    wait_s: float = 120,
    python: Path | None = None,
) -> DaemonProcess:
    return running_daemon(
        tmp_path,
        sample_table=sample_table,
        bootstrap=bootstrap,
        extra={
            "REPLAY_LAUNCHER": "spark",
            "REPLAY_SPARK_MASTER": cluster.master,
            "REPLAY_SPARK_EXECUTOR_MEMORY": "512m",
            "REPLAY_SPARK_EXECUTOR_WAIT_S": str(wait_s),
            **({"REPLAY_SPARK_PYTHON": str(python)} if python is not None else {}),
        },
    )


def _recording_python(directory: Path) -> tuple[Path, Path]:
    """A Python for the executors that notes each start, then is this environment's interpreter."""
    marker, wrapper = directory / "executor-pythons.txt", directory / "executor-python"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {marker}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, marker


def test_a_replay_on_the_cluster_publishes_its_window_from_two_executors(
    spark_cluster: Cluster, sample_table: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    python, started = _recording_python(tmp_path)
    daemon = _cluster_daemon(tmp_path, spark_cluster, sample_table, kafka_bootstrap, python=python)
    try:
        client = daemon.client()
        created = client.create_replay(
            OWNER, ReplayBody(source="orders", window="2024-01-05..2024-01-06", tps=2000, workers=2)
        )
        run = wait_for(client, created.id, TERMINAL, timeout_s=300)

        expected = window_event_ids(sample_table, "2024-01-05", "2024-01-06")
        assert run.state == "succeeded", run.failure_reason
        assert run.confirmed == len(expected) and run.reconcile is not None
        assert run.reconcile.verdict().clean, run.reconcile
        landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
        assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
        assert {headers_of(m)["replay-run-id"] for m in landed} == {run.id.encode()}
        said = (daemon.state_dir / "runs" / run.id / "stdout.log").read_text(errors="replace")
        assert f"2 executors registered on {spark_cluster.master}" in said
        assert len(started.read_text().split()) >= 2  # each executor started REPLAY_SPARK_PYTHON
    finally:
        daemon.stop()


def test_a_run_asking_for_more_executors_than_the_cluster_has_fails_naming_it_and_sends_nothing(
    spark_cluster: Cluster, sample_table: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    daemon = _cluster_daemon(tmp_path, spark_cluster, sample_table, kafka_bootstrap, wait_s=8)
    try:
        client = daemon.client()
        created = client.create_replay(
            OWNER, ReplayBody(source="orders", window="2024-01-05..2024-01-06", tps=2000, workers=3)
        )
        run = wait_for(client, created.id, TERMINAL, timeout_s=300)

        assert run.state == "failed"
        assert run.failure_reason is not None
        assert f"the cluster {spark_cluster.master} registered 2 of the 3 executors" in run.failure_reason
        assert "ask for fewer workers=" in run.failure_reason
        assert run.confirmed in (0, None)
    finally:
        daemon.stop()

"""Unschedule removes what the pipeline made, through the janitor's de-provisioning, on a real daemon.

The topic of an auto pipeline holds decrypted records: once unscheduled, nothing of the pipeline may
stay behind (its topic, its run in flight), and a daemon killed halfway finishes the removal when it
is back, without anyone asking again.
"""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from daemon.contract.client import DaemonClient
from daemon.contract.models import PipelineOut, ScheduleBody
from daemon.core.errors import Conflict
from scripts.devtools.sample_table import write_sample_table
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.runs import wait_for

pytestmark = [pytest.mark.kafka]


def _schedule(client: DaemonClient, tps: int) -> PipelineOut:
    body = {"source": "orders", "every": "1d", "watermark": "updated_at", "tps": tps}
    return client.schedule(OWNER, ScheduleBody.model_validate(body))


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _archived(client: DaemonClient, pipeline_id: str, timeout_s: float) -> PipelineOut:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pipeline = client.get_pipeline(OWNER, pipeline_id)
        if pipeline.state == "archived":
            return pipeline
        time.sleep(0.5)
    raise AssertionError(f"pipeline {pipeline_id} was not removed: {client.get_pipeline(OWNER, pipeline_id)}")


def test_unschedule_deletes_the_pipelines_topic_and_says_so(
    replay_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    client = replay_daemon.client()
    pipeline = _schedule(client, tps=5000)
    assert pipeline.topic in _topics(kafka_bootstrap)

    unscheduled = client.unschedule(OWNER, pipeline.id, confirm=True)

    assert unscheduled.state == "archived"  # no run in flight: nothing to wait for
    assert pipeline.topic not in _topics(kafka_bootstrap)
    with pytest.raises(Conflict, match="unscheduled"):
        client.unschedule(OWNER, pipeline.id, confirm=True)


@pytest.mark.spark
def test_a_daemon_killed_during_an_unschedule_finishes_the_removal_after_its_restart(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    table = tmp_path / "lake" / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 600, seed=3)
    daemon = running_daemon(tmp_path / "d", sample_table=table, bootstrap=kafka_bootstrap)
    try:
        client = daemon.client()
        pipeline = _schedule(client, tps=5)  # two minutes of sending: it is in flight when unscheduled
        client.pipeline_action(OWNER, pipeline.id, "run")
        deadline = time.monotonic() + 120
        while not (runs := client.get_pipeline(OWNER, pipeline.id).runs) or runs[0].state != "running":
            assert time.monotonic() < deadline, f"the slot's run never ran: {runs}"
            time.sleep(0.5)
        run_id = runs[0].id

        removing = client.unschedule(OWNER, pipeline.id, confirm=True)
        daemon.kill()  # before the run has stopped: the answer came while the removal was under way

        assert removing.state == "paused"
        assert removing.deprovision_reason == f"unscheduled by <@{OWNER}>"
        daemon.start()
        archived = _archived(client, pipeline.id, timeout_s=90)

        assert archived.deprovision_reason is None
        assert (
            wait_for(client, run_id, {"cancelled", "succeeded", "failed"}, timeout_s=60).state == "cancelled"
        )
        assert pipeline.topic not in _topics(kafka_bootstrap)
        with pytest.raises(Conflict, match="cannot be changed"):
            client.pipeline_action(OWNER, pipeline.id, "resume")
    finally:
        daemon.stop()

"""Pipelines are capped per person and per source, and cannot use up the runs kept for people's replays.

A real daemon with small caps: a third pipeline of one person is refused (429, naming the setting, no
topic made), an admin is held by the source's cap only; with every run but the reserved one taken, a
pipeline's slot is skipped as busy (its watermark waits) while a person's replay is still admitted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from daemon.contract.client import DaemonClient
from daemon.contract.models import PipelineDetailOut, ReplayBody, ScheduleBody
from daemon.core.errors import CapReached, Conflict
from tests.fixtures.daemon import ADMIN, OWNER, DaemonProcess, running_daemon

pytestmark = [pytest.mark.kafka]

YEARLY = "0 0 1 1 *"  # never fires during the test unless run now


@pytest.fixture(scope="module")
def capped_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("replayd-caps"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_MAX_PIPELINES_PER_USER": "2",
            "REPLAY_MAX_PIPELINES_PER_SOURCE": "3",
            "REPLAY_MAX_ACTIVE_RUNS": "2",
            "REPLAY_ADHOC_RESERVED_RUNS": "1",
        },
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _schedule(client: DaemonClient, actor: str, key: str) -> str:
    body = ScheduleBody(source="orders", cron=YEARLY, watermark="updated_at")
    pipeline, _ = client.schedule_once(actor, body, idempotency_key=key)
    return pipeline.id


def _pipeline_topics(bootstrap: str) -> set[str]:
    names = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {name for name in names if name.startswith("replay.orders.p-")}


def _unschedule_all(client: DaemonClient) -> None:
    for pipeline in client.list_pipelines(OWNER):
        if pipeline.state != "archived":
            client.unschedule(ADMIN, pipeline.id, confirm=True)


def test_a_person_and_a_source_have_a_few_pipelines_and_a_refused_one_makes_nothing(
    capped_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    with capped_daemon.client() as client:
        _unschedule_all(client)
        _schedule(client, OWNER, "cap-1")
        _schedule(client, OWNER, "cap-2")
        topics = _pipeline_topics(kafka_bootstrap)

        with pytest.raises(CapReached, match="REPLAY_MAX_PIPELINES_PER_USER=2"):
            _schedule(client, OWNER, "cap-3")
        assert _pipeline_topics(kafka_bootstrap) == topics  # nothing was provisioned for it
        _schedule(client, ADMIN, "cap-admin-1")  # admins: the person's cap does not hold them
        with pytest.raises(CapReached, match="REPLAY_MAX_PIPELINES_PER_SOURCE=3"):
            _schedule(client, ADMIN, "cap-admin-2")
        _unschedule_all(client)


def _skipped_busy(client: DaemonClient, pipeline_id: str) -> PipelineDetailOut | None:
    detail = client.get_pipeline(OWNER, pipeline_id)
    busy = [run for run in detail.runs if run.state == "skipped"]
    return detail if busy and "the platform is busy" in (busy[0].failure_reason or "") else None


def test_pipelines_cannot_take_the_runs_kept_for_peoples_replays(capped_daemon: DaemonProcess) -> None:
    with capped_daemon.client() as client:
        _unschedule_all(client)
        slow = ReplayBody(source="orders", window="2024-01-02..2024-01-07", tps=1)
        first = client.create_replay(OWNER, slow)  # one unfinished run: the pipelines' share is taken
        pipeline_id = _schedule(client, OWNER, "busy-1")
        try:
            client.pipeline_action(OWNER, pipeline_id, "run")
            deadline = time.monotonic() + 30
            while (detail := _skipped_busy(client, pipeline_id)) is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert detail is not None, client.get_pipeline(OWNER, pipeline_id).runs
            assert detail.watermark is None  # nothing was read: the next slot starts from the same mark

            second = client.create_replay(OWNER, slow)  # a person's replay still gets the kept run
            with pytest.raises(CapReached, match="REPLAY_MAX_ACTIVE_RUNS=2"):
                client.create_replay(OWNER, slow)
        finally:
            for run in client.list_replays(OWNER, limit=50).runs:
                with contextlib.suppress(Conflict):
                    client.cancel_replay(OWNER, run.id)
            _unschedule_all(client)
        assert {first.id, second.id} <= {run.id for run in client.list_replays(OWNER, limit=50).runs}

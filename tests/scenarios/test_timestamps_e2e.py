"""``timestamp=event|replay`` through the real daemon: the plan says which, the auto topic's timestamp
type follows it (LogAppendTime unless event time is asked), and the records carry the event times."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunOut
from tests.fixtures.daemon import OWNER, DaemonProcess
from tests.fixtures.kafka import consume_all, topic_config, value_of

pytestmark = [pytest.mark.kafka]

DAY = "2024-01-06"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TERMINAL = {"succeeded", "failed", "cancelled"}
WEEK_MS = 7 * 24 * 3600 * 1000  # Settings.topic_retention_ms's default


def request(**options: str) -> ReplayBody:
    return ReplayBody.model_validate({"source": "orders", "window": f"{DAY}..{DAY}", "tps": 5000, **options})


def wait_for(client: DaemonClient, run_id: str, timeout_s: float = 240.0) -> RunOut:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get_replay(OWNER, run_id)
        if run.state in TERMINAL:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish: {run}")


def event_times_ms(table: Path) -> dict[str, int]:
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    rows = dataset.to_table(columns=["event_id", "updated_at"], filter=ds.field("dt") == DAY).to_pylist()
    return {row["event_id"]: (row["updated_at"] - EPOCH) // timedelta(milliseconds=1) for row in rows}


def test_the_plan_shows_the_sources_default_unless_the_run_asks(replay_daemon: DaemonProcess) -> None:
    client = replay_daemon.client()

    assert client.plan(OWNER, request()).timestamp == "replay"
    assert client.plan(OWNER, request(timestamp="event")).timestamp == "event"


def test_by_default_the_auto_topic_keeps_broker_timestamps(
    replay_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    client = replay_daemon.client()
    run = client.create_replay(OWNER, request())

    config = topic_config(kafka_bootstrap, run.topic)

    client.cancel_replay(OWNER, run.id)
    assert wait_for(client, run.id).state in TERMINAL
    assert (config["message.timestamp.type"], config["retention.ms"]) == ("LogAppendTime", str(WEEK_MS))


def test_timestamp_event_makes_a_createtime_topic_whose_records_carry_event_times(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path
) -> None:
    client = replay_daemon.client()
    created = client.create_replay(OWNER, request(timestamp="event"))

    run = wait_for(client, created.id)

    assert run.state == "succeeded", run
    config = topic_config(kafka_bootstrap, run.topic)
    assert config["message.timestamp.type"] == "CreateTime"
    oldest_event_age_ms = (datetime.now(UTC) - datetime.fromisoformat(f"{DAY}T00:00:00+00:00")) // timedelta(
        milliseconds=1
    )
    assert int(config["retention.ms"]) >= WEEK_MS + oldest_event_age_ms - 3_600_000  # kept a week past now
    expected = event_times_ms(sample_table)
    landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"]: m.timestamp() for m in landed} == {
        event_id: (TIMESTAMP_CREATE_TIME, ms) for event_id, ms in expected.items()
    }

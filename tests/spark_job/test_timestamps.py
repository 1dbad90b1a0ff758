"""Record timestamps in the real job: ``timestamp=event`` stamps each record with its row's event time,
``timestamp=replay`` leaves the producer's publish time (both on CreateTime topics, so the broker keeps
what the job sent)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Message
from pyspark.sql import SparkSession

from spark_job import main as job_main
from tests.fixtures.kafka import KEEP_FOREVER, consume_all, create_topic, unique_topic, value_of
from tests.fixtures.spark import JobRun, job_spec, parse_job_output, write_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DAY = "2024-01-05"
WINDOW = {"column": "dt", "start_day": DAY, "end_day": DAY}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def run_job(
    spark: SparkSession, directory: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> JobRun:
    code = job_main.main([str(write_spec(directory, document))], spark=spark)
    captured = capsys.readouterr()
    return parse_job_output(code, captured.out, captured.err)


def event_times_ms(table: Path) -> dict[str, int]:
    """event_id -> updated_at in epoch ms (truncated, as Kafka keeps it), straight from the table."""
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    rows = dataset.to_table(columns=["event_id", "updated_at"], filter=ds.field("dt") == DAY).to_pylist()
    return {row["event_id"]: (row["updated_at"] - EPOCH) // timedelta(milliseconds=1) for row in rows}


def stamps(messages: list[Message]) -> dict[str, tuple[int, int]]:
    return {json.loads(value_of(message))["event_id"]: message.timestamp() for message in messages}


def test_timestamp_event_stamps_every_record_with_its_rows_event_time(
    spark: SparkSession,
    kafka_bootstrap: str,
    sample_table: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("event-time")
    config = {"message.timestamp.type": "CreateTime", **KEEP_FOREVER}
    create_topic(kafka_bootstrap, topic, partitions=3, config=config)
    document = job_spec(sample_table, kafka_bootstrap, topic, window=WINDOW, timestamp="event")

    run = run_job(spark, tmp_path, document, capsys)

    assert run.kind == "REPLAY_RESULT", run.document
    expected = event_times_ms(sample_table)
    landed = stamps(consume_all(kafka_bootstrap, topic, expected=len(expected)))
    assert landed == {event_id: (TIMESTAMP_CREATE_TIME, ms) for event_id, ms in expected.items()}


def test_timestamp_replay_stamps_records_when_they_are_published(
    spark: SparkSession,
    kafka_bootstrap: str,
    sample_table: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-time")
    create_topic(kafka_bootstrap, topic, partitions=3, config={"message.timestamp.type": "CreateTime"})
    document = job_spec(sample_table, kafka_bootstrap, topic, window=WINDOW, timestamp="replay")
    before_ms = int(time.time() * 1000)

    run = run_job(spark, tmp_path, document, capsys)

    after_ms = int(time.time() * 1000)
    assert run.kind == "REPLAY_RESULT", run.document
    landed = stamps(consume_all(kafka_bootstrap, topic, expected=run.document["confirmed"]))
    assert sorted(landed) == sorted(event_times_ms(sample_table))
    assert {kind for kind, _ in landed.values()} == {TIMESTAMP_CREATE_TIME}
    assert all(before_ms <= ms <= after_ms for _, ms in landed.values())

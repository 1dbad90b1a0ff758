"""Partition parity with the Java client: a replayed key lands where Kafka's own producer puts it.

Kafka's console producer (the broker's jars) writes one record per key of a window to a
12-partition topic; the real job then replays that window into the same topic. Every key must sit
on one partition, the Java producer's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Message, Producer
from pyspark.sql import SparkSession

from spark_job import main as job_main
from tests.fixtures.java_producer import java_produce_keyed
from tests.fixtures.kafka import consume_all, create_topic, headers_of, key_of, unique_topic
from tests.fixtures.spark import JobRun, job_spec, parse_job_output, write_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 12
DAY = "2024-01-03"


def run_job(
    spark: SparkSession, directory: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> JobRun:
    code = job_main.main([str(write_spec(directory, document))], spark=spark)
    captured = capsys.readouterr()
    return parse_job_output(code, captured.out, captured.err)


def day_keys(table: Path) -> list[str]:
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    rows = dataset.to_table(columns=["order_id"], filter=ds.field("dt") == DAY)
    return sorted(set(rows.column("order_id").to_pylist()))


def partitions_by_key(messages: list[Message]) -> dict[str, set[int]]:
    found: dict[str, set[int]] = defaultdict(set)
    for message in messages:
        partition = message.partition()
        assert partition is not None
        found[key_of(message).decode()].add(partition)
    return dict(found)


@pytest.fixture(scope="module")
def java_partitions(kafka_bootstrap: str, sample_table: Path) -> tuple[str, dict[str, int]]:
    """A 12-partition topic holding one Java-produced record per key of the day; key -> partition."""
    topic = unique_topic("java-parity")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    keys = day_keys(sample_table)
    java_produce_keyed(kafka_bootstrap, topic, [(key, "from-java") for key in keys])
    placed = partitions_by_key(consume_all(kafka_bootstrap, topic, expected=len(keys)))
    assert sorted(placed) == keys
    assert all(len(partitions) == 1 for partitions in placed.values())
    return topic, {key: partitions.pop() for key, partitions in placed.items()}


def test_a_replay_puts_every_key_on_the_java_producers_partition(
    spark: SparkSession,
    kafka_bootstrap: str,
    sample_table: Path,
    java_partitions: tuple[str, dict[str, int]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, java = java_partitions
    window = {"column": "dt", "start_day": DAY, "end_day": DAY}
    document = job_spec(sample_table, kafka_bootstrap, topic, window=window, run_id="r-java-parity")

    run = run_job(spark, tmp_path, document, capsys)

    assert run.kind == "REPLAY_RESULT", run.document
    replayed = [
        message
        for message in consume_all(kafka_bootstrap, topic, expected=len(java) + run.document["confirmed"])
        if headers_of(message).get("replay-run-id") == b"r-java-parity"
    ]
    assert len(replayed) == run.document["confirmed"] == run.document["rows_selected"]
    landed = partitions_by_key(replayed)
    assert sorted(landed) == sorted(java)
    assert {key: partitions.pop() for key, partitions in landed.items()} == java
    assert len(set(java.values())) >= PARTITIONS - 2  # the keys spread: the comparison means something


def test_librdkafkas_own_default_would_have_missed_most_keys(
    kafka_bootstrap: str, java_partitions: tuple[str, dict[str, int]]
) -> None:
    """The control: the CRC32 partitioner the job used before puts most keys elsewhere."""
    _, java = java_partitions
    crc = unique_topic("crc-control")
    create_topic(kafka_bootstrap, crc, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "consistent_random"})
    for key in java:
        producer.produce(crc, json.dumps({"order_id": key}).encode(), key.encode())
    assert producer.flush(30) == 0

    landed = partitions_by_key(consume_all(kafka_bootstrap, crc, expected=len(java)))

    moved = sum(landed[key] != {partition} for key, partition in java.items())
    assert moved > len(java) // 2, f"only {moved} of {len(java)} keys moved: the parity test proves little"

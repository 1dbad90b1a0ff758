"""Value formats against the real broker and local Spark: a bronze round trip byte for byte, and
json values that carry the event, not the storage layout.

The round trip: Avro records in the Confluent wire format, with headers and timestamps, are
produced to a topic, landed in a bronze Parquet table, and replayed through the job's entry point
into another topic; every replayed record must equal its original in key, value, headers (the
originals in order, then the provenance) and timestamp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message
from pyspark.sql import SparkSession

from spark_job import main as job_main
from spark_job import transforms
from spark_job.errors import SourceError
from spark_job.spec.model import JobSpec
from spark_job.spec.parse import spec_from_dict
from tests.fixtures.bronze import IN_WINDOW, as_record, land_bronze, original_records, produce, raw_document
from tests.fixtures.kafka import KEEP_FOREVER, consume_all, create_topic, unique_topic
from tests.fixtures.spark import job_spec, write_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def bronze_table(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The originals produced to a topic, consumed, and landed as a bronze table."""
    topic = unique_topic("bronze-source")
    create_topic(kafka_bootstrap, topic, partitions=3, config=KEEP_FOREVER)
    records = original_records()
    produce(kafka_bootstrap, topic, records)
    landed = consume_all(kafka_bootstrap, topic, expected=len(records))
    return land_bronze(landed, tmp_path_factory.mktemp("lake") / "bronze")


@pytest.fixture(scope="module")
def raw_replayed(
    spark: SparkSession, bronze_table: Path, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], list[Message]]:
    """The bronze table's 2024-01-02 replayed through the job's entry point, with event timestamps."""
    topic = unique_topic("bronze-replay")
    create_topic(kafka_bootstrap, topic, partitions=3, config=KEEP_FOREVER)
    directory = tmp_path_factory.mktemp("raw-job")
    result = directory / "result.json"
    document = raw_document(
        bronze_table, kafka_bootstrap, topic, timestamp="event", result_uri=result.as_uri()
    )
    code = job_main.main([str(write_spec(directory, document))], spark=spark)
    outcome: dict[str, Any] = json.loads(result.read_text())
    assert code == 0, outcome
    return outcome, consume_all(kafka_bootstrap, topic, expected=IN_WINDOW)


def test_raw_replay_publishes_key_and_value_bytes_untouched(
    raw_replayed: tuple[dict[str, Any], list[Message]],
) -> None:
    outcome, messages = raw_replayed
    assert outcome["rows_selected"] == outcome["confirmed"] == len(messages) == IN_WINDOW
    expected = sorted((key or b"", value) for key, value, _, _ in original_records()[:IN_WINDOW])
    assert sorted((message.key() or b"", as_record(message)[1]) for message in messages) == expected
    assert all(as_record(message)[1][:5] == b"\x00\x00\x00\x00\x2a" for message in messages)


def test_raw_replay_keeps_original_headers_in_order_then_provenance(
    raw_replayed: tuple[dict[str, Any], list[Message]], bronze_table: Path
) -> None:
    outcome, messages = raw_replayed
    provenance = [
        ("team", b"payments"),
        ("replay-run-id", outcome["run_id"].encode()),
        ("replay-source", b"bronze"),
        ("replay-window", b"dt 2024-01-02..2024-01-02"),
    ]
    originals = {value: headers for _, value, headers, _ in original_records()}
    landed = pq.read_table(bronze_table, columns=["value", "event_id"]).to_pylist()
    event_ids = {row["value"]: row["event_id"].encode() for row in landed}
    for message in messages:
        _, value, headers, _ = as_record(message)
        assert headers == [*originals[value], *provenance, ("replay-event-id", event_ids[value])]


def test_raw_replay_with_event_timestamps_keeps_the_original_timestamps(
    raw_replayed: tuple[dict[str, Any], list[Message]],
) -> None:
    _, messages = raw_replayed
    originals = {value: stamp for _, value, _, stamp in original_records()}
    for message in messages:
        _, value, _, stamp = as_record(message)
        assert stamp == originals[value]


# --- the value a record carries, on the shared session ---------------------------------------------


def json_spec(table: Path, **overrides: Any) -> JobSpec:
    return spec_from_dict(job_spec(table, "127.0.0.1:9", "unused", **overrides))


def first_value(spark: SparkSession, spec: JobSpec) -> dict[str, Any]:
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    record = transforms.distribute(transforms.with_record_columns(selected, spec), 1, "none").first()
    assert record is not None
    value: dict[str, Any] = json.loads(bytes(record[transforms.VALUE]))
    return value


def test_json_value_leaves_out_the_partition_column(spark: SparkSession, sample_table: Path) -> None:
    value = first_value(spark, json_spec(sample_table, partition_column="dt"))
    assert "dt" not in value
    assert {"event_id", "order_id", "updated_at"} <= set(value)


def test_json_value_columns_are_the_whole_payload_in_their_order(
    spark: SparkSession, sample_table: Path
) -> None:
    spec = json_spec(sample_table, partition_column="dt", value_columns=["order_id", "status", "dt"])
    assert list(first_value(spark, spec)) == ["order_id", "status", "dt"]


def test_unknown_value_column_is_refused_before_anything_is_sent(
    spark: SparkSession, sample_table: Path
) -> None:
    spec = json_spec(sample_table, value_columns=["order_id", "colour"])
    with pytest.raises(SourceError, match="unknown column 'colour'"):
        transforms.select_window(transforms.read_source(spark, spec.source), spec)


def test_raw_headers_column_of_another_type_is_refused(spark: SparkSession, bronze_table: Path) -> None:
    spec = spec_from_dict(raw_document(bronze_table, "127.0.0.1:9", "unused", headers_column="event_id"))
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    with pytest.raises(SourceError, match="headers column 'event_id' is string, not an array of struct"):
        transforms.with_record_columns(selected, spec)

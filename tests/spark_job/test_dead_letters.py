"""Bad records in the real job against the real broker: set aside with ``on_error=dlq``, fatal otherwise.

The window holds one record far larger than the target topic's ``max.message.bytes`` (random text,
so compression cannot shrink it under the limit); the broker refuses it in its delivery report. A
producer with a small ``message.max.bytes`` refuses the same record at ``produce()`` instead.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.fixtures.kafka import (
    consume_all,
    create_topic,
    headers_of,
    key_of,
    topic_record_count,
    unique_topic,
    value_of,
)
from tests.fixtures.spark import job_spec, run_in_process

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TOPIC_LIMIT = "4096"  # the target topic's max.message.bytes: every ordinary record fits many times over
BIG_DAY = "2024-01-03"  # inside job_spec's default window (2024-01-02..2024-01-04, 900 rows)
WINDOW_ROWS = 900


@pytest.fixture(scope="module")
def big_record_table(sample_table: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(table, event id): the sample table with one row's payload grown to ~40 kB of random text."""
    table = tmp_path_factory.mktemp("dead-letters") / "orders"
    shutil.copytree(sample_table, table)
    path = next((table / f"dt={BIG_DAY}").glob("*.parquet"))
    data = pq.read_table(path)
    payloads = data.column("payload").to_pylist()
    payloads[7] = base64.b64encode(random.Random(13).randbytes(30_000)).decode()
    index = data.column_names.index("payload")
    pq.write_table(data.set_column(index, "payload", pa.array(payloads, data.schema.field(index).type)), path)
    return table, str(data.column("event_id")[7].as_py())


def test_dlq_sets_the_oversize_record_aside_and_the_run_succeeds(
    spark: SparkSession,
    big_record_table: tuple[Path, str],
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table, big = big_record_table
    topic, dlq_topic = unique_topic("replay-small"), unique_topic("replay-dlq")
    create_topic(kafka_bootstrap, topic, partitions=2, config={"max.message.bytes": TOPIC_LIMIT})
    document = job_spec(table, kafka_bootstrap, topic, on_error="dlq", dlq_topic=dlq_topic)
    run = run_in_process(spark, tmp_path, document, capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    result = run.document
    assert (result["dead_lettered"], result["rows_selected"]) == (1, WINDOW_ROWS)
    assert result["confirmed"] + result["dead_lettered"] == result["rows_selected"]
    assert topic_record_count(kafka_bootstrap, topic) == result["confirmed"]
    published = {json.loads(value_of(m))["event_id"] for m in consume_all(kafka_bootstrap, topic)}
    assert len(published) == WINDOW_ROWS - 1 and big not in published
    [parked] = consume_all(kafka_bootstrap, dlq_topic, expected=1)
    headers = {name: value.decode() for name, value in headers_of(parked).items()}
    assert headers["replay-event-id"] == big
    assert "MSG_SIZE_TOO_LARGE" in headers["replay-error"]
    assert headers["replay-run-id"] == document["run_id"] and headers["replay-source"] == "orders"
    assert headers["replay-topic"] == topic
    value = json.loads(value_of(parked))
    assert value["event_id"] == big and key_of(parked).decode() == value["order_id"]
    reconciled = result["reconcile"]  # missing from the topic, and explained by the dead-letter topic
    assert (reconciled["missing"], reconciled["missing_sample"], reconciled["missing_dead_lettered"]) == (
        1,
        [big],
        1,
    )
    assert (reconciled["unexpected"], reconciled["duplicates"], reconciled["found"]) == (
        0,
        0,
        WINDOW_ROWS - 1,
    )


def test_fail_mode_fails_the_run_naming_the_oversize_records_event_id(
    spark: SparkSession,
    big_record_table: tuple[Path, str],
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table, big = big_record_table
    topic = unique_topic("replay-small")
    create_topic(kafka_bootstrap, topic, config={"max.message.bytes": TOPIC_LIMIT})
    run = run_in_process(spark, tmp_path, job_spec(table, kafka_bootstrap, topic), capsys)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    reason = run.document["reason"]
    assert f"event '{big}' cannot be published to topic '{topic}'" in reason, reason
    assert "MSG_SIZE_TOO_LARGE" in reason
    # publishing had started: the failure says how many records did reach the broker, never "none"
    on_topic = topic_record_count(kafka_bootstrap, topic)
    assert 0 < run.document["on_topic_at_least"] <= on_topic
    assert run.document["confirmed"] <= run.document["on_topic_at_least"]
    assert run.document["dead_lettered"] is None  # fail mode sets nothing aside: no count to give
    assert sum(hi - lo for lo, hi in run.document["offsets"]["partitions"].values()) == on_topic


def test_a_record_the_producer_refuses_at_produce_is_set_aside_too(
    spark: SparkSession,
    big_record_table: tuple[Path, str],
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    table, big = big_record_table
    topic, dlq_topic = unique_topic("replay-ok"), unique_topic("replay-dlq")
    create_topic(kafka_bootstrap, topic, partitions=2)
    kafka = {"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 16_384}  # the producer's own limit
    document = job_spec(table, kafka_bootstrap, topic, kafka=kafka, on_error="dlq", dlq_topic=dlq_topic)
    run = run_in_process(spark, tmp_path, document, capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    assert (run.document["confirmed"], run.document["dead_lettered"]) == (WINDOW_ROWS - 1, 1)
    [parked] = consume_all(kafka_bootstrap, dlq_topic, expected=1)
    headers = {name: value.decode() for name, value in headers_of(parked).items()}
    assert headers["replay-event-id"] == big and "MSG_SIZE_TOO_LARGE" in headers["replay-error"]

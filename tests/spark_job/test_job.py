"""The whole job against the real broker: what lands, what is counted, and how it fails.

One real ``spark-submit`` replays a window and several tests read what it left behind; failure
cases run ``main`` in-process on the shared session (same code path after argument parsing), except
the broker outage, which needs a job process to outlive the broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Message
from pyspark.sql import SparkSession

from spark_job.progress import ProgressReader
from tests.fixtures.faults import fail_first_attempt
from tests.fixtures.kafka import (
    LocalBroker,
    consume_all,
    create_topic,
    headers_of,
    key_of,
    topic_record_count,
    unique_topic,
    value_of,
)
from tests.fixtures.spark import (
    MAIN,
    JobRun,
    job_spec,
    parse_job_output,
    run_in_process,
    spark_environment,
    spark_submit,
    spawn_spark_submit,
    write_spec,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PROGRESS_TOPIC = "replay.progress.tests"


def window_ids(table: Path, first_day: str, last_day: str) -> set[str]:
    day = ds.field("dt")
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    selected = dataset.to_table(filter=(day >= first_day) & (day <= last_day), columns=["event_id"])
    return set(selected.column("event_id").to_pylist())


def event_ids(messages: list[Message]) -> list[str]:
    return [json.loads(value_of(message))["event_id"] for message in messages]


# --- one real spark-submit, several views of its outcome ------------------------------------------


@pytest.fixture(scope="module")
def job_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `TMPDIR` of the module's job: what it leaves there, every run on a daemon's host would."""
    return tmp_path_factory.mktemp("job-tmp")


@pytest.fixture(scope="module")
def replayed(
    sample_table: Path, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, job_temp_dir: Path
) -> tuple[JobRun, list[Message], Path]:
    topic = unique_topic("replay-orders")
    create_topic(kafka_bootstrap, topic, partitions=3)
    directory = tmp_path_factory.mktemp("job")
    result_file = directory / "result.json"
    document = job_spec(sample_table, kafka_bootstrap, topic, tps=400, result_uri=result_file.as_uri())
    run = spark_submit(write_spec(directory, document), temp_dir=job_temp_dir)
    assert run.kind == "REPLAY_RESULT", run.document
    return run, consume_all(kafka_bootstrap, topic), result_file


def test_the_job_leaves_nothing_in_its_temporary_directory(
    replayed: tuple[JobRun, list[Message], Path], job_temp_dir: Path
) -> None:
    """The package archive it ships to executors included: a daemon's host runs thousands of jobs."""
    assert sorted(path.name for path in job_temp_dir.iterdir()) == []


def test_exactly_the_windows_events_land(
    replayed: tuple[JobRun, list[Message], Path], sample_table: Path
) -> None:
    _, messages, _ = replayed
    ids = event_ids(messages)
    assert len(ids) == len(set(ids))
    assert set(ids) == window_ids(sample_table, "2024-01-02", "2024-01-04")


def test_confirmed_equals_records_in_topic_equals_rows_selected(
    replayed: tuple[JobRun, list[Message], Path],
) -> None:
    run, messages, _ = replayed
    assert run.returncode == 0
    assert run.document["confirmed"] == len(messages) == run.document["rows_selected"] == 900
    assert (run.document["failed_tasks"], run.document["duplicates_possible"]) == (0, 0)


def test_the_verdict_came_from_records_read_while_the_run_published(
    replayed: tuple[JobRun, list[Message], Path],
) -> None:
    """docs/rules.md rule 9: the follower read the run's ranges as they were written (only the tail
    was left at the end), and its verdict is the clean one reading them back gives."""
    run, _, _ = replayed
    said = run.stdout + run.stderr  # the driver's log lines reach spark-submit's stdout
    assert "the topic followed" in said, run.stdout[-3000:]
    assert "the follower failed" not in said
    reconciled = run.document["reconcile"]
    assert (reconciled["selected"], reconciled["found"], reconciled["scanned_records"]) == (900, 900, 900)


def test_keys_are_the_entity_column(replayed: tuple[JobRun, list[Message], Path]) -> None:
    _, messages, _ = replayed
    assert all(key_of(message).decode() == json.loads(value_of(message))["order_id"] for message in messages)


def test_every_record_carries_provenance_and_custom_headers(
    replayed: tuple[JobRun, list[Message], Path],
) -> None:
    run, messages, _ = replayed
    expected = [
        ("team", b"payments"),
        ("replay-run-id", run.document["run_id"].encode()),
        ("replay-source", b"orders"),
        ("replay-window", b"dt 2024-01-02..2024-01-04"),
    ]
    for message, event_id in zip(messages, event_ids(messages), strict=True):
        assert message.headers() == [*expected, ("replay-event-id", event_id.encode())]


def test_each_entitys_events_arrive_in_event_time_order(replayed: tuple[JobRun, list[Message], Path]) -> None:
    _, messages, _ = replayed
    per_key: dict[bytes, list[tuple[str, str]]] = defaultdict(list)
    for message in messages:  # consume_all keeps per-partition order; one key lives in one partition
        value = json.loads(value_of(message))
        per_key[key_of(message)].append((value["updated_at"], value["event_id"]))
    assert all(events == sorted(events) for events in per_key.values())
    assert any(len(events) > 1 for events in per_key.values())


def test_the_run_paces_to_its_tps_and_reports_the_same_json_it_writes(
    replayed: tuple[JobRun, list[Message], Path],
) -> None:
    run, _, result_file = replayed
    assert run.document["slots"] == 2
    assert run.document["partitions"] % 2 == 0
    # 900 rows in partitions of unequal size: proportional shares end every task with the round, so
    # the span is the schedule's (899 / 400 s) plus only how far apart the tasks began, never a tail
    span = run.document["confirmed"] / run.document["achieved_tps"]
    assert span <= 899 / 400 + run.document["start_spread_s"] + 0.2, run.document
    assert run.document["partition_skew"] > 1.1  # the sample's partitions do differ in size
    assert run.document["achieved_tps"] <= 1.02 * 400
    assert json.loads(result_file.read_text()) == run.document


# --- counting under retries and failures (in-process on the shared session) ----------------------


def test_a_retried_task_is_counted_once_and_its_duplicates_reported(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = unique_topic("replay-retry")
    create_topic(kafka_bootstrap, topic)
    fail_first_attempt(monkeypatch, after=5)
    document = job_spec(sample_table, kafka_bootstrap, topic, ordering="none")
    run = run_in_process(spark, tmp_path, document, capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    assert run.document["confirmed"] == run.document["rows_selected"] == 900
    assert (run.document["failed_tasks"], run.document["duplicates_possible"]) == (1, 5)
    assert topic_record_count(kafka_bootstrap, topic) == 905
    reconciled = run.document["reconcile"]  # the event ids say the same: 5 extra copies, nothing else
    assert (reconciled["duplicates"], reconciled["missing"], reconciled["unexpected"]) == (5, 0, 0)
    assert (reconciled["selected"], reconciled["found"], len(reconciled["duplicates_sample"])) == (
        900,
        905,
        5,
    )
    assert set(event_ids(consume_all(kafka_bootstrap, topic))) == window_ids(
        sample_table, "2024-01-02", "2024-01-04"
    )


def test_a_record_too_large_for_the_topic_fails_with_the_brokers_reason(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-small")
    create_topic(kafka_bootstrap, topic, config={"max.message.bytes": "100"})
    run = run_in_process(spark, tmp_path, job_spec(sample_table, kafka_bootstrap, topic), capsys)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    assert "Message size too large (MSG_SIZE_TOO_LARGE)" in run.document["reason"]
    assert run.document["confirmed"] <= topic_record_count(kafka_bootstrap, topic)


def test_broker_outage_fails_the_run_without_overcounting(
    sample_table: Path, kafka_bootstrap: str, broker_control: LocalBroker, tmp_path: Path
) -> None:
    topic = unique_topic("replay-outage")
    create_topic(kafka_bootstrap, topic)
    kafka = {"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 3000}
    window = {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-07"}
    document = job_spec(sample_table, kafka_bootstrap, topic, tps=150, kafka=kafka, window=window)
    job = spawn_spark_submit(write_spec(tmp_path, document))
    try:
        _wait_for_progress(kafka_bootstrap, document["run_id"], at_least=150, timeout_s=90)
        with broker_control.stopped():
            stdout, stderr = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            job.kill()
    run = parse_job_output(job.returncode, stdout, stderr)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    assert "Message timed out" in run.document["reason"]
    on_topic = topic_record_count(kafka_bootstrap, topic)
    assert run.document["confirmed"] <= on_topic < 2100
    at_least = run.document["on_topic_at_least"]  # a lower bound, or null: unknown is never 0
    assert at_least is None or run.document["confirmed"] <= at_least <= on_topic


def _wait_for_progress(bootstrap: str, run_id: str, *, at_least: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with ProgressReader(
        kafka={"bootstrap.servers": bootstrap}, topic=PROGRESS_TOPIC, run_id=run_id
    ) as reader:
        while reader.read().confirmed < at_least:
            assert time.monotonic() < deadline, "the job never reported progress"
            time.sleep(0.5)


# --- refused before anything is sent ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"key_column": "customer"}, "unknown column 'customer' in source orders"),
        (
            {"window": {"column": "dt", "start_day": "2030-01-01", "end_day": "2030-01-02"}},
            "no rows in window dt 2030-01-01..2030-01-02 of source orders",
        ),
        ({"topic": "replay.absent-topic"}, "topic 'replay.absent-topic' does not exist on the cluster"),
    ],
)
def test_bad_requests_fail_with_a_clear_reason(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    overrides: dict[str, Any],
    reason: str,
) -> None:
    document = {**job_spec(sample_table, kafka_bootstrap, unique_topic("unused")), **overrides}
    run = run_in_process(spark, tmp_path, document, capsys)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    assert (run.document["reason"], run.document["confirmed"]) == (reason, 0)
    assert (run.document["on_topic_at_least"], run.document["dead_lettered"]) == (0, 0)  # nothing was sent


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"tps": -5}, "invalid spec field 'tps': must be >= 0 (0 = unthrottled), got -5"),
        ({"topic": None}, "invalid spec field 'topic': is required"),
    ],
)
def test_invalid_specs_fail_before_spark_starts(
    tmp_path: Path, overrides: dict[str, Any], reason: str
) -> None:
    merged = {**job_spec(Path("/lake/orders"), "127.0.0.1:9", "t"), **overrides}
    document = {key: value for key, value in merged.items() if value is not None}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(MAIN), str(write_spec(tmp_path, document))],
        capture_output=True,
        text=True,
        timeout=60,
        env=spark_environment(),
        check=False,
    )
    run = parse_job_output(result.returncode, result.stdout, result.stderr)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    assert run.document["reason"] == reason
    assert time.monotonic() - started < 10


# --- watermark runs ----------------------------------------------------------------------------------


def test_watermark_run_publishes_rows_past_low_and_reports_its_high(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-watermark")
    create_topic(kafka_bootstrap, topic)
    document = job_spec(
        sample_table, kafka_bootstrap, topic, window=None, watermark={"column": "dt", "low": "2024-01-06"}
    )
    run = run_in_process(spark, tmp_path, document, capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    assert (run.document["confirmed"], run.document["watermark_high"]) == (300, "2024-01-07")
    messages = consume_all(kafka_bootstrap, topic)
    assert set(event_ids(messages)) == window_ids(sample_table, "2024-01-07", "2024-01-07")
    assert headers_of(messages[0])["replay-watermark"] == b"dt (2024-01-06, 2024-01-07]"


def test_watermark_run_with_nothing_new_succeeds_publishing_nothing(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-idle")
    create_topic(kafka_bootstrap, topic)
    document = job_spec(
        sample_table, kafka_bootstrap, topic, window=None, watermark={"column": "dt", "low": "2024-01-07"}
    )
    run = run_in_process(spark, tmp_path, document, capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    assert (run.document["rows_selected"], run.document["confirmed"]) == (0, 0)
    assert run.document["watermark_high"] == "2024-01-07"
    assert topic_record_count(kafka_bootstrap, topic) == 0

"""The job's final report against the real broker: one clock for the rate, and honest counts on failure.

The achieved rate is confirmed records over the span between the first and last delivery report;
the broker stamps every record it appends (``message.timestamp.type=LogAppendTime``), so the same
ratio computed from those stamps must agree with it. The pure pieces (the rate, the per-second
series) are checked on their own first.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaException
from py4j.protocol import Py4JNetworkError
from pyspark.sql import SparkSession

from spark_job.job import achieved_tps
from spark_job.progress import Beacon
from spark_job.result import memory_hint, rate_series, reason_of
from tests.fixtures.kafka import consume_all, create_topic, topic_record_count, unique_topic
from tests.fixtures.spark import job_spec, run_in_process

WINDOW_ROWS = 900  # job_spec's default window
PROGRESS_TOPIC = "replay.progress.tests"  # job_spec's
RATE_TOLERANCE = 0.02


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (
            RuntimeError("Job aborted: java.lang.OutOfMemoryError: Java heap space\n\tat ..."),
            "ran out of memory",
        ),
        (Py4JNetworkError("Answer from Java side is empty"), "the Spark JVM is gone"),
    ],
)
def test_running_out_of_memory_names_the_setting_to_raise(exc: Exception, cause: str) -> None:
    reason = memory_hint(exc)
    assert cause in reason
    assert all(
        name in reason for name in ("spark.executor.memory", "spark.driver.memory", "emr.executor_memory_gb")
    )


def test_other_failures_keep_their_own_reason() -> None:
    refused = KafkaException("Connect to ipv4#127.0.0.1:9 failed: Connection refused")
    assert memory_hint(refused) == reason_of(refused)
    assert memory_hint(ConnectionRefusedError(111, "Connection refused")) == "[Errno 111] Connection refused"


def test_the_rate_needs_two_confirmations_and_a_span() -> None:
    assert achieved_tps(900, 100.0, 103.0) == 300.0
    assert achieved_tps(1, 100.0, 100.0) is None  # one record has no span: not measured, not 0
    assert achieved_tps(2, 100.0, 100.0) is None
    assert achieved_tps(0, None, None) is None


def test_the_series_sums_tasks_per_second_and_fills_quiet_seconds() -> None:
    series = rate_series([{100: 3, 102: 1}, {100: 2, 101: 4}])
    assert series == {"start": 100, "counts": [5, 4, 1]}
    assert rate_series([{}, {}]) is None


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.serial  # its busiest second of confirmations went 320 against 316 beside a second process
def test_achieved_tps_agrees_with_the_brokers_log_append_times(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-rate")
    create_topic(kafka_bootstrap, topic, partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    run = run_in_process(spark, tmp_path, job_spec(sample_table, kafka_bootstrap, topic, tps=300), capsys)
    assert run.kind == "REPLAY_RESULT", run.document
    result = run.document
    messages = consume_all(kafka_bootstrap, topic, expected=WINDOW_ROWS)
    stamps = []
    for message in messages:
        kind, stamp = message.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        stamps.append(stamp)
    broker_rate = len(stamps) / ((max(stamps) - min(stamps)) / 1000)
    ratio = result["achieved_tps"] / broker_rate
    print(f"achieved {result['achieved_tps']}/s, broker {broker_rate:.2f}/s, ratio {ratio:.4f}")
    assert abs(ratio - 1) <= RATE_TOLERANCE, (result["achieved_tps"], broker_rate)
    first = datetime.fromisoformat(result["first_delivery_at"]).timestamp()
    last = datetime.fromisoformat(result["last_delivery_at"]).timestamp()
    assert result["achieved_tps"] == pytest.approx(result["confirmed"] / (last - first), rel=1e-3)
    series = result["rate_series"]
    assert sum(series["counts"]) == result["confirmed"] == WINDOW_ROWS
    assert series["start"] == int(first) and series["start"] + len(series["counts"]) - 1 == int(last)
    assert max(series["counts"]) <= 1.05 * 300 + 1  # paced: no second far over the target
    ranges = result["offsets"]["partitions"]
    assert result["offsets"]["topic"] == topic and set(ranges) == {"0", "1"}
    assert sum(hi - lo for lo, hi in ranges.values()) == WINDOW_ROWS
    # each beacon says when it was sent, so outsiders rate them by their own clock (every beacon, as
    # an outsider reads the topic: a ProgressReader keeps each attempt's furthest one only)
    key = result["run_id"].encode()
    progress = consume_all(kafka_bootstrap, PROGRESS_TOPIC)
    beacons = [Beacon.decode(value) for m in progress if m.key() == key and (value := m.value()) is not None]
    sent = [beacon.at for beacon in beacons if beacon.at is not None]
    assert len(sent) == len(beacons) > 0 and min(sent) < first and max(sent) >= last


@pytest.mark.kafka
@pytest.mark.spark
def test_a_result_that_cannot_be_written_still_says_what_reached_the_broker(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = unique_topic("replay-unwritten")
    create_topic(kafka_bootstrap, topic)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the result's directory should be")
    document = job_spec(sample_table, kafka_bootstrap, topic, result_uri=(blocker / "result.json").as_uri())
    run = run_in_process(spark, tmp_path, document, capsys)
    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
    failure = run.document
    assert failure["reason"].startswith("published, but cannot write the result"), failure["reason"]
    assert failure["confirmed"] == failure["on_topic_at_least"] == WINDOW_ROWS
    assert topic_record_count(kafka_bootstrap, topic) == WINDOW_ROWS
    assert (failure["dead_lettered"], failure["offsets"]["partitions"]) == (0, {"0": [0, WINDOW_ROWS]})

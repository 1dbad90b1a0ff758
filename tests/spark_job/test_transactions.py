"""``delivery=transactional`` against the real broker: a retried task resumes after its last commit.

The fault is injected from the test side (``tests.fixtures.faults``): attempt 0 of partition 0 breaks
after some rows. The idempotent twin of these tests (``test_job.py``) lands those rows twice and
reports them; here a consumer reading committed records sees every event once, while the log itself
still holds the aborted attempt's uncommitted records (read uncommitted, they are there).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer
from pyspark.sql import SparkSession

from scripts import local_kafka
from spark_job.errors import PublishError
from spark_job.progress import Beacon
from spark_job.publish import transactions
from spark_job.publish.transactions import committed_rows
from tests.fixtures.faults import fail_first_attempt
from tests.fixtures.kafka import consume_all, create_topic, topic_record_count, unique_topic, value_of
from tests.fixtures.leftovers import track
from tests.fixtures.spark import job_spec, run_in_process

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def ids_of(messages: list[Message]) -> Counter[str]:
    return Counter(json.loads(value_of(message))["event_id"] for message in messages)


def test_a_retried_task_resumes_after_its_last_commit_and_no_event_lands_twice(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 200/s partition 0's first attempt commits for about two seconds before it breaks: its
    retry skips what was committed, and sends the rest once."""
    topic = unique_topic("replay-txn-retry")
    create_topic(kafka_bootstrap, topic, partitions=3)
    fail_first_attempt(monkeypatch, after=250)
    document = job_spec(
        sample_table, kafka_bootstrap, topic, tps=200, ordering="none", delivery="transactional"
    )
    run = run_in_process(spark, tmp_path, document, capsys)

    assert run.kind == "REPLAY_RESULT", run.document
    result = run.document
    assert result["delivery"] == "transactional"
    assert result["confirmed"] == result["rows_selected"] == 900
    assert result["failed_tasks"] == 1
    assert result["duplicates_possible"] == 0
    assert 0 < result["resumed"] <= 250  # what attempt 0 had committed, and no more than it was given
    assert result["transactions"] >= 4
    reconciled = result["reconcile"]
    assert (reconciled["missing"], reconciled["duplicates"], reconciled["unexpected"]) == (0, 0, 0)
    committed = ids_of(consume_all(kafka_bootstrap, topic))
    assert len(committed) == sum(committed.values()) == 900
    everything = ids_of(consume_all(kafka_bootstrap, topic, isolation="read_uncommitted"))
    assert set(everything) == set(committed)
    aborted = sum(everything.values()) - 900  # attempt 0's records after its last commit
    assert aborted == 250 - result["resumed"], (aborted, result["resumed"])


def test_committed_progress_is_the_largest_committed_count_and_ignores_aborted_ones(
    kafka_bootstrap: str,
) -> None:
    """What a retry resumes from: beacons in a committed transaction count, one in an aborted
    transaction does not, another run's and another partition's do not."""
    topic = unique_topic("replay-progress-txn")
    create_topic(kafka_bootstrap, topic)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": unique_topic("txn")})
    producer.init_transactions(30)

    def in_transaction(beacons: list[Beacon], *, commit: bool) -> None:
        producer.begin_transaction()
        for beacon in beacons:
            producer.produce(topic, beacon.encode(), beacon.run_id.encode())
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    in_transaction(
        [Beacon("r-txn", 0, 0, 120, task_id=1), Beacon("r-txn", 0, 0, 180, task_id=1)], commit=True
    )
    in_transaction([Beacon("r-txn", 0, 0, 260, task_id=1)], commit=False)
    in_transaction(
        [Beacon("r-txn", 1, 0, 900, task_id=2), Beacon("r-other", 0, 0, 700, task_id=3)], commit=True
    )
    in_transaction([Beacon("r-txn", 0, 1, 40, task_id=4, resumed=180)], commit=True)
    assert committed_rows({"bootstrap.servers": kafka_bootstrap}, topic, "r-txn", 0, since=time.time()) == 220
    assert committed_rows({"bootstrap.servers": kafka_bootstrap}, topic, "r-none", 0, since=time.time()) == 0


def test_a_cluster_that_refuses_transactions_fails_the_run_before_its_first_record(
    spark: SparkSession,
    sample_table: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker whose transaction log needs three replicas cannot start a transaction: the driver
    says so before the publishing tasks start, with the reason and the next step, and nothing
    reaches the topic. Where the metadata does not tell, a task's own ``fence`` still translates
    its timeout."""
    state_dir = tmp_path_factory.mktemp("kafka-no-transactions")
    track(partial(local_kafka.stop, state_dir))
    bootstrap = local_kafka.start(state_dir, overrides={"transaction.state.log.replication.factor": "3"})
    try:
        topic = unique_topic("replay-refused")
        create_topic(bootstrap, topic)
        document = job_spec(sample_table, bootstrap, topic, delivery="transactional", tps=0)
        document["progress"] = {"topic": "replay.progress.tests", "interval_s": 1}
        run = run_in_process(spark, tmp_path, document, capsys)

        assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1)
        reason = run.document["reason"]
        # the driver's refusal, from the metadata: no task waited out its init (that reason differs)
        assert "replication.factor is 3 and it has 1 live broker" in reason, reason
        assert "delivery=idempotent" in reason  # the next step
        assert topic_record_count(bootstrap, topic) == 0

        monkeypatch.setattr(transactions, "INIT_TIMEOUT_S", 2.0)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_topic("txn-refused")})
        with pytest.raises(PublishError, match=r"did not start a transaction in 2s.*delivery=idempotent"):
            transactions.fence(producer)
    finally:
        local_kafka.stop(state_dir)


def test_a_commit_behind_another_runs_open_transaction_is_still_found(kafka_bootstrap: str) -> None:
    """All runs' beacons share the progress partition: a transaction another task opened before the
    predecessor's last commit holds the committed end back. The read waits it out instead of stopping
    there, so the retry resumes after the last commit, not an older one."""
    topic = unique_topic("replay-progress-open")
    create_topic(kafka_bootstrap, topic)
    other = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": unique_topic("txn-other")})
    mine = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": unique_topic("txn-mine")})
    other.init_transactions(30)
    mine.init_transactions(30)
    mine.begin_transaction()
    mine.produce(topic, Beacon("r-held", 0, 0, 100, task_id=1).encode(), b"r-held")
    mine.commit_transaction(30)
    other.begin_transaction()  # open below the commit that follows, until the timer ends it
    other.produce(topic, Beacon("r-other", 0, 0, 5, task_id=2).encode(), b"r-other")
    other.flush(30)
    mine.begin_transaction()
    mine.produce(topic, Beacon("r-held", 0, 0, 340, task_id=1).encode(), b"r-held")
    mine.commit_transaction(30)
    timer = threading.Timer(1.5, lambda: other.commit_transaction(30))
    timer.start()
    try:
        began = time.monotonic()
        found = committed_rows({"bootstrap.servers": kafka_bootstrap}, topic, "r-held", 0, since=time.time())
        waited = time.monotonic() - began
    finally:
        timer.join()

    assert found == 340
    assert waited >= 1.0  # it waited for the open transaction rather than read to where it began

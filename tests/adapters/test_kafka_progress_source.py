"""A run's progress is read from its own position on the shared progress topic, on a real broker.

The topic holds a long history of other runs' beacons (stamped two hours back, as the broker keeps
them); a reader for a run submitted now starts each partition at the run's submission less the clock
margin, so it reads the run's beacons and what other runs sent meanwhile, never the history. A new
probe for a run already going (a restarted daemon) finds the same count. Before, every reader
started at offset 0 and its cost grew with the topic.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from daemon.adapters.kafka_progress_source import KafkaProgressSource
from daemon.core.partitions import PartitionProgress, PartitionState
from spark_job.progress import Beacon, ProgressReader
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka]

PARTITIONS = 3
HISTORY = 3000  # other runs' beacons sent before this run was submitted


def _produce(producer: Producer, topic: str, beacons: list[Beacon], *, at_ms: int | None = None) -> None:
    for i, beacon in enumerate(beacons):
        partition = i % PARTITIONS
        if at_ms is None:
            producer.produce(topic, beacon.encode(), beacon.run_id, partition=partition)
        else:
            producer.produce(topic, beacon.encode(), beacon.run_id, partition=partition, timestamp=at_ms)
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(30) == 0


def test_a_new_runs_reader_starts_at_its_submission_not_at_the_topics_beginning(kafka_bootstrap: str) -> None:
    topic = unique_topic("progress-scale")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    two_hours_ago_ms = int((time.time() - 7200) * 1000)
    history = [Beacon(f"r-old-{i}", 0, 0, i, task_id=1, at=two_hours_ago_ms / 1000) for i in range(HISTORY)]
    _produce(producer, topic, history, at_ms=two_hours_ago_ms)
    submitted = time.time()
    ours = [Beacon("r-new", p, 0, 10 * (p + 1), task_id=p + 1, at=submitted) for p in range(PARTITIONS)]
    meanwhile = [Beacon("r-other", p, 0, 999, task_id=p + 1, at=submitted) for p in range(PARTITIONS)]
    _produce(producer, topic, ours + meanwhile)
    kafka = {"bootstrap.servers": kafka_bootstrap}

    with ProgressReader(kafka=kafka, topic=topic, run_id="r-new", since=submitted) as reader:
        first = reader.read()
        _produce(producer, topic, [Beacon("r-new", 0, 0, 40, done=True, task_id=1, at=time.time())])
        second = reader.read()
        started, read = reader.started_at_offsets, reader.messages_read

    assert started == {p: HISTORY // PARTITIONS for p in range(PARTITIONS)}  # past every older beacon
    assert read == len(ours) + len(meanwhile) + 1  # this run's era only, not the topic's history
    assert (first.confirmed, first.beacons) == (10 + 20 + 30, 3)
    assert (second.confirmed, second.partitions_done) == (40 + 20 + 30, 1)

    restarted = KafkaProgressSource(kafka_config=kafka, topic=topic)  # a daemon restarted mid-run
    try:
        sample = restarted.sample("r-new", since=submitted)
        assert sample is not None
        assert sample.confirmed == 40 + 20 + 30
        assert restarted.confirmed("r-old-7", since=submitted) == 0  # history is not read at all
    finally:
        restarted.close()


def test_a_reader_without_a_start_still_reads_the_whole_topic(kafka_bootstrap: str) -> None:
    topic = unique_topic("progress-whole")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    old_ms = int((time.time() - 7200) * 1000)
    _produce(
        producer, topic, [Beacon("r-1", p, 0, 5, task_id=p + 1) for p in range(PARTITIONS)], at_ms=old_ms
    )

    with ProgressReader(kafka={"bootstrap.servers": kafka_bootstrap}, topic=topic, run_id="r-1") as reader:
        assert reader.read().confirmed == 5 * PARTITIONS
        assert reader.started_at_offsets == {p: 0 for p in range(PARTITIONS)}


def test_a_sample_gives_each_partitions_line_with_its_retries_and_how_it_ended(kafka_bootstrap: str) -> None:
    topic = unique_topic("progress-lines")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    now = time.time()
    beacons = [
        Beacon("r-lines", 0, 0, 40, task_id=1, at=now, rows=100),  # still sending
        Beacon("r-lines", 1, 0, 30, failed=True, task_id=2, at=now, rows=50),  # lost its first try,
        Beacon("r-lines", 1, 1, 50, done=True, task_id=7, at=now + 1, rows=50),  # and its retry ended
        Beacon("r-lines", 2, 0, 0, failed=True, task_id=3, at=now, rows=20),  # failed, not retried yet
        Beacon("r-other", 0, 0, 999, done=True, task_id=4, at=now, rows=999),  # another run's
    ]
    for beacon in beacons:
        producer.produce(topic, beacon.encode(), beacon.run_id, partition=beacon.task_id % PARTITIONS)
    assert producer.flush(30) == 0
    source = KafkaProgressSource(kafka_config={"bootstrap.servers": kafka_bootstrap}, topic=topic)
    try:
        sample = source.sample("r-lines", since=now - 60)
    finally:
        source.close()

    assert sample is not None and sample.confirmed == 40 + 50 + 0
    assert sample.partitions == (
        PartitionProgress(0, 100, 40, 1, PartitionState.SENDING),
        PartitionProgress(1, 50, 50, 2, PartitionState.DONE),
        PartitionProgress(2, 20, 0, 1, PartitionState.FAILED),
    )
    assert [line.share for line in sample.partitions] == [0.4, 1.0, 0.0]


def test_readers_of_runs_no_longer_followed_are_closed_and_the_rest_kept(kafka_bootstrap: str) -> None:
    topic = unique_topic("progress-forget")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    _produce(producer, topic, [Beacon(run, 0, 0, 7, task_id=1) for run in ("r-1", "r-2")])
    source = KafkaProgressSource(kafka_config={"bootstrap.servers": kafka_bootstrap}, topic=topic)
    try:
        assert [source.confirmed(run) for run in ("r-1", "r-2")] == [7, 7]
        readers = dict(source._readers)

        source.forget_all_but(["r-2", "r-never-sampled"])

        assert list(source._readers) == ["r-2"]
        with pytest.raises(RuntimeError):  # closed: its consumers are gone
            readers["r-1"].read(timeout_s=1.0)
        assert source.confirmed("r-2") == 7
    finally:
        source.close()

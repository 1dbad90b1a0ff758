"""The topic follower against the real broker: what it read while a run published is exactly what
reading the run's offset ranges afterwards finds, on a topic other producers write to as well.

Records are produced by hand to chosen partitions: the run's own (with a duplicate), another run's,
records without headers, and, after the run's end offsets were taken, more of both (a live topic
goes on). The reference is the reconcile's own read of ``[lo, hi)``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence

import pytest
from confluent_kafka import Producer

from spark_job.follower import TopicFollower
from spark_job.reconcile import encoded_runs, event_id_of, records, watermarks
from spark_job.spec.model import OffsetRanges
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka]

RUN = "r-follow"
Record = tuple[int, str | None, str | None]  # partition, run id header, event id header


def produce(bootstrap: str, topic: str, batch: Sequence[Record]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, run_id, event_id in batch:
        pairs = (("replay-run-id", run_id), ("replay-event-id", event_id))
        headers: list[tuple[str, str | bytes | None]] = [
            (name, value.encode()) for name, value in pairs if value is not None
        ]
        producer.produce(topic, b"{}", b"k", partition=partition, headers=headers)
    assert producer.flush(30) == 0


def read_back(bootstrap: str, ranges: OffsetRanges) -> tuple[Counter[str], int]:
    """The reference: the run's ids and the records in its ranges, read after the fact."""
    kafka, runs = {"bootstrap.servers": bootstrap}, encoded_runs(RUN)
    found: Counter[str] = Counter()
    scanned = 0
    for partition, (lo, hi) in ranges.partitions.items():
        for message in records(kafka, ranges.topic, partition, lo, hi, 10.0):
            scanned += 1
            event_id = event_id_of(message.headers(), runs)
            if event_id is not None:
                found[event_id] += 1
    return found, scanned


def test_what_the_follower_read_is_what_reading_the_ranges_afterwards_finds(kafka_bootstrap: str) -> None:
    topic = unique_topic("follow")
    create_topic(kafka_bootstrap, topic, partitions=2)
    kafka = {"bootstrap.servers": kafka_bootstrap}
    produce(kafka_bootstrap, topic, [(0, "r-earlier", "e-0"), (1, None, None)])  # before the run
    before = {partition: hi for partition, (_, hi) in watermarks(kafka, topic).items()}
    follower = TopicFollower(kafka, topic, before, RUN).start()

    ours = [(n % 2, RUN, f"e-{n}") for n in range(1, 301)]
    others = [(n % 2, "r-other", f"o-{n}") for n in range(50)]
    produce(kafka_bootstrap, topic, ours[:150] + others[:25] + [(1, None, None)])
    time.sleep(0.5)  # the follower reads while the "run" still publishes
    produce(kafka_bootstrap, topic, ours[150:] + others[25:] + [(0, RUN, "e-7")])  # a duplicate
    after = watermarks(kafka, topic)
    ranges = OffsetRanges(topic, {p: (before[p], hi) for p, (_, hi) in after.items()})
    produce(kafka_bootstrap, topic, [(0, RUN, "e-late"), (1, "r-other", "o-late")])  # a live topic goes on

    followed, scanned = follower.finish(ranges, idle_timeout_s=10)
    ids = followed.to_pylist()

    expected, expected_scanned = read_back(kafka_bootstrap, ranges)
    assert (Counter(ids), scanned) == (expected, expected_scanned)
    assert scanned == 300 + 50 + 1 + 1 and len(ids) == 301 and Counter(ids)["e-7"] == 2
    assert "e-late" not in ids and "e-0" not in ids


def test_a_follower_short_of_the_end_offsets_times_out_naming_them_while_others_write(
    kafka_bootstrap: str,
) -> None:
    """End offsets past what a partition holds (records that never come) fail the follow after the
    idle timeout, even while another producer keeps writing to another partition; the reconcile then
    reads the ranges instead (`spark_job.job._followed`)."""
    topic = unique_topic("follow-short")
    create_topic(kafka_bootstrap, topic, partitions=2)
    kafka = {"bootstrap.servers": kafka_bootstrap}
    follower = TopicFollower(kafka, topic, {0: 0, 1: 0}, RUN).start()
    produce(kafka_bootstrap, topic, [(0, RUN, "e-1")])
    writing = threading.Event()
    writing.set()

    def other_producer() -> None:
        while writing.is_set():
            produce(kafka_bootstrap, topic, [(1, "r-other", "o")])
            time.sleep(0.05)

    traffic = threading.Thread(target=other_producer, daemon=True)
    traffic.start()
    began = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"short of the run's end offsets .*\{0: \(1, 5\)\}"):
            follower.finish(OffsetRanges(topic, {0: (0, 5), 1: (0, 0)}), idle_timeout_s=1)
    finally:
        writing.clear()
        traffic.join(timeout=10)
    assert time.monotonic() - began < 10


def test_a_follower_closed_before_the_end_refuses_to_answer(kafka_bootstrap: str) -> None:
    """What it read until then is not the run's whole range: no partial answer, ever."""
    topic = unique_topic("follow-closed")
    create_topic(kafka_bootstrap, topic, partitions=1)
    follower = TopicFollower({"bootstrap.servers": kafka_bootstrap}, topic, {0: 0}, RUN).start()
    produce(kafka_bootstrap, topic, [(0, RUN, "e-1")])
    follower.close()

    with pytest.raises(RuntimeError, match="closed before the run's end"):
        follower.finish(OffsetRanges(topic, {0: (0, 1)}), idle_timeout_s=1)


def test_a_follower_asked_for_a_partition_it_did_not_follow_refuses(kafka_bootstrap: str) -> None:
    topic = unique_topic("follow-other")
    create_topic(kafka_bootstrap, topic, partitions=2)
    follower = TopicFollower({"bootstrap.servers": kafka_bootstrap}, topic, {0: 0}, RUN).start()

    with pytest.raises(ValueError, match=r"did not follow .* \[1\]"):
        follower.finish(OffsetRanges(topic, {0: (0, 0), 1: (0, 0)}), idle_timeout_s=1)
    follower.close()

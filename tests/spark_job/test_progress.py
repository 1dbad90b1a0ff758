"""Progress beacons: retries never inflate the total, and outsiders can read it from the topic."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from confluent_kafka import Producer
from hypothesis import given
from hypothesis import strategies as st

from spark_job.progress import Beacon, ProgressReader, aggregate, duplicates_possible, latest_per_attempt
from tests.fixtures.kafka import create_topic, unique_topic


@st.composite
def partition_histories(draw: st.DrawFn) -> tuple[list[Beacon], dict[int, int]]:
    """Beacons of several partitions, each retried a few times; returns them with each partition's size."""
    beacons: list[Beacon] = []
    sizes: dict[int, int] = {}
    task_id = 0
    for partition in range(draw(st.integers(1, 6))):
        size = draw(st.integers(0, 1_000))
        sizes[partition] = size
        attempts = draw(st.integers(1, 3))
        for attempt in range(attempts):
            task_id += draw(st.integers(1, 5))
            last = attempt == attempts - 1
            reached = size if last else draw(st.integers(0, size))
            counts = sorted([*draw(st.lists(st.integers(0, reached), max_size=4)), reached])
            for count in counts:
                done = last and count == reached
                beacons.append(
                    Beacon("r-1", partition, attempt, count, done=done, failed=not last, task_id=task_id)
                )
    return beacons, sizes


@given(partition_histories(), st.randoms())
def test_aggregate_is_the_final_attempts_count_in_any_order(
    history: tuple[list[Beacon], dict[int, int]], shuffler: random.Random
) -> None:
    beacons, sizes = history
    shuffler.shuffle(beacons)
    assert aggregate(beacons) == sum(sizes.values())


@given(partition_histories(), st.data())
def test_a_running_retry_never_counts_more_than_its_partition(
    history: tuple[list[Beacon], dict[int, int]], data: st.DataObject
) -> None:
    beacons, sizes = history
    seen = data.draw(st.integers(0, len(beacons)))  # any prefix: what a reader saw mid-run
    assert aggregate(beacons[:seen]) <= sum(sizes.values())


@given(partition_histories())
def test_duplicates_are_what_failed_attempts_confirmed(history: tuple[list[Beacon], dict[int, int]]) -> None:
    beacons, _ = history
    expected: dict[tuple[int, int], int] = {}
    for beacon in beacons:
        if beacon.failed:
            expected[beacon.attempt_id] = max(expected.get(beacon.attempt_id, 0), beacon.confirmed)
    succeeded = {beacon.attempt_id for beacon in beacons if beacon.done}
    assert duplicates_possible(beacons, succeeded) == sum(expected.values())
    assert duplicates_possible(beacons) == sum(expected.values())


def test_a_retry_replaces_the_failed_attempts_count() -> None:
    beacons = [
        Beacon("r-1", 0, 0, 500, failed=True, task_id=3),
        Beacon("r-1", 0, 1, 120, task_id=9),
        Beacon("r-1", 1, 0, 300, done=True, task_id=4),
    ]
    assert aggregate(beacons) == 420
    assert duplicates_possible(beacons) == 500


@st.composite
def committed_chains(draw: st.DrawFn) -> tuple[list[Beacon], dict[int, int], int]:
    """Per partition, attempts that committed some rows and were lost, then one that resumed after
    them all and finished; returns the beacons, the sizes, and what the lost attempts had committed."""
    beacons: list[Beacon] = []
    sizes: dict[int, int] = {}
    lost_total, task_id = 0, 0
    for partition in range(draw(st.integers(1, 5))):
        size = sizes[partition] = draw(st.integers(0, 1_000))
        committed = 0
        for attempt in range(draw(st.integers(0, 3))):
            task_id += 1
            own = draw(st.integers(0, size - committed))
            beacons.append(Beacon("r-1", partition, attempt, own, task_id=task_id, resumed=committed))
            committed += own
        lost_total += committed
        task_id += 1
        final = Beacon("r-1", partition, 9, size - committed, done=True, task_id=task_id, resumed=committed)
        beacons.append(final)
    return beacons, sizes, lost_total


@given(committed_chains(), st.randoms())
def test_a_transactional_retry_resuming_after_its_predecessors_commits_duplicates_nothing(
    chain: tuple[list[Beacon], dict[int, int], int], shuffler: random.Random
) -> None:
    """Each retry resumed after what the attempts before it committed: the total counts every row
    once and nothing is a possible duplicate; had each retry sent its partition again (idempotent),
    everything the lost attempts had confirmed would be."""
    beacons, sizes, lost_total = chain
    shuffler.shuffle(beacons)
    succeeded = {beacon.attempt_id for beacon in beacons if beacon.done}
    assert aggregate(beacons) == sum(sizes.values())
    assert duplicates_possible(beacons, succeeded) == duplicates_possible(beacons) == 0
    resent = [
        replace(b, confirmed=sizes[b.partition], resumed=0) if b.done else replace(b, resumed=0)
        for b in beacons
    ]
    assert aggregate(resent) == sum(sizes.values())
    assert duplicates_possible(resent, succeeded) == lost_total


def test_a_transactional_retry_counts_what_it_resumed_after_and_no_duplicates() -> None:
    beacons = [
        Beacon("r-1", 0, 0, 300, task_id=3),  # committed 300, then its executor died (no failed beacon)
        Beacon("r-1", 0, 1, 200, done=True, task_id=9, resumed=300),
        Beacon("r-1", 1, 0, 400, done=True, task_id=4),
    ]
    assert aggregate(beacons) == 900
    assert duplicates_possible(beacons, {(0, 9), (1, 4)}) == 0
    assert duplicates_possible(beacons) == 0
    # an idempotent retry of the same partition sends it all again: those 300 are duplicates
    idempotent = [replace(beacons[0]), Beacon("r-1", 0, 1, 500, done=True, task_id=9), beacons[2]]
    assert aggregate(idempotent) == 900
    assert duplicates_possible(idempotent, {(0, 9), (1, 4)}) == 300


def test_beacons_round_trip_as_json() -> None:
    beacon = Beacon("r-7", 3, 1, 42, done=True, task_id=17, at=1_717_000_000.125)
    assert Beacon.decode(beacon.encode()) == beacon


def test_a_beacon_from_before_the_emit_time_reads_without_one() -> None:
    old = b'{"run_id":"r-7","partition":3,"attempt":1,"confirmed":42,"done":true,"failed":false,"task_id":17}'
    assert Beacon.decode(old) == Beacon("r-7", 3, 1, 42, done=True, task_id=17, at=None)


def _produce(bootstrap: str, topic: str, beacons: list[Beacon]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for beacon in beacons:
        producer.produce(topic, beacon.encode(), beacon.run_id)
    assert producer.flush(30) == 0


@pytest.mark.kafka
def test_reader_follows_one_run_among_others(kafka_bootstrap: str) -> None:
    topic = unique_topic("progress")
    create_topic(kafka_bootstrap, topic, partitions=3)
    _produce(
        kafka_bootstrap,
        topic,
        [
            Beacon("r-1", 0, 0, 10, task_id=1, at=100.0),
            Beacon("r-2", 0, 0, 999, task_id=1, at=500.0),
            Beacon("r-1", 1, 0, 5, task_id=2),
        ],
    )
    with ProgressReader(kafka={"bootstrap.servers": kafka_bootstrap}, topic=topic, run_id="r-1") as reader:
        first = reader.read()
        _produce(kafka_bootstrap, topic, [Beacon("r-1", 0, 0, 40, done=True, task_id=1, at=105.5)])
        second = reader.read()
    assert (first.confirmed, first.partitions_done, first.at) == (15, 0, 100.0)  # its own run's clock only
    assert (second.confirmed, second.partitions_done, second.at) == (45, 1, 105.5)


@pytest.mark.kafka
def test_reader_sees_nothing_before_the_progress_topic_exists(kafka_bootstrap: str) -> None:
    with ProgressReader(
        kafka={"bootstrap.servers": kafka_bootstrap}, topic=unique_topic("absent"), run_id="r-1"
    ) as reader:
        assert reader.read(timeout_s=5).confirmed == 0


@pytest.mark.kafka
def test_a_reader_keeps_each_attempts_furthest_beacon_and_answers_as_if_it_kept_them_all(
    kafka_bootstrap: str,
) -> None:
    """A run of days sends a beacon per attempt and second: the reader must not hold them all."""
    topic = unique_topic("progress-kept")
    create_topic(kafka_bootstrap, topic, partitions=3)
    sent = [
        *(Beacon("r-1", 0, 0, n, failed=n == 30, task_id=1, at=100.0 + n) for n in range(0, 31, 3)),
        *(Beacon("r-1", 0, 1, n, done=n == 50, task_id=4, at=140.0 + n) for n in range(0, 51, 5)),
        *(Beacon("r-1", 1, 0, n, task_id=2, at=None if n == 20 else 90.0 + n) for n in range(0, 21, 2)),
        Beacon("r-1", 1, 0, 20, task_id=2, at=300.0),  # the same count again, later: its time counts
    ]
    _produce(kafka_bootstrap, topic, sent)
    with ProgressReader(kafka={"bootstrap.servers": kafka_bootstrap}, topic=topic, run_id="r-1") as reader:
        snapshot = reader.read()
        kept = reader.beacons()

    assert sorted(kept, key=lambda b: b.attempt_id) == sorted(
        latest_per_attempt(sent).values(), key=lambda b: b.attempt_id
    )
    assert len(kept) == 3
    assert (snapshot.confirmed, snapshot.partitions_done, snapshot.beacons, snapshot.at) == (
        aggregate(sent),
        1,
        len(sent),
        300.0,
    )
    assert duplicates_possible(kept) == duplicates_possible(sent) == 30

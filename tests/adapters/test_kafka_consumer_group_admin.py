"""Consumer-group lag on the real broker: the figures match Kafka's own `kafka-consumer-groups --describe`,
members and the drain come from a live consumer, and an unknown group or topic is a clear error."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from daemon.adapters.kafka_consumer_group_admin import KafkaConsumerGroupAdmin
from daemon.core.errors import GroupNotFound, NotFound
from daemon.core.lag import DrainState, GroupState
from daemon.usecases.catalog import Catalog
from daemon.usecases.consumer_groups import ConsumerGroups
from daemon.usecases.ports import Clusters
from store import Store
from store.migrate import upgrade
from tests.fixtures.groups import PARTITIONS, PER_PARTITION, consume_and_commit, produce
from tests.fixtures.kafka import create_topic, kafka_tool, unique_topic

pytestmark = [pytest.mark.kafka]

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def kafka_describe(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(topic, partition) -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) as Kafka's own tool prints them."""
    stdout = kafka_tool(GROUP_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    rows: dict[tuple[str, int], tuple[str, str, str]] = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group:
            rows[(cells[1], int(cells[2]))] = (cells[3], cells[4], cells[5])
    assert rows, stdout
    return rows


@pytest.fixture
def groups(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ConsumerGroups]:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    upgrade(store.engine)
    admin = KafkaConsumerGroupAdmin(config={"bootstrap.servers": kafka_bootstrap})
    yield ConsumerGroups(
        groups=Clusters.one(admin),
        catalog=Catalog(path="-", sources={}),
        store=store,
        admins=[],
        sample_s=0.0,
    )
    store.close()


def test_lag_matches_kafka_consumer_groups_describe_for_a_group_that_is_behind(
    kafka_bootstrap: str, groups: ConsumerGroups
) -> None:
    topic, group = unique_topic("lag"), unique_topic("svc")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, PER_PARTITION)
    consume_and_commit(kafka_bootstrap, topic, group, {0: 10, 1: 33, 2: 0})

    found = groups.lag(group, topic)
    reference = kafka_describe(kafka_bootstrap, group)

    ours = {(p.topic, p.partition): p for p in found.report.partitions}
    for key, (current, end, lag) in reference.items():
        assert (str(ours[key].committed), str(ours[key].end), str(ours[key].lag)) == (current, end, lag)
    assert set(reference) == {(topic, 0), (topic, 1)}  # Kafka lists only what the group committed
    assert ours[(topic, 2)].committed is None and ours[(topic, 2)].lag is None  # unknown, not 0
    assert (found.report.total, found.report.unknown) == (30 + 7, 1)
    assert found.report.hottest is not None and found.report.hottest.partition == 0
    assert found.description.state == GroupState.EMPTY and found.description.members == ()


def test_a_consuming_member_is_described_and_its_drain_measured(
    tmp_path: Path, kafka_bootstrap: str, groups: ConsumerGroups
) -> None:
    topic, group = unique_topic("drain"), unique_topic("svc")
    create_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, PER_PARTITION)
    stop, joined = threading.Event(), threading.Event()

    def consume_slowly() -> None:
        """A real member: commits every record it reads, about 60 a second."""
        consumer = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": group,
                "client.id": "slow-service",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                consumer.commit(message=message, asynchronous=False)
                joined.set()
                time.sleep(1 / 60)
        finally:
            consumer.close()

    worker = threading.Thread(target=consume_slowly)
    worker.start()
    try:
        assert joined.wait(30), "the consumer never read a record"
        found = groups.lag(group, topic, sample_s=1.5)
    finally:
        stop.set()
        worker.join(30)

    [member] = found.description.members
    assert member.client_id == "slow-service"
    assert sorted(member.assignment) == [(topic, p) for p in range(PARTITIONS)]
    assert found.description.state == GroupState.STABLE
    drain = found.report.drain
    assert drain is not None and drain.consumed_per_s is not None
    assert 10 < drain.consumed_per_s < 120  # about 60/s, give or take a slow machine
    assert drain.produced_per_s == 0.0
    assert drain.state == DrainState.DRAINING and drain.seconds_to_zero is not None
    assert drain.lag is not None and drain.seconds_to_zero == pytest.approx(drain.lag / drain.consumed_per_s)


def test_an_unknown_group_and_an_unknown_topic_are_clear_errors(
    kafka_bootstrap: str, groups: ConsumerGroups
) -> None:
    with pytest.raises(GroupNotFound, match=r"no consumer group 'nobody-.*' on the cluster"):
        groups.lag(unique_topic("nobody"))

    topic, group = unique_topic("lag"), unique_topic("svc")
    create_topic(kafka_bootstrap, topic, partitions=1)
    produce_one = Producer({"bootstrap.servers": kafka_bootstrap})
    produce_one.produce(topic, value=b"x", partition=0)
    produce_one.flush(10)
    consume_and_commit(kafka_bootstrap, topic, group, {0: 1})
    with pytest.raises(NotFound, match="no topic 'missing-"):
        groups.lag(group, unique_topic("missing"))

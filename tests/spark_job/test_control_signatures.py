"""A task follows only the control messages signed with its run's key, read from the real broker.

Anyone who may write to the control topic could otherwise pause or speed up any run. Messages
keyed for the run are written unsigned, signed under another run's key and with a signature that
does not match their value; then one properly signed. The job's own ``ControlFeed`` follows the
last only; a spec without a key follows nothing at all.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from daemon.adapters.kafka_run_control import KafkaRunControlChannel
from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.core.ids import new_control_key
from daemon.core.run_control import RateChange as CoreRateChange
from spark_job.control import SIGNATURE_HEADER, ControlFeed, ControlMessage, signature
from spark_job.spec.model import Control, RateChange
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka]

RUN_ID = "r-5191ed0c0417"


@pytest.fixture
def control_topic(kafka_bootstrap: str) -> str:
    topic = unique_topic("replay-control")
    create_topic(kafka_bootstrap, topic, partitions=1)
    return topic


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[Producer]:
    made = Producer({"bootstrap.servers": kafka_bootstrap})
    yield made
    made.flush(10)


def send(
    producer: Producer, topic: str, tps: int, headers: list[tuple[str, str | bytes | None]] | None
) -> None:
    value = ControlMessage(RUN_ID, version=1, changes=(RateChange(at=time.time(), tps=tps),)).encode()
    producer.produce(topic, value, RUN_ID.encode(), partition=0, headers=headers or [])
    assert producer.flush(10) == 0


def followed(bootstrap: str, control: Control, *, settle_s: float = 5.0) -> list[int]:
    """The rates the feed followed (the last change of each list it returned), read for ``settle_s``."""
    rates: list[int] = []
    with ControlFeed(kafka={"bootstrap.servers": bootstrap}, control=control, run_id=RUN_ID) as feed:
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            changes = feed.poll(force=True)
            if changes is not None:
                rates.append(changes[-1].tps)
            time.sleep(0.05)
    return rates


def test_unsigned_and_forged_messages_are_ignored_and_a_signed_one_is_followed(
    kafka_bootstrap: str, control_topic: str, producer: Producer
) -> None:
    key, other = new_control_key(), new_control_key()
    send(producer, control_topic, 1, None)  # unsigned
    value = ControlMessage(RUN_ID, version=1, changes=(RateChange(at=time.time(), tps=2),)).encode()
    send(producer, control_topic, 2, [(SIGNATURE_HEADER, signature(other, value).encode())])
    send(producer, control_topic, 3, [(SIGNATURE_HEADER, signature(key, b"another value").encode())])
    channel = KafkaRunControlChannel(
        config={"bootstrap.servers": kafka_bootstrap},
        topic=control_topic,
        topics=KafkaTopicAdmin(config={"bootstrap.servers": kafka_bootstrap}),
        retention_ms=3_600_000,
    )
    try:  # the daemon's own adapter signs what it sends
        channel.publish(RUN_ID, [CoreRateChange(at=time.time(), tps=4)], key=key)
    finally:
        channel.close()

    assert followed(kafka_bootstrap, Control(control_topic, 0, key=key)) == [4]


def test_a_spec_without_a_key_follows_nothing(
    kafka_bootstrap: str, control_topic: str, producer: Producer
) -> None:
    key = secrets.token_hex(32)
    value = ControlMessage(RUN_ID, version=1, changes=(RateChange(at=time.time(), tps=5),)).encode()
    producer.produce(
        control_topic,
        value,
        RUN_ID.encode(),
        partition=0,
        headers=[(SIGNATURE_HEADER, signature(key, value))],
    )
    assert producer.flush(10) == 0
    send(producer, control_topic, 6, None)

    assert followed(kafka_bootstrap, Control(control_topic, 0), settle_s=3.0) == []

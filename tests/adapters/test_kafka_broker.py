"""The local Kafka broker behaves like the production clusters the replays target."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    Message,
    Producer,
)
from confluent_kafka.admin import AdminClient

from tests.fixtures.kafka import (
    LocalBroker,
    consume_all,
    create_topic,
    delete_topic,
    key_of,
    topic_record_count,
    unique_topic,
    value_of,
)

pytestmark = pytest.mark.kafka

Delivery = tuple[KafkaError | None, Message]


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any) -> list[Delivery]:
    """Produce with the settings replays use (acks=all, idempotence) and return every delivery report."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **config}
    )
    reports: list[Delivery] = []
    for record in records:
        producer.produce(topic, **record, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(60) == 0, "messages still queued after 60s"
    return reports


def as_tuples(messages: list[Message]) -> list[tuple[bytes | None, bytes | None, Any]]:
    return [(message.key(), message.value(), message.headers()) for message in messages]


def test_round_trip_keeps_keys_values_and_headers_exactly(kafka_bootstrap: str) -> None:
    topic = unique_topic("round-trip")
    create_topic(kafka_bootstrap, topic)
    records: list[dict[str, Any]] = [
        {"key": b"k-0", "value": b"plain", "headers": [("trace-id", b"abc123")]},
        {
            "key": "ключ".encode(),
            "value": "значение ☃".encode(),
            "headers": [("dup", b"1"), ("dup", b"2"), ("empty", b""), ("null", None)],
        },
        {"key": None, "value": b"\x00\x01binary\xff"},
        {"key": b"tombstone", "value": None},
        {"key": b"large", "value": os.urandom(512 * 1024)},  # under the default message.max.bytes
    ]

    reports = produce(kafka_bootstrap, topic, records)

    assert [err for err, _ in reports] == [None] * len(records)
    messages = consume_all(kafka_bootstrap, topic, expected=len(records))
    assert as_tuples(messages) == [(r.get("key"), r.get("value"), r.get("headers")) for r in records]
    assert [message.offset() for message in messages] == list(range(len(records)))  # no duplicates
    assert topic_record_count(kafka_bootstrap, topic) == len(records)


def test_keyed_records_keep_per_key_order_across_partitions(kafka_bootstrap: str) -> None:
    topic = unique_topic("keyed")
    create_topic(kafka_bootstrap, topic, partitions=3)
    records = [{"key": f"key-{i % 7}".encode(), "value": f"{i}".encode()} for i in range(210)]

    produce(kafka_bootstrap, topic, records)
    messages = consume_all(kafka_bootstrap, topic)  # up to the end offsets, no count given

    assert len(messages) == topic_record_count(kafka_bootstrap, topic) == len(records)
    by_key: dict[bytes, list[int]] = {}
    partitions_of_key: dict[bytes, set[int | None]] = {}
    for message in messages:
        by_key.setdefault(key_of(message), []).append(int(value_of(message)))
        partitions_of_key.setdefault(key_of(message), set()).add(message.partition())
    assert all(values == sorted(values) for values in by_key.values())
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())
    assert {message.partition() for message in messages} != {0}  # really spread over partitions
    delete_topic(kafka_bootstrap, topic)


def test_producing_to_a_missing_topic_fails_instead_of_creating_it(kafka_bootstrap: str) -> None:
    topic = unique_topic("never-created")

    reports = produce(
        kafka_bootstrap, topic, [{"value": b"lost"}], **{"topic.metadata.propagation.max.ms": 2000}
    )

    [(error, _)] = reports
    assert error is not None
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics


def test_log_append_time_topic_gets_broker_timestamps(kafka_bootstrap: str) -> None:
    broker_time_topic = unique_topic("log-append-time")
    create_topic(kafka_bootstrap, broker_time_topic, config={"message.timestamp.type": "LogAppendTime"})
    create_time_topic = unique_topic("create-time")
    create_topic(kafka_bootstrap, create_time_topic)
    client_timestamp_ms = 1_000_000_000_000  # 2001-09-09, far from "now"

    before_ms = int(time.time() * 1000)
    [(error, delivered)] = produce(
        kafka_bootstrap, broker_time_topic, [{"value": b"v", "timestamp": client_timestamp_ms}]
    )
    after_ms = int(time.time() * 1000)
    produce(kafka_bootstrap, create_time_topic, [{"value": b"v", "timestamp": client_timestamp_ms}])

    assert error is None
    [message] = consume_all(kafka_bootstrap, broker_time_topic, expected=1)
    kind, timestamp_ms = message.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before_ms - 1000 <= timestamp_ms <= after_ms + 1000
    assert delivered.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, timestamp_ms)
    [control] = consume_all(kafka_bootstrap, create_time_topic, expected=1)
    assert control.timestamp() == (TIMESTAMP_CREATE_TIME, client_timestamp_ms)


def test_restart_keeps_port_and_data(kafka_bootstrap: str, broker_control: LocalBroker) -> None:
    topic = unique_topic("restart")
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, [{"value": b"before-1"}, {"value": b"before-2"}])

    with broker_control.stopped():
        assert not broker_control.is_running()

    assert broker_control.is_running()
    produce(kafka_bootstrap, topic, [{"value": b"after"}])
    values = [message.value() for message in consume_all(kafka_bootstrap, topic, expected=3)]
    assert values == [b"before-1", b"before-2", b"after"]

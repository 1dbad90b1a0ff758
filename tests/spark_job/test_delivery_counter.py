"""The task's count of what the broker confirmed, with the producer reporting failures only.

Against the real broker: the count equals the records on the topic once flushed, never leads the
broker's acknowledgements while records are in flight (a beacon sharing the producer included),
and a record the broker refused is set aside, not counted, with the event id its own report bound.
"""

from __future__ import annotations

import os
from functools import partial

import pytest
from confluent_kafka import Producer

from spark_job.kafka_conf import producer_config
from spark_job.publish.dead_letters import DeadLetterPlan, DeadLetters
from spark_job.publish.publisher import FAILURE_REPORTS_ONLY, DeliveryCounter
from tests.fixtures.kafka import create_topic, delete_topic, topic_record_count, unique_topic

pytestmark = pytest.mark.kafka


def _counted_producer(bootstrap: str, counter: DeliveryCounter) -> Producer:
    config = {**producer_config({"bootstrap.servers": bootstrap}), **FAILURE_REPORTS_ONLY}
    return counter.attach(Producer({**config, "on_delivery": counter}))


def test_the_count_is_what_landed_and_never_leads_the_broker(kafka_bootstrap: str) -> None:
    topic, beacons = unique_topic("counted"), unique_topic("beacons")
    create_topic(kafka_bootstrap, topic, partitions=4)
    create_topic(kafka_bootstrap, beacons)
    counter = DeliveryCounter(topic)
    producer = _counted_producer(kafka_bootstrap, counter)
    try:
        seen = []
        for _ in range(20):
            for n in range(500):
                producer.produce(
                    topic, b"v" * 100, f"k{n}".encode(), on_delivery=partial(counter.report, f"e{n}")
                )
            counter.accepted += 500
            producer.produce(beacons, b"beacon", on_delivery=lambda error, message: None)  # outstanding too
            counter.poll(0)
            seen.append(counter.confirmed)
            assert counter.confirmed <= topic_record_count(kafka_bootstrap, topic)  # acknowledged: on the log
        while counter.flush(1.0) > 0:
            pass

        landed = topic_record_count(kafka_bootstrap, topic)
        assert counter.confirmed == landed == 10_000
        assert seen == sorted(seen)  # it only grows
        assert sum(counter.per_second.values()) == 10_000  # every confirmation is in some second
        assert counter.first_at is not None and counter.last_at is not None
        assert counter.first_at <= counter.last_at
        assert (counter.failed, counter.set_aside, counter.first_error) == (0, 0, None)
    finally:
        delete_topic(kafka_bootstrap, topic)
        delete_topic(kafka_bootstrap, beacons)


def test_a_record_the_broker_refuses_is_set_aside_by_its_event_id_and_not_counted(
    kafka_bootstrap: str,
) -> None:
    topic = unique_topic("refusing")
    create_topic(kafka_bootstrap, topic, config={"max.message.bytes": "2000"})
    dead_letters = DeadLetters(DeadLetterPlan(on_error="fail"), target=topic, headers=[])
    counter = DeliveryCounter(topic, dead_letters)
    producer = _counted_producer(kafka_bootstrap, counter)
    try:
        # one at a time, each in its own batch: the broker refuses a whole batch that is too large
        # (random bytes: compression cannot shrink the large one under the topic's limit)
        for event_id, value in (
            ("small-1", b"s" * 10),
            ("large", os.urandom(50_000)),
            ("small-2", b"s" * 10),
        ):
            producer.produce(topic, value, b"k", on_delivery=partial(counter.report, event_id))
            counter.accepted += 1
            while counter.flush(1.0) > 0:
                pass

        assert (counter.confirmed, counter.set_aside, counter.failed) == (2, 1, 0)
        assert topic_record_count(kafka_bootstrap, topic) == 2
        assert dead_letters.first_bad is not None and dead_letters.first_bad.event_id == "large"
        assert "MSG_SIZE_TOO_LARGE" in dead_letters.first_bad.reason
    finally:
        delete_topic(kafka_bootstrap, topic)

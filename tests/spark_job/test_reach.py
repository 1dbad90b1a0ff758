"""A failing task stops waiting on its flushes once no broker is reachable, and only then."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, Producer

from spark_job.publish.reach import BrokerReach, flush_while_reachable


def test_an_outage_counts_until_a_confirmation_proves_a_broker_is_back() -> None:
    reach = BrokerReach()
    assert not reach.unreachable(None)

    reach(KafkaError(KafkaError._TRANSPORT))  # one connection lost: not every broker
    assert not reach.unreachable(None)

    reach(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert reach.down_at is not None
    assert reach.unreachable(None)
    assert reach.unreachable(reach.down_at - 1.0)  # confirmed before the outage: proves nothing
    assert not reach.unreachable(reach.down_at + 1.0)


def test_a_flush_to_a_cluster_nobody_answers_ends_well_before_its_timeout() -> None:
    reach = BrokerReach()
    # Port 9 (discard) has no listener here: every connection is refused at once.
    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "error_cb": reach, "message.timeout.ms": 60_000})
    producer.produce("replay.unreachable", b"a record no broker will confirm")

    started = time.monotonic()
    flush_while_reachable(producer, 20.0, reach, last_confirmed_at=lambda: None)
    waited = time.monotonic() - started

    assert reach.unreachable(None)
    assert waited < 10.0, waited  # librdkafka reports every broker down within a second or two
    assert len(producer) == 1  # cut short: the record is still waiting, not confirmed

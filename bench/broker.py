"""The broker side of the benches: a throwaway broker, topics, and reading back what a run wrote.

Every figure the benches print comes from what the broker stamped (``LogAppendTime``) and holds, not
from a client's clock, so producers with different clocks and buffering compare like with like.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

REPO = Path(__file__).resolve().parents[1]

Header = tuple[str, bytes]


@dataclass(frozen=True)
class Record:
    """One record's bytes exactly as the broker holds them."""

    key: bytes | None
    value: bytes | None
    headers: list[Header]


@dataclass
class ReadBack:
    """Broker timestamps (ms) of every record, and their bytes when asked for."""

    stamps: list[int] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    """The given broker, or a throwaway one from scripts/local-kafka."""
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as state:
        script = str(REPO / "scripts" / "local-kafka")
        started = subprocess.run(
            [script, "start", "--state-dir", state], capture_output=True, text=True, check=True
        )
        line = [text for text in started.stdout.splitlines() if text.startswith("bootstrap=")][-1]
        try:
            bootstrap = line.removeprefix("bootstrap=").strip()
            warm_up(bootstrap)
            yield bootstrap
        finally:
            subprocess.run([script, "stop", "--state-dir", state], capture_output=True, check=False)


WARM_UP_RECORDS = 3_000_000


def warm_up(bootstrap: str, records: int = WARM_UP_RECORDS) -> None:
    """Send a fresh broker a few million records first: its first two million or so are taken
    slower (docs/benchmarks.md, *A fresh broker's first runs*), which no broker in service is."""
    began = time.monotonic()
    name = create_topic(bootstrap, "bench-warm-up", 8, {})
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": True})
        value = b"x" * 200
        headers: list[tuple[str, str | bytes | None]] = [("replay-event-id", b"warm-up")]
        for index in range(records):
            produce_waiting(producer, name, value, str(index % 10_000).encode(), headers)
            if index % 10_000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0, "the warm-up records were not all delivered"
    finally:
        delete_topic(bootstrap, name)
    print(f"broker warm-up: {records:,} records in {time.monotonic() - began:.1f} s", flush=True)


def produce_waiting(
    producer: Producer, name: str, value: bytes, key: bytes, headers: list[tuple[str, str | bytes | None]]
) -> None:
    """``produce``, waiting for room while the producer's local queue is full."""
    while True:
        try:
            producer.produce(name, value, key, headers=headers)
            return
        except BufferError:
            producer.poll(0.05)


def create_topic(bootstrap: str, prefix: str, partitions: int, config: dict[str, str]) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
    return name


def delete_topic(bootstrap: str, name: str) -> None:
    with contextlib.suppress(Exception):  # already gone, or the broker is stopping: nothing to clean
        AdminClient({"bootstrap.servers": bootstrap}).delete_topics([name])[name].result(30)


@contextlib.contextmanager
def topic(bootstrap: str, prefix: str, partitions: int, config: dict[str, str]) -> Iterator[str]:
    """A fresh topic, deleted afterwards."""
    name = create_topic(bootstrap, prefix, partitions, config)
    try:
        yield name
    finally:
        delete_topic(bootstrap, name)


def partition_count(bootstrap: str, name: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(name, timeout=10).topics[name].partitions)


def timestamp_type(bootstrap: str, name: str) -> str:
    """The topic's ``message.timestamp.type``: LogAppendTime means the stamps are the broker's clock."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(30)
    return str(configs["message.timestamp.type"].value)


def _headers(
    raw: dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None,
) -> list[Header]:
    """A consumed record's headers as (name, bytes); the client hands a list of pairs back."""
    pairs = list(raw.items()) if isinstance(raw, dict) else raw or []
    return [(name, value.encode() if isinstance(value, str) else value or b"") for name, value in pairs]


def read_back(bootstrap: str, name: str, *, with_bytes: bool = False, timeout_s: float = 300.0) -> ReadBack:
    """Every record up to each partition's high watermark: its broker timestamp, and its bytes (read
    committed, as librdkafka does by default: an aborted transaction's records are not counted)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    found = ReadBack()
    try:
        partitions = consumer.list_topics(name, timeout=10).topics[name].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(name, p, 0) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is not None:
                    continue
                found.stamps.append(message.timestamp()[1])
                if with_bytes:
                    headers = _headers(message.headers())
                    found.records.append(Record(message.key(), message.value(), headers))
                partition, offset = message.partition(), message.offset()
                if partition is not None and offset is not None and offset + 1 >= ends[partition]:
                    pending.discard(partition)
            # a transaction's marker takes the last offset: the position steps over it, no record does
            for tp in consumer.position([TopicPartition(name, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
    finally:
        consumer.close()
    if pending:
        raise SystemExit(
            f"read back {len(found.stamps)} records of {name}; partitions {sorted(pending)} unread"
        )
    return found

"""librdkafka settings: the producer the data path requires, and the subset other clients share.

The spec's ``kafka`` dict carries connection and security settings (and may tune the producer);
Rule 3 of docs/rules.md is not negotiable, so idempotence and ``acks=all`` are forced on top. The defaults
batch generously (linger, lz4), which is what lets a Python task keep up at high TPS, and bound how
long a record may wait for the broker so an outage fails the task instead of hanging it. The
partitioner is the spec's own field (default ``murmur2_random``, the Java client's hashing), never
librdkafka's default CRC32 one, so a key lands where the source's live producers put it.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_job.spec.model import DEFAULT_PARTITIONER, KafkaValue, Partitioner

PRODUCER_DEFAULTS: dict[str, KafkaValue] = {
    "linger.ms": 10,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "compression.type": "lz4",
    "message.timeout.ms": 120_000,
}
# Unthrottled, nothing waits on a deadline: let batches fill (fewer, larger requests per broker);
# 200 ms sent a sixth more a second than 50 ms here (ADR 0055).
UNTHROTTLED_DEFAULTS: dict[str, KafkaValue] = {"linger.ms": 200}
PRODUCER_REQUIRED: dict[str, KafkaValue] = {"enable.idempotence": True, "acks": "all"}

_TIMEOUT_ALIASES = ("message.timeout.ms", "delivery.timeout.ms")
_PRODUCER_ONLY = frozenset(
    {
        "acks",
        "request.required.acks",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "linger.ms",
        "queue.buffering.max.ms",
        "batch.num.messages",
        "batch.size",
        "compression.type",
        "compression.codec",
        "compression.level",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "request.timeout.ms",
        "retries",
        "message.send.max.retries",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "partitioner",
        "sticky.partitioning.linger.ms",
        "transactional.id",
        "transaction.timeout.ms",
    }
)


def producer_config(
    kafka: Mapping[str, KafkaValue],
    *,
    partitioner: Partitioner = DEFAULT_PARTITIONER,
    unthrottled: bool = False,
) -> dict[str, KafkaValue]:
    """Defaults (``unthrottled``: larger batches), then the spec's settings, then the partitioner and
    what the data path requires."""
    defaults = {**PRODUCER_DEFAULTS, **(UNTHROTTLED_DEFAULTS if unthrottled else {})}
    if any(alias in kafka for alias in _TIMEOUT_ALIASES):
        del defaults["message.timeout.ms"]
    return {**defaults, **kafka, "partitioner": partitioner, **PRODUCER_REQUIRED}


def client_config(kafka: Mapping[str, KafkaValue]) -> dict[str, KafkaValue]:
    """Connection and security settings for admin clients and consumers (producer tuning dropped)."""
    return {key: value for key, value in kafka.items() if key not in _PRODUCER_ONLY}


# A consumer reading a run's records in bulk (the reconcile's reads, the follower). librdkafka's
# default of 1 MiB per partition per fetch held one consumer of a filled two-partition topic to
# 152,000 records/s on a quiet machine, 8 MiB read it at 1.17 M/s (16 MiB no faster), and the
# follower went from 152,000/s to 390,000-428,000/s (bench/bulk_read.py, docs/benchmarks.md). A
# fetch stays within librdkafka's own caps (`fetch.max.bytes`, `queued.max.messages.kbytes`).
BULK_READ: dict[str, KafkaValue] = {"max.partition.fetch.bytes": 8 * 2**20}


def bulk_reader_config(kafka: Mapping[str, KafkaValue]) -> dict[str, KafkaValue]:
    """``client_config`` for a consumer that reads a run's records in bulk; the spec's own setting wins."""
    return {**BULK_READ, **client_config(kafka)}

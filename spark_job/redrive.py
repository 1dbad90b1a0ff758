"""Dead letters sent back (``redrive r-…``): a redrive's records are its subject's dead letters.

The dead-letter topic keeps each set-aside record as it was meant for its target (key and value
bytes, the target's headers) with ``replay-error``, ``replay-event-id`` and ``replay-topic``. A
redrive reads the records the subject (and any earlier redrive of it: a record that failed again
was set aside under that run) set aside for the run's topic, keeps one copy per event id, drops
every ``replay-*`` header (the old provenance and the old error: the redrive's own provenance goes
on instead, with ``replay-redrive-of``), and leaves out the ids an earlier redrive already landed on
the topic. What remains is published like a raw (bronze) table's rows: paced, each confirmation
counted, a record that fails again set aside with its new reason, and reconciled.

Dead letters are few (the records a run could not publish), so they are read here, on the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from confluent_kafka import Message
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType, TimestampType

from spark_job.reconcile import RUN_ID_HEADER, Kafka, read_ids, records, whole_topic
from spark_job.spec.model import (
    DEAD_LETTER_HEADERS,
    DEAD_LETTER_ID,
    DEAD_LETTER_KEY,
    DEAD_LETTER_TIME,
    DEAD_LETTER_VALUE,
    EVENT_ID_HEADER,
    JobSpec,
    OffsetRanges,
)

KEY, VALUE, HEADERS = DEAD_LETTER_KEY, DEAD_LETTER_VALUE, DEAD_LETTER_HEADERS
EVENT_ID, SET_ASIDE_AT = DEAD_LETTER_ID, DEAD_LETTER_TIME
TARGET_HEADER = "replay-topic"
SCHEMA = StructType(
    [
        StructField(KEY, BinaryType()),
        StructField(VALUE, BinaryType()),
        StructField(
            HEADERS,
            ArrayType(StructType([StructField("name", StringType()), StructField("value", BinaryType())])),
        ),
        StructField(EVENT_ID, StringType()),
        StructField(SET_ASIDE_AT, TimestampType()),
    ]
)
READ_TIMEOUT_S = 30.0


def dead_letters(spark: SparkSession, spec: JobSpec) -> DataFrame:
    """The subject's dead letters for the run's topic not yet landed by a redrive, one per event id."""
    redrive = spec.redrive
    assert redrive is not None, "only a redrive reads dead letters"
    wanted = {run.encode() for run in redrive.runs}
    latest: dict[str, tuple[bytes | None, bytes | None, list[tuple[str, bytes]], str, datetime]] = {}
    for message in _records(spec.kafka, whole_topic(spec.kafka, redrive.dlq_topic)):
        headers = [(str(header[0]), _bytes(header[1])) for header in message.headers() or []]
        found = dict(headers)
        if found.get(RUN_ID_HEADER) not in wanted or found.get(TARGET_HEADER) != spec.topic.encode():
            continue
        event_id = found.get(EVENT_ID_HEADER, b"").decode("utf-8", "replace")
        kept = [(name, value) for name, value in headers if not name.startswith("replay-")]
        stamp = datetime.fromtimestamp((message.timestamp()[1] or 0) / 1000, UTC)
        latest[event_id] = (message.key(), message.value(), kept, event_id, stamp)  # a later copy wins
    letters = spark.createDataFrame(list(latest.values()), SCHEMA)
    earlier = redrive.runs[1:]
    if not earlier:
        return letters
    landed = read_ids(spark, spec.kafka, whole_topic(spec.kafka, spec.topic), earlier)
    ids = landed.where(sf.col("scanned").isNull()).select(sf.col("event_id").alias("__landed")).distinct()
    return letters.join(ids, letters[EVENT_ID] == ids["__landed"], "left_anti")


def _records(kafka: Kafka, ranges: OffsetRanges) -> Iterator[Message]:
    """Every record in ``ranges``, partition after partition."""
    for partition, (lo, hi) in sorted(ranges.partitions.items()):
        yield from records(kafka, ranges.topic, partition, lo, hi, READ_TIMEOUT_S)


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""

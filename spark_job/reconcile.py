"""Reconcile a run by event id, in Spark: the ids it selected against the ids its records carry.

docs/rules.md rule 9. The run's records lie within the offset ranges its driver snapshotted (end
offsets before publishing and after every task ended), so only those ranges are read, split into
chunks of at most ``CHUNK_RECORDS`` offsets, one Spark task per chunk. Each task reads its chunk with
``assign()`` from ``lo`` and stops before ``hi``, keeps the records whose ``replay-run-id`` header is
the run's (a live topic holds other producers' records too) and yields their ``replay-event-id``
header. The join with the selected ids, the counts and the sorted lists are Spark's work: no more
than ``IDS_KEPT`` ids of a category ever reach the driver, whatever the run's size (rule 11).
``tally`` is the same arithmetic on plain collections, the reference the tests hold the Spark result
to.

A small run (at most ``DRIVER_MAX_ROWS`` selected rows) is reconciled on the driver instead:
``reconcile_on_driver`` reads the same ranges with one consumer and tallies, which saves the Spark
jobs (about 2 s locally) that dominate a small run's end; both give the same document.

See docs/decisions/0009-reconcile-by-event-id.md for why it works this way.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from spark_job.arrow_map import map_in_arrow
from spark_job.errors import TopicError
from spark_job.kafka_conf import bulk_reader_config
from spark_job.result import IDS_KEPT, SAMPLE_SIZE, Copies, Reconciliation, reason_of
from spark_job.spec.model import EVENT_ID_HEADER, KafkaValue, OffsetRanges, ReconcileTarget

log = logging.getLogger(__name__)

RUN_ID_HEADER = "replay-run-id"
Runs = str | tuple[str, ...]  # one run's id, or a run's and its repairs': their records count as one
# At most this many selected ids are reconciled on the driver (about 100 MB of strings at most);
# above it the comparison is Spark's, so the driver's memory never depends on the window (rule 11).
# Measured (bench/e2e.py, 600,000 rows at 20,000/s): 10 s from the last event to the final state on
# the driver, 31-33 s through Spark's second read of the window, at the same peak RSS.
DRIVER_MAX_ROWS = 1_000_000
CHUNK_RECORDS = 1_000_000  # offsets one read task covers: bounds a task's time, not its memory
IDLE_TIMEOUT_S = 30.0  # a read task that receives nothing this long fails (the broker is gone)
SNAPSHOT_TIMEOUT_S = 15.0
_OUT_BATCH = 10_000  # ids per Arrow batch a read task yields
_CHUNKS = "topic string, partition int, lo long, hi long"
# A read task yields its run's ids (``scanned`` null), then one row with how many records it read.
_READ = "event_id string, scanned long"
_READ_ARROW = pa.schema([("event_id", pa.string()), ("scanned", pa.int64())])
Kafka = Mapping[str, KafkaValue]
Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None  # as a Message has them


# --- offsets (driver) ------------------------------------------------------------------------------


def watermarks(
    kafka: Kafka, topic: str, *, timeout_s: float = SNAPSHOT_TIMEOUT_S
) -> dict[int, tuple[int, int]]:
    """(low, high) offsets of every partition of ``topic``, from the broker; {} when it does not exist."""
    consumer = _consumer(kafka, eof=False)
    try:
        found = consumer.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
        if found is None or (
            found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            return {}
        if found.error is not None:
            raise TopicError(f"cannot read the offsets of topic '{topic}': {found.error.str()}")
        return {
            partition: consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s, cached=False
            )
            for partition in sorted(found.partitions)
        }
    finally:
        consumer.close()


def end_offsets(kafka: Kafka, topic: str, *, timeout_s: float = SNAPSHOT_TIMEOUT_S) -> dict[int, int]:
    """The offset the next record of each partition will get (a snapshot)."""
    return {partition: high for partition, (_, high) in watermarks(kafka, topic, timeout_s=timeout_s).items()}


def run_ranges(topic: str, before: Mapping[int, int], after: Mapping[int, int]) -> OffsetRanges:
    """``[before, after)`` per partition: every record published between the two snapshots."""
    return OffsetRanges(
        topic, {partition: (before.get(partition, 0), hi) for partition, hi in sorted(after.items())}
    )


def whole_topic(kafka: Kafka, topic: str, *, timeout_s: float = SNAPSHOT_TIMEOUT_S) -> OffsetRanges:
    """What the topic holds now: ``[low, high)`` per partition (empty when the topic does not exist)."""
    return OffsetRanges(topic, watermarks(kafka, topic, timeout_s=timeout_s))


def chunks(ranges: OffsetRanges, size: int = CHUNK_RECORDS) -> list[tuple[str, int, int, int]]:
    """``(topic, partition, lo, hi)`` pieces of at most ``size`` offsets covering every range."""
    pieces: list[tuple[str, int, int, int]] = []
    for partition, (lo, hi) in sorted(ranges.partitions.items()):
        pieces += [(ranges.topic, partition, start, min(start + size, hi)) for start in range(lo, hi, size)]
    return pieces


# --- reading (executors) ---------------------------------------------------------------------------


def _consumer(kafka: Kafka, *, eof: bool) -> Consumer:
    return Consumer(
        {
            **bulk_reader_config(kafka),
            "group.id": f"replay-reconcile-{uuid.uuid4().hex}",  # assign() only: never joins or commits
            "enable.auto.commit": False,
            "enable.partition.eof": eof,
            "auto.offset.reset": "earliest",  # retention may have removed the oldest offsets
        }
    )


def read_chunks(
    kafka: dict[str, KafkaValue], runs: Runs, idle_timeout_s: float, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: for each chunk row, the event ids of ``runs``' records in ``[lo, hi)``."""
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in ("topic", "partition", "lo", "hi")]
        for topic, partition, lo, hi in zip(*columns, strict=True):
            yield from _read_range(kafka, encoded_runs(runs), idle_timeout_s, topic, partition, lo, hi)


def records(
    kafka: Kafka, topic: str, partition: int, lo: int, hi: int, idle_timeout_s: float
) -> Iterator[Message]:
    """Every record of ``topic[partition]`` in ``[lo, hi)``, in offset order (fewer when retention
    removed the oldest); TimeoutError when nothing comes for ``idle_timeout_s``."""
    consumer = _consumer(kafka, eof=True)
    try:
        consumer.assign([TopicPartition(topic, partition, lo)])
        idle_until = time.monotonic() + idle_timeout_s
        reading = lo < hi
        while reading:
            messages = consumer.consume(num_messages=1000, timeout=0.5)
            if not messages and time.monotonic() > idle_until:
                raise TimeoutError(
                    f"nothing read from {topic}[{partition}] at {lo}..{hi} in {idle_timeout_s}s"
                )
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        reading = False  # the partition's end: nothing below hi is left
                        break
                    raise KafkaException(error)
                offset = message.offset()
                if offset is None or offset >= hi:
                    reading = False
                    break
                yield message
                reading = offset < hi - 1
            if messages:
                idle_until = time.monotonic() + idle_timeout_s
    finally:
        consumer.close()


def _read_range(
    kafka: Kafka, runs: frozenset[bytes], idle_timeout_s: float, topic: str, partition: int, lo: int, hi: int
) -> Iterator[pa.RecordBatch]:
    ids: list[str] = []
    scanned = 0
    for message in records(kafka, topic, partition, lo, hi, idle_timeout_s):
        scanned += 1
        event_id = event_id_of(message.headers(), runs)
        if event_id is not None:
            ids.append(event_id)
        if len(ids) >= _OUT_BATCH:
            yield _batch(ids, None)
            ids = []
    if ids:
        yield _batch(ids, None)
    yield _batch([None], scanned)


def encoded_runs(runs: Runs) -> frozenset[bytes]:
    return frozenset(run.encode() for run in ((runs,) if isinstance(runs, str) else runs))


def event_id_of(headers: Headers, runs: frozenset[bytes]) -> str | None:
    """The record's event id when its run id header names one of ``runs`` ("" when it has no id),
    else None."""
    ours, event_id = False, b""
    for name, value in headers.items() if isinstance(headers, dict) else headers or ():
        if name == RUN_ID_HEADER:
            ours = _bytes(value) in runs
        elif name == EVENT_ID_HEADER:
            event_id = _bytes(value)
    return event_id.decode("utf-8", "replace") if ours else None


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


def _batch(ids: Sequence[str | None], scanned: int | None) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"event_id": ids, "scanned": [scanned] * len(ids)}, schema=_READ_ARROW)


def read_ids(
    spark: SparkSession,
    kafka: Kafka,
    ranges: OffsetRanges,
    runs: Runs,
    *,
    chunk_records: int = CHUNK_RECORDS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> DataFrame:
    """``(event_id, scanned)``: one row per record of ``runs`` in ``ranges``, one count row per chunk."""
    pieces = chunks(ranges, chunk_records)
    if not pieces:
        return spark.createDataFrame([], _READ)
    # parallelize splits evenly: each chunk is a partition of its own, so one read task per chunk
    chunk_rows = spark.createDataFrame(spark.sparkContext.parallelize(pieces, len(pieces)), _CHUNKS)
    return map_in_arrow(chunk_rows, partial(read_chunks, dict(kafka), runs, idle_timeout_s), _READ)


# --- the comparison ----------------------------------------------------------------------------------


def reconcile(
    spark: SparkSession,
    selected_ids: DataFrame,
    *,
    kafka: Kafka,
    topic: str,
    target: ReconcileTarget,
    chunk_records: int = CHUNK_RECORDS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    timeout_s: float = SNAPSHOT_TIMEOUT_S,
) -> Reconciliation:
    """``selected_ids`` (column ``event_id``) against ``target``'s records on ``topic``; never raises:
    what went wrong (the broker down, say) is the document's ``error``, its counts null."""
    try:
        ranges = target.offsets or whole_topic(kafka, topic, timeout_s=timeout_s)
        read = partial(read_ids, spark, kafka, chunk_records=chunk_records, idle_timeout_s=idle_timeout_s)
        began = time.monotonic()
        found = read(ranges, target.runs).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            read_rows = found.count()  # read once here, kept for the comparison: its time on its own
            read_s = time.monotonic() - began
            dlq = whole_topic(kafka, target.dlq_topic, timeout_s=timeout_s) if target.dlq_topic else None
            result = _compare(selected_ids, found, read(dlq, target.runs) if dlq is not None else None)
            log.info(
                "reconcile read %d rows from %s in %.1f s, compared in %.1f s",
                read_rows,
                topic,
                read_s,
                time.monotonic() - began - read_s,
            )
            return result
        finally:
            found.unpersist()
    except Exception as exc:
        log.warning("reconcile of run %s failed: %s", target.run_id, reason_of(exc))
        return Reconciliation.failed(reason_of(exc))


def _compare(selected_ids: DataFrame, found: DataFrame, dead_letters: DataFrame | None) -> Reconciliation:
    scanned_row = found.agg(sf.sum("scanned")).first()
    scanned = int(scanned_row[0] or 0) if scanned_row is not None else 0
    copies = found.where(sf.col("scanned").isNull()).groupBy("event_id").agg(sf.count("*").alias("copies"))
    selected = (
        selected_ids.select(sf.coalesce(sf.col("event_id").cast("string"), sf.lit("")).alias("event_id"))
        .distinct()
        .withColumn("selected", sf.lit(True))
    )
    joined = selected.join(copies, "event_id", "full_outer").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        is_selected, copies_of = sf.col("selected").isNotNull(), sf.col("copies")
        missing = is_selected & copies_of.isNull()
        unexpected = ~is_selected
        duplicated = is_selected & (copies_of > 1)
        row = joined.agg(
            sf.count(sf.when(is_selected, 1)).alias("selected"),
            sf.coalesce(sf.sum(copies_of), sf.lit(0)).alias("found"),
            sf.count(sf.when(missing, 1)).alias("missing"),
            sf.coalesce(sf.sum(sf.when(unexpected, copies_of)), sf.lit(0)).alias("unexpected"),
            sf.coalesce(sf.sum(sf.when(duplicated, copies_of - 1)), sf.lit(0)).alias("duplicates"),
        ).first()
        assert row is not None, "a global aggregate has one row"
        explained = None
        if dead_letters is not None:
            parked = dead_letters.where(sf.col("scanned").isNull()).select("event_id").distinct()
            explained = joined.where(missing).join(parked, "event_id", "left_semi").count()
        # a clean run (the usual one) has nothing to list: three Spark jobs saved
        lost = _listed(joined, missing) if row["missing"] else ()
        strays = _listed(joined, unexpected) if row["unexpected"] else ()
        copied = _listed(joined, duplicated) if row["duplicates"] else ()
        return Reconciliation(
            selected=row["selected"],
            found=row["found"],
            missing=row["missing"],
            unexpected=row["unexpected"],
            duplicates=row["duplicates"],
            missing_sample=tuple(event_id for event_id, _ in lost[:SAMPLE_SIZE]),
            unexpected_sample=tuple(event_id for event_id, _ in strays[:SAMPLE_SIZE]),
            duplicates_sample=tuple(event_id for event_id, _ in copied[:SAMPLE_SIZE]),
            missing_ids=tuple(event_id for event_id, _ in lost),
            unexpected_ids=strays,
            duplicated_ids=copied,
            missing_dead_lettered=explained,
            scanned_records=scanned,
        )
    finally:
        joined.unpersist()


def _listed(joined: DataFrame, condition: Column) -> Copies:
    """The first ``IDS_KEPT`` ids and their copies (0 for a missing one), sorted (Spark keeps only
    the top ones while it sorts: the driver holds at most that many)."""
    rows = (
        joined.where(condition)
        .select("event_id", sf.coalesce("copies", sf.lit(0)).alias("copies"))
        .orderBy("event_id")
        .limit(IDS_KEPT)
        .collect()
    )
    return tuple((row["event_id"], int(row["copies"])) for row in rows)


def reconcile_on_driver(
    selected_ids: pa.Array | pa.ChunkedArray | DistinctIds | Iterable[str | None],
    *,
    kafka: Kafka,
    topic: str,
    target: ReconcileTarget,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    timeout_s: float = SNAPSHOT_TIMEOUT_S,
    followed: tuple[pa.ChunkedArray, int] | None = None,
) -> Reconciliation:
    """``reconcile`` for a run of at most ``DRIVER_MAX_ROWS``: the same ranges read by one consumer
    here, then ``tally_arrow``. ``followed``: the run's ids and records in those ranges as a
    `TopicFollower` read them while the run published (`spark_job.follower`): nothing is read again.

    A null selected id counts as "", as in Spark; never raises (see ``reconcile``).
    """
    try:
        selected = _strings(selected_ids)
        ranges = target.offsets or whole_topic(kafka, topic, timeout_s=timeout_s)
        if followed is None:
            ids, scanned = _read_on_driver(kafka, ranges, target.runs, idle_timeout_s)
            found: pa.Array | pa.ChunkedArray = pa.array(ids, pa.string())
        else:
            found, scanned = followed
        parked = None
        if target.dlq_topic:
            dlq = whole_topic(kafka, target.dlq_topic, timeout_s=timeout_s)
            parked = pa.array(_read_on_driver(kafka, dlq, target.runs, idle_timeout_s)[0], pa.string())
        began = time.monotonic()
        tallied = tally_arrow(selected, found, parked=parked)
        log.info("reconcile: compared on the driver in %.1f s", time.monotonic() - began)
        return replace(tallied, scanned_records=scanned)
    except Exception as exc:
        log.warning("reconcile of run %s failed: %s", target.run_id, reason_of(exc))
        return Reconciliation.failed(reason_of(exc))


def _whole(ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array (``is_in`` takes its value set as one)."""
    return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids


def _strings(
    ids: pa.Array | pa.ChunkedArray | DistinctIds | Iterable[str | None],
) -> pa.Array | pa.ChunkedArray | DistinctIds:
    if isinstance(ids, DistinctIds):
        return ids
    if isinstance(ids, pa.Array | pa.ChunkedArray):
        return ids.cast(pa.string())
    return pa.array(list(ids), pa.string())


def _read_on_driver(
    kafka: Kafka, ranges: OffsetRanges, runs: Runs, idle_timeout_s: float
) -> tuple[list[str], int]:
    """The ids of ``runs``' records in ``ranges`` (one partition after the other), and how many
    records were read."""
    found: list[str] = []
    scanned = 0
    for partition, (lo, hi) in sorted(ranges.partitions.items()):
        for batch in _read_range(kafka, encoded_runs(runs), idle_timeout_s, ranges.topic, partition, lo, hi):
            ids, counts = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            found += [event_id for event_id, count in zip(ids, counts, strict=True) if count is None]
            scanned += sum(count for count in counts if count is not None)
    return found, scanned


@dataclass(frozen=True, eq=False)
class DistinctIds:
    """Selected ids made unique (nulls as ""), ready for ``tally_arrow``: one of its two hash tables,
    which the driver builds while the follower reads the tail (Arrow hashes without the GIL)."""

    ids: pa.Array


def distinct_ids(selected_ids: pa.Array | pa.ChunkedArray | DistinctIds) -> DistinctIds:
    if isinstance(selected_ids, DistinctIds):
        return selected_ids
    return DistinctIds(_whole(pc.unique(pc.fill_null(selected_ids, ""))))


def tally_arrow(
    selected_ids: pa.Array | pa.ChunkedArray | DistinctIds,
    found_ids: pa.Array | pa.ChunkedArray,
    *,
    parked: pa.Array | None = None,
) -> Reconciliation:
    """``tally`` on Arrow string arrays, for the driver's path: about 50 bytes per id instead of a
    Python string and a set entry each, and vectorised (a null selected id counts as ""). ``parked``:
    the run's dead-lettered ids, which explain that many of the missing ones.

    Two hash tables: the selected ids made unique, then one over those that each found id is looked
    up in (its place among them); the copies of each selected id are a count by place, and only the
    found ids that are not ours are counted by value. (Counting every found id and looking each side
    up in the other built four, about twice the time at a million ids.)
    """
    selected = distinct_ids(selected_ids).ids
    found = pc.fill_null(_whole(found_ids), "")
    places = pc.index_in(found, value_set=selected)
    ours = places.is_valid()
    copies = np.bincount(
        pc.filter(places, ours).to_numpy(zero_copy_only=False), minlength=len(selected)
    ).astype(np.int64)
    missing = pc.filter(selected, pa.array(copies == 0))
    twice = copies > 1
    duplicated_ids = _first(pc.filter(selected, pa.array(twice)), pa.array(copies[twice]))
    strangers = pc.value_counts(pc.filter(found, pc.invert(ours)))
    if len(strangers) == 0:  # value_counts of nothing has no fields to read
        strangers = pa.StructArray.from_arrays(
            [pa.array([], pa.string()), pa.array([], pa.int64())], ["values", "counts"]
        )
    missing_ids = tuple(event_id for event_id, _ in _first(missing, None))
    unexpected_ids = _first(strangers.field("values"), strangers.field("counts"))
    return Reconciliation(
        selected=len(selected),
        found=len(found),
        missing=len(missing),
        unexpected=len(found) - _sum(pc.cast(ours, pa.int64())),
        duplicates=int((copies[twice] - 1).sum()),
        missing_sample=missing_ids[:SAMPLE_SIZE],
        unexpected_sample=tuple(event_id for event_id, _ in unexpected_ids[:SAMPLE_SIZE]),
        duplicates_sample=tuple(event_id for event_id, _ in duplicated_ids[:SAMPLE_SIZE]),
        missing_ids=missing_ids,
        unexpected_ids=unexpected_ids,
        duplicated_ids=duplicated_ids,
        missing_dead_lettered=(
            None if parked is None else _sum(pc.cast(pc.is_in(missing, value_set=parked), pa.int64()))
        ),
    )


def _sum(values: pa.Array) -> int:
    total = pc.sum(values).as_py()
    return int(total or 0)


def _first(ids: pa.Array, copies: pa.Array | None) -> Copies:
    """The first ``IDS_KEPT`` ids in sorted order, each with its copies (0 without ``copies``)."""
    if len(ids) == 0:
        return ()
    chosen = pc.select_k_unstable(ids, min(IDS_KEPT, len(ids)), [("id", "ascending")])
    chosen = pc.take(chosen, pc.sort_indices(pc.take(ids, chosen)))  # select_k leaves them unordered
    values = pc.take(ids, chosen).to_pylist()
    counts = pc.take(copies, chosen).to_pylist() if copies is not None else [0] * len(values)
    return tuple(zip(values, (int(count) for count in counts), strict=True))


def tally(selected_ids: Iterable[str], found_ids: Iterable[str]) -> Reconciliation:
    """The reference: the same counts, samples and lists from plain collections (the tests)."""
    selected = set(selected_ids)
    copies = Counter(found_ids)
    missing = sorted(selected - set(copies))
    unexpected = sorted(event_id for event_id in copies if event_id not in selected)
    duplicated = sorted(event_id for event_id in selected if copies[event_id] > 1)
    return Reconciliation(
        selected=len(selected),
        found=sum(copies.values()),
        missing=len(missing),
        unexpected=sum(copies[event_id] for event_id in unexpected),
        duplicates=sum(copies[event_id] - 1 for event_id in duplicated),
        missing_sample=tuple(missing[:SAMPLE_SIZE]),
        unexpected_sample=tuple(unexpected[:SAMPLE_SIZE]),
        duplicates_sample=tuple(duplicated[:SAMPLE_SIZE]),
        missing_ids=tuple(missing[:IDS_KEPT]),
        unexpected_ids=tuple((event_id, copies[event_id]) for event_id in unexpected[:IDS_KEPT]),
        duplicated_ids=tuple((event_id, copies[event_id]) for event_id in duplicated[:IDS_KEPT]),
    )

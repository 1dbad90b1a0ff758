"""One replay run on the driver: select, count, plan the pace, publish (streaming), count and reconcile.

The order matters: everything that can be refused cheaply (spec, columns, empty window, slots,
missing topic) is checked before a single record is sent. Nothing holds the window (docs/rules.md
rule 11): a counting pass reads only the partitioning column and counts rows per hash bucket of the
same partitioning the publish pass uses (``transforms.census``), which is all the even shares and
the pacing need; the publish pass then streams the window through one shuffle (sorted within
partitions for ``ordering=entity``, which spills) into the publishers, and nothing is persisted.
Each phase is logged as ``phase=<name> s=<its seconds> t=<seconds since spark-submit>``.

Counting what was published uses the results Spark keeps (one row per successful task), so a
failed attempt's records never add to ``confirmed``; what such attempts had confirmed comes from
their progress beacons and is reported as ``duplicates_possible``.
The target topic's end offsets are snapshotted before publishing and after every task ended: the
run's records lie between them, which is what ``spark_job.reconcile`` then reads. Once publishing
started, any failure is a ``JobFailed`` carrying what is known (never "nothing was sent").
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pyspark import SparkContext
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as sf

from spark_job import erasures, key_files, redrive, transforms
from spark_job.arrow_map import ArrowMapFunction, map_in_arrow
from spark_job.errors import SourceError
from spark_job.executors import await_executors
from spark_job.follower import TopicFollower
from spark_job.kafka_conf import client_config, producer_config
from spark_job.pii.decrypting import decrypting_body
from spark_job.progress import AttemptId, Beacon, ProgressReader, duplicates_possible, latest_per_attempt
from spark_job.publish.dead_letters import DeadLetterPlan, ensure_dead_letter_topic
from spark_job.publish.publisher import RESULT_SCHEMA, TaskSettings, TaskTotals, publish_partition
from spark_job.publish.slots import partition_count, task_slots
from spark_job.publish.time_shape import Departures, Shaped, bucket_width, shape
from spark_job.publish.topics import ensure_topic, topic_max_message_bytes, topic_partitions
from spark_job.publish.transactions import read_committed, require_transactions
from spark_job.reconcile import (
    DRIVER_MAX_ROWS,
    IDLE_TIMEOUT_S,
    DistinctIds,
    distinct_ids,
    end_offsets,
    read_ids,
    reconcile,
    reconcile_on_driver,
    run_ranges,
    whole_topic,
)
from spark_job.result import (
    JobFailed,
    Phase,
    ReconcileResult,
    Reconciliation,
    ReplayFailure,
    ReplayResult,
    iso_utc,
    memory_hint,
    rate_series,
    reason_of,
    utc_now,
)
from spark_job.spec.model import (
    DayWindow,
    JobSpec,
    KafkaValue,
    OffsetRanges,
    ReconcileTarget,
    TimeWindow,
    WatermarkRange,
    record_headers,
)

log = logging.getLogger(__name__)
# Clients used after a failure log here, silenced: a broker that is down would only repeat the reason.
quiet = logging.getLogger("spark_job.job.after_failure")
quiet.setLevel(logging.CRITICAL)

START_LEAD_S = 2.0  # the schedule starts this long after the publish job is submitted: tasks get going
# A shaped replay's events have times of their own that no task can move (a flat rate's late task
# shifts its own grid instead): it waits longer, so the tasks are there before its first event.
SHAPED_START_LEAD_S = 3.0
# After a failed publish the broker may be the reason: it gets BROKER_PROBE_S to answer at all, else
# beacons and end offsets are reported unknown at once (the failure reaches people seconds sooner).
BROKER_PROBE_S = 2.0
PROGRESS_READ_S = 5.0  # once it answered: reading the run's beacons
OFFSETS_READ_S = 5.0  # the same for the end offsets
# The counting pass counts rows per pmod(hash, slots x PROBE_MULTIPLE) bucket: lcm(1..10), so one pass
# serves any k <= 10 (and every divisor of it) in k x slots partitions; a k it does not divide (over
# 10 million rows per slot) costs a second counting pass. Buckets reach the driver: at most MAX_BUCKETS.
PROBE_MULTIPLE = 2520
MAX_BUCKETS = 100_000
SHUFFLE_PARTITIONS_PER_SLOT = 4  # the reconcile's joins and counts: a few tasks per slot, not 200


def select(spark: SparkSession, spec: JobSpec) -> DataFrame:
    """The window's rows (a plan: nothing is read), erased keys' events left out; a clear
    ``SourceError`` for unknown columns or an erasure list that cannot be read."""
    selected = _selection(spark, spec)
    if spec.erasures is None:
        return selected
    return erasures.without_erased(selected, erasures.erased_keys(spark, spec.erasures), spec.erasures.column)


def _selection(spark: SparkSession, spec: JobSpec) -> DataFrame:
    """The window's rows that its filter and its key file keep (before any erasure)."""
    selected = transforms.select_window(transforms.read_source(spark, spec.source, spec.selection), spec)
    if spec.keys_file is None:
        return selected
    keys = key_files.listed_keys(spark, spec.keys_file)
    return key_files.only_listed(selected, keys, spec.keys_file.column)


def redriven(spark: SparkSession, spec: JobSpec, letters: DataFrame) -> DataFrame:
    """A redrive's records: the subject's dead letters not landed yet (``letters``), erased keys' left
    out."""
    if spec.erasures is None:
        return letters
    keys = erasures.erased_keys(spark, spec.erasures)
    return erasures.without_erased(letters, keys, spec.key_column)


def suppressed(spark: SparkSession, spec: JobSpec, letters: DataFrame | None = None) -> int | None:
    """The erased keys' events the selection left out (of a redrive's ``letters``, by their key);
    None without an erasure list."""
    if spec.erasures is None:
        return None
    if letters is not None:
        return erasures.suppressed(letters, erasures.erased_keys(spark, spec.erasures), spec.key_column)
    window = _selection(spark, spec)
    return erasures.suppressed(window, erasures.erased_keys(spark, spec.erasures), spec.erasures.column)


def count(selected: DataFrame, spec: JobSpec, slots: int) -> transforms.Census:
    """The counting pass (one Spark job); a clear ``SourceError`` for an empty window (a pipeline's
    run with nothing new, past its watermark or in its commits, is not an error)."""
    watermark = spec.selection if isinstance(spec.selection, WatermarkRange) else None
    multiple = PROBE_MULTIPLE if slots * PROBE_MULTIPLE <= MAX_BUCKETS else 1
    counted = transforms.census(
        selected, spec, slots * multiple, high=watermark is not None and watermark.high is None
    )
    sent_back = spec.repair is not None or spec.redrive is not None  # nothing left to send is no error
    if counted.rows == 0 and isinstance(spec.selection, DayWindow | TimeWindow) and not sent_back:
        erased = " once its erasure list left out the erased keys' events" if spec.erasures else ""
        raise SourceError(
            f"no rows in window {spec.selection.describe()} of source {spec.source.name}{erased}"
        )
    return counted


def _sized_shuffles(spark: SparkSession) -> int:
    """The session's task slots (on a cluster, of the executors that registered: every one asked
    for, or the run fails here); its SQL shuffles (counts, the reconcile's joins) sized to them."""
    context = spark.sparkContext
    assert context.master is not None, "a running SparkContext has a master"
    conf = dict(context.getConf().getAll())
    executors = await_executors(context)
    if executors is not None:
        log.info("%d executors registered on %s", executors, context.master)  # every one asked for
        conf["spark.executor.instances"] = str(executors)
    slots = task_slots(context.master, conf)
    spark.conf.set("spark.sql.shuffle.partitions", str(slots * SHUFFLE_PARTITIONS_PER_SLOT))
    return slots


def run_reconcile(spark: SparkSession, spec: JobSpec) -> ReconcileResult:
    """``mode: "reconcile"``: select the window as a replay would, publish nothing, reconcile."""
    _sized_shuffles(spark)
    assert spec.reconcile is not None, "the spec refuses mode 'reconcile' without its target"
    target = spec.reconcile
    spec = erasures.pinned(spark, spec)
    selected = select(spark, spec)
    rows = selected.count()
    log.info("reconciling run %s against %d selected rows", target.run_id, rows)
    topic = target.offsets.topic if target.offsets is not None else spec.topic
    spark.sparkContext.setJobGroup(f"reconcile-{spec.run_id}", f"reconcile {target.run_id} on {topic}")
    reconciled = _reconciled(spark, spec, selected, rows, topic, target)
    return ReconcileResult(spec.run_id, _with_erasures(reconciled, spark, spec))


def _with_erasures(
    reconciled: Reconciliation, spark: SparkSession, spec: JobSpec, letters: DataFrame | None = None
) -> Reconciliation:
    """The verdict also says what the erasure list left out (never expected, so never missing)."""
    if spec.erasures is None:
        return reconciled
    left_out = suppressed(spark, spec, letters)
    return replace(reconciled, suppressed=left_out, erasures_as_of=erasures.version(spec.erasures))


def _reconciled(
    spark: SparkSession,
    spec: JobSpec,
    selected: DataFrame,
    rows: int,
    topic: str,
    target: ReconcileTarget,
    follower: TopicFollower | None = None,
) -> Reconciliation:
    """On the driver for a small run (one action collects the ids), else in Spark: the same document.
    A follower that read the run's records as they were written only has the tail left to read,
    which it does while Spark collects the ids; if it cannot, the ranges are read as before."""
    ids = selected.select(sf.col(spec.event_id_column).cast("string").alias("event_id"))
    if rows <= DRIVER_MAX_ROWS:
        began = time.monotonic()
        collected = ids.toArrow().column("event_id")
        collected_s = time.monotonic() - began
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="distinct-ids") as pool:
            distinct = pool.submit(distinct_ids, collected)  # hashed while the follower reads the tail
            followed = _followed(follower, target)
            failed = distinct.exception()
            if failed is not None:  # the comparison makes them unique itself (and says if it fails)
                log.warning("reconcile: the selected ids were not made unique ahead: %s", reason_of(failed))
            selected_ids: pa.ChunkedArray | DistinctIds = collected if failed else distinct.result()
        log.info(
            "reconcile: %d selected ids collected in %.1f s, %s",
            len(collected),
            collected_s,
            "the topic followed" if followed is not None else "the topic read back",
        )
        return reconcile_on_driver(
            selected_ids, kafka=reading(spec), topic=topic, target=target, followed=followed
        )
    return reconcile(spark, ids, kafka=reading(spec), topic=topic, target=target)


def _followed(follower: TopicFollower | None, target: ReconcileTarget) -> tuple[pa.ChunkedArray, int] | None:
    """What the follower read within the target's ranges; None (read them again) when there is none
    or it failed, which is logged."""
    if follower is None or target.offsets is None:
        return None
    began = time.monotonic()
    try:
        followed = follower.finish(target.offsets, idle_timeout_s=IDLE_TIMEOUT_S)
    except Exception as exc:
        log.warning("the topic follower failed (%s): the run's records are read back instead", reason_of(exc))
        return None
    log.info("reconcile: the follower read the tail in %.1f s", time.monotonic() - began)
    return followed


def run_replay(spark: SparkSession, spec: JobSpec, phase: Phase | None = None) -> ReplayResult:
    """One replay; ``phase.publishing`` turns true just before the first record may be sent."""
    phase = phase or Phase()
    started_at = utc_now()
    context = spark.sparkContext
    slots = _sized_shuffles(spark)
    spec = erasures.pinned(spark, spec)  # read before anything is sent: a run never goes without it
    # a redrive's rows are its subject's dead letters, read once on the driver
    letters = redrive.dead_letters(spark, spec) if spec.redrive is not None else None
    selected = whole = redriven(spark, spec, letters) if letters is not None else select(spark, spec)
    if spec.repair is not None:  # only what no record of the repaired run (or its repairs) carries
        selected = _still_missing(spark, spec, whole)
    phase.mark("select")  # listing the source, resolving its columns
    watermark = spec.selection if isinstance(spec.selection, WatermarkRange) else None
    counted = count(selected, spec, slots)
    rows = counted.rows
    phase.mark("count")
    log.info("selected %d rows from %s", rows, spec.selection.describe())
    if watermark is not None:  # headers name the real range; rows landing later wait for the next run
        high = watermark.high if watermark.high is not None else counted.high
        spec = replace(spec, selection=replace(watermark, high=high if high is not None else watermark.low))
        selected = select(spark, spec) if rows else selected
    topic_partitions(spec.kafka, spec.topic)
    if spec.on_error == "dlq" and spec.dlq_topic:
        ensure_dead_letter_topic(spec.kafka, spec.dlq_topic, spec.dlq_retention_ms)
    if rows == 0:  # a watermark run with nothing new publishes nothing, successfully (a repair too)
        nothing = Published([0] * slots, [], 0.0, None, since=time.time())
        reconciled = _reconcile_repaired(spark, spec, whole) if spec.repair is not None else None
        return _result(spec, started_at, rows, nothing, slots, failed=0, reconciled=reconciled)
    if spec.delivery == "transactional":  # said at once, not after every task's init has timed out
        require_transactions(spec.kafka)
    ensure_topic(spec.kafka, spec.progress.topic)
    # a shaped replay runs in one round: each task sends its events by their own times, the whole window
    one_round = spec.shape is not None
    partitions = slots if one_round else partition_count(rows, slots, spec.max_partition_multiple)
    sizes = counted.sizes(partitions) or transforms.census(selected, spec, partitions).sizes(partitions)
    assert sizes is not None, "a census modulo the partition count sizes its partitions"
    records = transforms.distribute(
        transforms.with_record_columns(selected, spec),
        partitions,
        spec.ordering,
        # a transactional retry resumes after its predecessor's last commit: the same rows, in order
        ordered=spec.delivery == "transactional",
    )
    shaped = _shaped(selected, spec)
    before = end_offsets(spec.kafka, spec.topic)
    with _following(spec, rows, before) as follower:
        phase.mark("plan")  # topics checked, partition sizes known
        phase.publishing = True
        published = _publish(context, records, spec, slots, sizes, started_at, before, shaped)
        phase.mark("publish")
        first = min(
            (task["first_delivery_at"] for task in published.tasks if task["first_delivery_at"]), default=None
        )
        if first is not None:
            log.info("phase=first_event t=%.3f", first - phase.origin)
        try:
            failed = _failed_tasks(context, spec.run_id)
            if spec.repair is not None:  # the repaired run's whole selection against all their records
                reconciled = _reconcile_repaired(spark, spec, whole)
            else:
                reconciled = _reconcile(spark, spec, selected, rows, published.offsets, follower)
            reconciled = _with_erasures(reconciled, spark, spec, letters)
            phase.mark("reconcile")
            return _result(spec, started_at, rows, published, slots, failed=failed, reconciled=reconciled)
        except Exception as exc:  # counted, then failed: the tasks' own counts are known
            confirmed = sum(task["confirmed"] for task in published.tasks)
            dead = sum(task["dead_lettered"] for task in published.tasks)
            offsets = published.offsets.document() if published.offsets else None
            failure = ReplayFailure(
                run_id=spec.run_id,
                reason=reason_of(exc),
                confirmed=confirmed,
                started_at=started_at,
                ended_at=utc_now(),
                on_topic_at_least=confirmed,
                dead_lettered=dead if spec.on_error == "dlq" else None,  # nothing is set aside in fail mode
                offsets=offsets,
            )
            raise JobFailed(failure) from exc


@contextlib.contextmanager
def _following(spec: JobSpec, rows: int, before: dict[int, int]) -> Iterator[TopicFollower | None]:
    """A run the driver reconciles has its records read as they land (ADR 0052), so its verdict
    waits for the tail only; the follower stops with the run, whatever ends it."""
    if rows > DRIVER_MAX_ROWS or spec.repair is not None:
        yield None
        return
    follower = TopicFollower(reading(spec), spec.topic, before, spec.run_id).start()
    try:
        yield follower
    finally:
        follower.close()


def _reconcile(
    spark: SparkSession,
    spec: JobSpec,
    selected: DataFrame,
    rows: int,
    offsets: OffsetRanges | None,
    follower: TopicFollower | None,
) -> Reconciliation:
    if offsets is None:
        return Reconciliation.failed(f"the end offsets of topic '{spec.topic}' after publishing are unknown")
    spark.sparkContext.setJobGroup(f"reconcile-{spec.run_id}", f"reconcile {spec.run_id} on {spec.topic}")
    target = ReconcileTarget(spec.run_id, offsets, spec.dlq_topic)
    return _reconciled(spark, spec, selected, rows, spec.topic, target, follower)


def _still_missing(spark: SparkSession, spec: JobSpec, selected: DataFrame) -> DataFrame:
    """The selected rows whose event ids no record of the repaired run or its repairs carries on the
    topic now (read whole: the repaired run's records and every repair's lie anywhere in it)."""
    assert spec.repair is not None, "only a repair leaves out what landed"
    ranges = whole_topic(spec.kafka, spec.topic)
    found = read_ids(spark, reading(spec), ranges, spec.repair.runs).where(sf.col("scanned").isNull())
    # read once: the count, the sizes and the publish all use the selection
    landed = found.select(sf.col("event_id").alias("__landed_id")).distinct().localCheckpoint()
    matches = selected[spec.event_id_column].cast("string") == landed["__landed_id"]
    return selected.join(landed, matches, "left_anti")


def _reconcile_repaired(spark: SparkSession, spec: JobSpec, whole: DataFrame) -> Reconciliation:
    """A repair's verdict: the repaired run's whole selection against the records of that run, its
    earlier repairs and this one, anywhere on the topic."""
    assert spec.repair is not None, "only a repair reconciles another run's selection"
    spark.sparkContext.setJobGroup(f"reconcile-{spec.run_id}", f"reconcile {spec.repair.of} on {spec.topic}")
    target = ReconcileTarget(spec.repair.of, None, spec.dlq_topic, also=(*spec.repair.runs[1:], spec.run_id))
    return _reconciled(spark, spec, whole, whole.count(), spec.topic, target)


@dataclass(frozen=True)
class Published:
    sizes: list[int]  # rows per partition
    tasks: list[Row]  # one row per successful task (publisher.RESULT_SCHEMA)
    seconds: float  # from the schedule's start to the last confirmation
    offsets: OffsetRanges | None  # where the run's records lie; None when the end was unreadable
    since: float  # epoch seconds when publishing began: no beacon of the run is older
    t0_wall: float | None = None  # the schedule's start (epoch seconds); None: nothing was paced
    departures: Departures | None = None  # a shaped run: its events due by any schedule time
    slid_s: float | None = None  # a shaped run: how much later the ceiling let its last event go


def _publish(
    context: SparkContext,
    records: DataFrame,
    spec: JobSpec,
    slots: int,
    sizes: list[int],
    started_at: str,
    before: dict[int, int],
    shaped: Shaped | None = None,
) -> Published:
    log.info(
        "publishing %d rows, partitions of %s, over %d slots at tps=%d", sum(sizes), sizes, slots, spec.tps
    )
    if shaped is not None:
        log.info(
            "shaped at %sx: peak %.0f/s before the ceiling, last event at %.1f s (%.1f s later for it)",
            spec.shape.speed if spec.shape else "?",
            shaped.peak,
            shaped.last_s,
            shaped.slid_s,
        )
    settings = TaskSettings(
        run_id=spec.run_id,
        topic=spec.topic,
        producer=fitted_to_topic(
            producer_config(spec.kafka, partitioner=spec.partitioner, unthrottled=spec.tps == 0), spec
        ),
        headers=list(record_headers(spec)),
        sizes=sizes,
        tps=spec.tps,
        slots=slots,
        t0_wall=time.time() + _start_lead_s(spec),
        progress_topic=spec.progress.topic,
        progress_interval_s=spec.progress.interval_s,
        dead_letters=DeadLetterPlan(
            on_error=spec.on_error, topic=spec.dlq_topic, producer=producer_config(spec.kafka)
        ),
        control=spec.control,
        control_kafka=dict(spec.kafka) if spec.control is not None else None,
        ramp=spec.ramp,
        max_bytes_per_s=spec.max_bytes_per_s,
        warp=shaped.warp if shaped is not None else None,
        delivery=spec.delivery,
    )
    context.setJobGroup(_group(spec.run_id), f"replay {spec.run_id}: publish to {spec.topic}")
    totals = TaskTotals(confirmed=context.accumulator(0), dead_lettered=context.accumulator(0))
    body: ArrowMapFunction = partial(publish_partition, settings, totals)
    if spec.decrypt is not None:
        body = decrypting_body(spec, body)
    since = time.time()
    try:
        tasks = map_in_arrow(records, body, RESULT_SCHEMA).collect()
    except Exception as exc:
        failed = _failed_tasks(context, spec.run_id)
        beacons, offsets = _after_failure(spec, before, since)
        raise JobFailed(
            ReplayFailure(
                run_id=spec.run_id,
                reason=memory_hint(exc),
                confirmed=totals.confirmed.value,
                failed_tasks=failed,
                # after a failed job Spark keeps no results: the attempts that said "done" succeeded
                duplicates_possible=_duplicates(beacons, {b.attempt_id for b in beacons or () if b.done}),
                started_at=started_at,
                ended_at=utc_now(),
                on_topic_at_least=_on_topic_at_least(totals.confirmed.value, beacons),
                dead_lettered=totals.dead_lettered.value if spec.on_error == "dlq" else None,
                offsets=offsets.document() if offsets is not None else None,
            )
        ) from exc
    log.info("published: %d confirmed", sum(task["confirmed"] for task in tasks))
    seconds = max(time.time() - settings.t0_wall, 1e-6)
    return Published(
        sizes,
        tasks,
        seconds,
        _offsets_after(spec, before),
        since=since,
        t0_wall=settings.t0_wall,
        departures=shaped.departures if shaped is not None else None,
        slid_s=shaped.slid_s if shaped is not None else None,
    )


def _after_failure(
    spec: JobSpec, before: dict[int, int], since: float
) -> tuple[list[Beacon] | None, OffsetRanges | None]:
    """The run's beacons and offset ranges after a failed publish; both unknown (None) when the broker
    does not answer within ``BROKER_PROBE_S``, instead of each read waiting out its own timeout."""
    try:
        AdminClient(client_config(spec.kafka), logger=quiet).list_topics(timeout=BROKER_PROBE_S)
    except KafkaException as exc:
        log.warning("broker unreachable, beacons and end offsets unknown: %s", reason_of(exc))
        return None, None
    return _beacons(spec, since), _offsets_after(spec, before)


def _offsets_after(spec: JobSpec, before: dict[int, int]) -> OffsetRanges | None:
    """The run's offset ranges, from a snapshot taken now (every task has ended); None if unreadable."""
    try:
        return run_ranges(spec.topic, before, end_offsets(spec.kafka, spec.topic, timeout_s=OFFSETS_READ_S))
    except Exception as exc:
        log.warning("end offsets of topic '%s' unreadable: %s", spec.topic, reason_of(exc))
        return None


def reading(spec: JobSpec) -> dict[str, KafkaValue]:
    """How a run's records are read back: committed ones only when they were sent in transactions
    (an aborted attempt's records are on the log, and no consumer reading committed sees them)."""
    return read_committed(spec.kafka) if spec.delivery == "transactional" else dict(spec.kafka)


def fitted_to_topic(producer: dict[str, KafkaValue], spec: JobSpec) -> dict[str, KafkaValue]:
    """Batches no larger than the target's ``max.message.bytes``: the broker refuses a whole batch
    that is over it, so a small record batched with an oversize one would fail with it. librdkafka
    still sends a record larger than ``batch.size`` alone, where only that record is refused."""
    limit = topic_max_message_bytes(spec.kafka, spec.topic)
    if limit is None:
        return producer
    return {**producer, "batch.size": min(int(producer.get("batch.size", limit)), limit)}


def _group(run_id: str) -> str:
    return f"replay-{run_id}"


def _failed_tasks(context: SparkContext, run_id: str) -> int:
    """Failed task attempts of the publish stage(s), as Spark's status tracker saw them."""
    tracker = context.statusTracker()
    failed = 0
    for job_id in tracker.getJobIdsForGroup(_group(run_id)):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            failed += stage.numFailedTasks if stage else 0
    return failed


def _beacons(spec: JobSpec, since: float) -> list[Beacon] | None:
    """Each attempt's furthest beacon so far (read from ``since`` on, not the shared topic's
    beginning; `ProgressReader.beacons`); None when they are unreadable (the broker may be down)."""
    try:
        progress = ProgressReader(
            kafka=spec.kafka, topic=spec.progress.topic, run_id=spec.run_id, since=since, logger=quiet
        )
        with progress as reader:
            reader.read(timeout_s=PROGRESS_READ_S)
            return reader.beacons()
    except (KafkaException, TimeoutError) as exc:
        log.warning("progress beacons unreadable: %s", reason_of(exc))
        return None


def _duplicates(beacons: list[Beacon] | None, succeeded: set[AttemptId]) -> int | None:
    """What attempts other than ``succeeded`` had confirmed; None (never 0) when beacons are unknown."""
    return None if beacons is None else duplicates_possible(beacons, succeeded)


def _on_topic_at_least(confirmed: int, beacons: list[Beacon] | None) -> int | None:
    """A lower bound on the run's records on the topic: successful tasks' count, or every attempt's
    last beacon summed (each attempt's confirmed records are its own), whichever is larger."""
    if beacons is None:
        return confirmed or None  # without beacons, 0 would only mean "unknown"
    return max(confirmed, sum(beacon.confirmed for beacon in latest_per_attempt(beacons).values()))


def _result(
    spec: JobSpec,
    started_at: str,
    rows_selected: int,
    published: Published,
    slots: int,
    *,
    failed: int,
    reconciled: Reconciliation | None,
) -> ReplayResult:
    tasks = published.tasks
    confirmed = sum(task["confirmed"] for task in tasks)
    succeeded = {(task["partition"], task["task_id"]) for task in tasks}
    firsts = [task["first_delivery_at"] for task in tasks if task["first_delivery_at"] is not None]
    lasts = [task["last_delivery_at"] for task in tasks if task["last_delivery_at"] is not None]
    first, last = min(firsts, default=None), max(lasts, default=None)
    histograms = [
        {int(second): count for second, count in json.loads(task["per_second"]).items()} for task in tasks
    ]
    selection = spec.selection
    # Spark's tracker misses an attempt lost with its executor when the stage is resubmitted (the
    # stage's info is then its new attempt's): the beacons name every attempt that did not succeed.
    beacons = _beacons(spec, published.since)
    lost = None if beacons is None else len(set(latest_per_attempt(beacons)) - succeeded)
    return ReplayResult(
        run_id=spec.run_id,
        rows_selected=rows_selected,
        confirmed=confirmed,
        failed_tasks=max(failed, lost or 0),
        duplicates_possible=_duplicates(beacons, succeeded) if beacons is not None or failed else 0,
        # what the succeeded attempts delivered between their first and last confirmation: rows a
        # transactional retry resumed after were delivered by an attempt whose times are not here
        achieved_tps=achieved_tps(confirmed - sum(task["resumed"] or 0 for task in tasks), first, last),
        tps=spec.tps,
        started_at=started_at,
        ended_at=utc_now(),
        publish_seconds=round(published.seconds, 3),
        behind_schedule_s=_largest(tasks, "skipped_s"),
        late_start_s=_largest(tasks, "late_start_s"),
        start_spread_s=round(_largest(tasks, "late_start_s") - _smallest(tasks, "late_start_s"), 3),
        watermark_high=selection.high if isinstance(selection, WatermarkRange) else None,
        partition_skew=transforms.skew(published.sizes),
        slots=slots,
        partitions=len(published.sizes),
        topic=spec.topic,
        dead_lettered=sum(task["dead_lettered"] for task in tasks),
        first_delivery_at=iso_utc(first) if first is not None else None,
        last_delivery_at=iso_utc(last) if last is not None else None,
        rate_series=_with_targets(rate_series(histograms), published),
        offsets=published.offsets.document() if published.offsets is not None else None,
        reconcile=reconciled,
        bytes_held_s=_bytes_held(tasks) if spec.max_bytes_per_s is not None else None,
        suppressed=reconciled.suppressed if reconciled is not None else None,
        erasures_as_of=reconciled.erasures_as_of if reconciled is not None else None,
        delivery=spec.delivery,
        by_partition=_by_partition(published.sizes, tasks, beacons),
        **_transactions(tasks) if spec.delivery == "transactional" else {},
    )


def _by_partition(sizes: list[int], tasks: list[Row], beacons: list[Beacon] | None) -> list[dict[str, int]]:
    """Each partition's rows, confirmed records and tries (the beacons name every attempt, lost ones
    too; without them the successful attempt's number is the least it took)."""
    tries: dict[int, int] = {}
    for partition, _ in latest_per_attempt(beacons or ()):
        tries[partition] = tries.get(partition, 0) + 1
    return [
        {
            "partition": task["partition"],
            "rows": sizes[task["partition"]],
            "confirmed": task["confirmed"],
            "attempts": max(task["attempt"] + 1, tries.get(task["partition"], 0)),
        }
        for task in sorted(tasks, key=lambda task: task["partition"])
    ]


def _transactions(tasks: list[Row]) -> dict[str, Any]:
    """What the tasks' transactions came to: how many, the longest one open, the rows retries resumed
    after instead of sending again."""
    return {
        "transactions": sum(task["transactions"] or 0 for task in tasks),
        "longest_transaction_s": round(
            max((task["longest_transaction_s"] or 0.0 for task in tasks), default=0.0), 3
        ),
        "resumed": sum(task["resumed"] for task in tasks),
    }


def _bytes_held(tasks: list[Row]) -> float:
    return round(max((task["bytes_held_s"] or 0.0 for task in tasks), default=0.0), 3)


def _start_lead_s(spec: JobSpec) -> float:
    if spec.tps == 0:
        return 0.0  # unthrottled tasks never wait
    return SHAPED_START_LEAD_S if spec.shape is not None else START_LEAD_S


def _with_targets(series: dict[str, Any] | None, published: Published) -> dict[str, Any] | None:
    """A shaped run's series also says what was due in each of its seconds (the chart's target line):
    the schedule's departures between the series' own wall-clock seconds, read at the histogram's
    resolution (a whole schedule second spread evenly would misplace a burst's edge, and the
    sampling noise of a quiet stretch, by a fraction of a second's events)."""
    departures = published.departures
    if series is None or departures is None or published.t0_wall is None:
        return series
    shift = series["start"] - published.t0_wall  # schedule time at the series' first second
    seconds = range(len(series["counts"]))
    targets = [round(departures.between(k + shift, k + shift + 1), 3) for k in seconds]
    return {**series, "targets": targets, "slid_s": round(published.slid_s or 0.0, 1)}


def _shaped(selected: DataFrame, spec: JobSpec) -> Shaped | None:
    """A shaped replay's histogram (one pass), served under its ceiling (``time_shape.shape``)."""
    if spec.shape is None:
        return None
    width = bucket_width((_window_end(spec) - spec.shape.origin) / spec.shape.speed)
    return shape(transforms.shape_counts(selected, spec, width), width, spec.tps)


def _window_end(spec: JobSpec) -> float:
    selection = spec.selection
    if isinstance(selection, TimeWindow):
        return selection.end.timestamp()
    if isinstance(selection, DayWindow):
        after = selection.end_day + timedelta(days=1)
        return datetime(after.year, after.month, after.day, tzinfo=UTC).timestamp()
    raise SourceError(f"a shaped replay needs a window, not {selection.describe()}")


def achieved_tps(confirmed: int, first: float | None, last: float | None) -> float | None:
    """Confirmed records over the span of their confirmations; None without a span to divide by."""
    if confirmed < 2 or first is None or last is None or last <= first:
        return None
    return round(confirmed / (last - first), 2)


def _largest(tasks: list[Row], field: str) -> float:
    return round(max((task[field] for task in tasks), default=0.0), 3)


def _smallest(tasks: list[Row], field: str) -> float:
    return round(min((task[field] for task in tasks), default=0.0), 3)

"""One replay run on the driver: select, distribute, plan the pace, publish, and count.

The order matters: everything that can be refused cheaply (spec, columns, empty window, slots,
missing topic) is checked before a single record is sent. Counting uses the results Spark keeps
(one row per successful task), so a failed attempt's records never add to ``confirmed``; what such
attempts had confirmed comes from their progress beacons and is reported as ``duplicates_possible``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from functools import partial

from confluent_kafka import KafkaException
from pyspark import SparkContext, StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession

from spark_job import transforms
from spark_job.arrow_map import ArrowMapFunction, map_in_arrow
from spark_job.errors import SourceError
from spark_job.kafka_conf import producer_config
from spark_job.pii.decrypting import decrypting_body
from spark_job.progress import AttemptId, Beacon, ProgressReader, duplicates_possible
from spark_job.publish.dead_letters import DeadLetterPlan, ensure_dead_letter_topic
from spark_job.publish.publisher import RESULT_SCHEMA, TaskSettings, publish_partition
from spark_job.publish.slots import partition_count, task_slots
from spark_job.publish.topics import ensure_topic, topic_max_message_bytes, topic_partitions
from spark_job.result import JobFailed, ReplayFailure, ReplayResult, reason_of, utc_now
from spark_job.spec.model import JobSpec, KafkaValue, WatermarkRange, record_headers

log = logging.getLogger(__name__)

START_LEAD_S = 1.0  # the schedule starts this long after the publish job is submitted: tasks get going
PROGRESS_READ_S = 5.0  # the broker may be the reason the run failed: do not wait long for beacons


@dataclass(frozen=True)
class Selected:
    df: DataFrame
    rows: int


def select(spark: SparkSession, spec: JobSpec) -> Selected:
    """The window's rows; a clear ``SourceError`` for unknown columns or an empty window."""
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    rows = selected.count()
    if rows == 0 and not isinstance(spec.selection, WatermarkRange):
        raise SourceError(f"no rows in window {spec.selection.describe()} of source {spec.source.name}")
    return Selected(selected, rows)


def run_replay(spark: SparkSession, spec: JobSpec) -> ReplayResult:
    started_at = utc_now()
    context = spark.sparkContext
    assert context.master is not None, "a running SparkContext has a master"
    slots = task_slots(context.master, dict(context.getConf().getAll()))
    selected = select(spark, spec)
    log.info("selected %d rows from %s", selected.rows, spec.selection.describe())
    if isinstance(spec.selection, WatermarkRange):
        high = transforms.watermark_high(selected.df, spec.selection)
        spec = replace(spec, selection=replace(spec.selection, high=high))  # headers name the real range
    topic_partitions(spec.kafka, spec.topic)
    if spec.on_error == "dlq" and spec.dlq_topic:
        ensure_dead_letter_topic(spec.kafka, spec.dlq_topic)
    if selected.rows == 0:  # a watermark run with nothing new publishes nothing, successfully
        return _result(spec, started_at, selected.rows, Published([0] * slots, [], 0.0), slots, failed=0)
    ensure_topic(spec.kafka, spec.progress.topic)
    partitions = partition_count(selected.rows, slots, spec.max_partition_multiple)
    records = transforms.distribute(
        transforms.with_record_columns(selected.df, spec), partitions, spec.ordering
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        published = _publish(context, records, spec, slots, started_at)
    finally:
        records.unpersist()
    failed = _failed_tasks(context, spec.run_id)
    return _result(spec, started_at, selected.rows, published, slots, failed=failed)


@dataclass(frozen=True)
class Published:
    sizes: list[int]  # rows per partition
    tasks: list[Row]  # one row per successful task (publisher.RESULT_SCHEMA)
    seconds: float  # from the schedule's start to the last confirmation


def _publish(
    context: SparkContext, records: DataFrame, spec: JobSpec, slots: int, started_at: str
) -> Published:
    sizes = transforms.partition_sizes(records, records.rdd.getNumPartitions())
    log.info(
        "publishing %d rows, partitions of %s, over %d slots at tps=%d", sum(sizes), sizes, slots, spec.tps
    )
    settings = TaskSettings(
        run_id=spec.run_id,
        topic=spec.topic,
        producer=fitted_to_topic(producer_config(spec.kafka, partitioner=spec.partitioner), spec),
        headers=list(record_headers(spec)),
        sizes=sizes,
        tps=spec.tps,
        slots=slots,
        t0_wall=time.time() + (START_LEAD_S if spec.tps else 0.0),  # unthrottled tasks never wait
        progress_topic=spec.progress.topic,
        progress_interval_s=spec.progress.interval_s,
        dead_letters=DeadLetterPlan(
            on_error=spec.on_error, topic=spec.dlq_topic, producer=producer_config(spec.kafka)
        ),
    )
    context.setJobGroup(_group(spec.run_id), f"replay {spec.run_id}: publish to {spec.topic}")
    accumulated = context.accumulator(0)
    body: ArrowMapFunction = partial(publish_partition, settings, accumulated)
    if spec.decrypt is not None:
        body = decrypting_body(spec, body)
    try:
        tasks = map_in_arrow(records, body, RESULT_SCHEMA).collect()
    except Exception as exc:
        raise JobFailed(
            ReplayFailure(
                run_id=spec.run_id,
                reason=reason_of(exc),
                confirmed=accumulated.value,
                failed_tasks=_failed_tasks(context, spec.run_id),
                duplicates_possible=_duplicates(spec, succeeded=None),
                started_at=started_at,
                ended_at=utc_now(),
            )
        ) from exc
    log.info("published: %d confirmed", sum(task["confirmed"] for task in tasks))
    return Published(sizes, tasks, max(time.time() - settings.t0_wall, 1e-6))


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


def _duplicates(spec: JobSpec, *, succeeded: set[AttemptId] | None) -> int | None:
    """What failed attempts had confirmed, from their beacons; None when the beacons are unreadable.

    After a failed job Spark keeps no results, so the attempts that sent a ``done`` beacon are the
    ones that succeeded (``succeeded=None``).
    """
    try:
        # After a failure the broker may be down: its connection errors would only repeat the reason.
        quiet = logging.getLogger("spark_job.job.beacons")
        quiet.setLevel(logging.CRITICAL)
        progress = ProgressReader(
            kafka=spec.kafka, topic=spec.progress.topic, run_id=spec.run_id, logger=quiet
        )
        with progress as reader:
            reader.read(timeout_s=PROGRESS_READ_S)
            beacons: list[Beacon] = reader.beacons()
    except (KafkaException, TimeoutError) as exc:
        log.warning("progress beacons unreadable: %s", reason_of(exc))
        return None
    if succeeded is None:
        succeeded = {beacon.attempt_id for beacon in beacons if beacon.done}
    return duplicates_possible(beacons, succeeded)


def _result(
    spec: JobSpec, started_at: str, rows_selected: int, published: Published, slots: int, *, failed: int
) -> ReplayResult:
    confirmed = sum(task["confirmed"] for task in published.tasks)
    succeeded = {(task["partition"], task["task_id"]) for task in published.tasks}
    selection = spec.selection
    return ReplayResult(
        run_id=spec.run_id,
        rows_selected=rows_selected,
        confirmed=confirmed,
        failed_tasks=failed,
        duplicates_possible=_duplicates(spec, succeeded=succeeded) if failed else 0,
        achieved_tps=round(confirmed / published.seconds, 2) if published.seconds else 0.0,
        tps=spec.tps,
        started_at=started_at,
        ended_at=utc_now(),
        publish_seconds=round(published.seconds, 3),
        behind_schedule_s=_largest(published.tasks, "skipped_s"),
        late_start_s=_largest(published.tasks, "late_start_s"),
        watermark_high=selection.high if isinstance(selection, WatermarkRange) else None,
        partition_skew=transforms.skew(published.sizes),
        slots=slots,
        partitions=len(published.sizes),
        topic=spec.topic,
        dead_lettered=sum(task["dead_lettered"] for task in published.tasks),
    )


def _largest(tasks: list[Row], field: str) -> float:
    return round(max((task[field] for task in tasks), default=0.0), 3)

"""The executor side: publish one partition at its planned pace and count what the broker confirmed.

Runs inside ``mapInArrow`` (one call per partition task) and yields a single result row, so the
driver's ``collect()`` only sees the counts of attempts that succeeded (Spark discards the results
of failed attempts). docs/rules.md rules 1, 3, 4, 5: idempotent producer with ``acks=all``, key = entity
column, provenance headers on every record, and a record counts only when its delivery report came
back without error; ``flush()`` before the task ends, and any delivery error fails the task with the
broker's own error text. Beacons report the confirmed count while the task runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark import Accumulator, TaskContext

from spark_job.errors import PublishError
from spark_job.progress import Beacon
from spark_job.publish.pacing import Pacer, partition_schedule
from spark_job.spec.model import KafkaValue

Header = tuple[str, str | bytes | None]  # a record header as confluent-kafka takes it
RESULT_SCHEMA = (
    "partition int, attempt int, task_id long, confirmed long, skipped_s double, late_start_s double"
)
_RESULT_ARROW = pa.schema(
    [
        ("partition", pa.int32()),
        ("attempt", pa.int32()),
        ("task_id", pa.int64()),
        ("confirmed", pa.int64()),
        ("skipped_s", pa.float64()),
        ("late_start_s", pa.float64()),
    ]
)
MAX_WAIT_S = 0.1  # longest sleep between checks for delivery reports, beacons and deadlines
FAILURE_FLUSH_S = 3.0  # on the way out of a failed task: let in-flight reports land, briefly
BEACON_FLUSH_S = 2.0


@dataclass(frozen=True)
class TaskSettings:
    """Everything a task needs, decided once on the driver and shipped with the closure."""

    run_id: str
    topic: str
    producer: dict[str, KafkaValue]
    headers: list[Header]
    sizes: list[int]  # rows of every partition: each task derives its own schedule from them
    tps: int
    slots: int
    t0_wall: float  # job-wide schedule start (epoch seconds), shared by every executor
    progress_topic: str
    progress_interval_s: float


class DeliveryCounter:
    """The producer's delivery callback: counts confirmations, remembers the first error."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.confirmed = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.confirmed += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = error

    def raise_if_failed(self) -> None:
        if self.first_error is not None:
            error = self.first_error
            raise PublishError(
                f"{error.str()} ({error.name()}): {self.failed} record(s) to topic '{self.topic}' "
                "were not confirmed by the broker"
            )


class BeaconEmitter:
    """Sends this attempt's confirmed count to the progress topic at most every interval."""

    def __init__(self, producer: Producer, settings: TaskSettings, attempt: Beacon) -> None:
        self._producer = producer
        self._topic = settings.progress_topic
        self._interval_s = settings.progress_interval_s
        self._attempt = attempt  # run, partition, attempt and task id; the count is filled in
        self._last_sent = -1
        self._next_at = 0.0

    def tick(self, confirmed: int, *, force: bool = False, done: bool = False, failed: bool = False) -> None:
        now = time.monotonic()
        if not force and (now < self._next_at or confirmed == self._last_sent):
            return
        beacon = replace(self._attempt, confirmed=confirmed, done=done, failed=failed)
        try:
            self._producer.produce(self._topic, beacon.encode(), beacon.run_id, on_delivery=_ignore)
        except BufferError:
            return  # the queue is full of records: the next tick tries again
        self._last_sent = confirmed
        self._next_at = now + self._interval_s


def _ignore(error: KafkaError | None, message: Message) -> None:
    """Beacons are best effort: a lost one only delays what outsiders see."""


def publish_partition(
    settings: TaskSettings, confirmed_total: Accumulator[int] | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: publish every (key, value) row of this partition, paced by its plan.

    ``confirmed_total`` (an accumulator) also receives the count: Spark applies it once per
    successful task as tasks finish, so it is known on the driver even when the job fails later.
    """
    context = TaskContext.get()
    assert context is not None, "publish_partition runs inside a Spark task"
    partition, attempt, task_id = context.partitionId(), context.attemptNumber(), context.taskAttemptId()
    counter = DeliveryCounter(settings.topic)
    producer = Producer({**settings.producer, "on_delivery": counter})
    identity = Beacon(settings.run_id, partition, attempt, 0, task_id=task_id)
    beacons = BeaconEmitter(producer, settings, identity)
    t0 = time.monotonic() + (settings.t0_wall - time.time())
    schedule = partition_schedule(settings.sizes, settings.tps, settings.slots, partition)
    pacer = Pacer(schedule, t0, sleep=producer.poll)
    try:
        beacons.tick(0, force=True)
        for batch in batches:
            _publish_batch(producer, settings, batch, pacer, counter, beacons)
        while producer.flush(MAX_WAIT_S) > 0:
            counter.raise_if_failed()
            beacons.tick(counter.confirmed)
        counter.raise_if_failed()
        beacons.tick(counter.confirmed, force=True, done=True)
        producer.flush(BEACON_FLUSH_S)
    except BaseException:
        producer.flush(FAILURE_FLUSH_S)  # the last count is then as true as it can be
        with contextlib.suppress(BufferError, KafkaException):
            beacons.tick(counter.confirmed, force=True, failed=True)
            producer.flush(BEACON_FLUSH_S)
        raise
    if confirmed_total is not None:
        confirmed_total.add(counter.confirmed)
    yield pa.RecordBatch.from_pydict(
        {
            "partition": [partition],
            "attempt": [attempt],
            "task_id": [task_id],
            "confirmed": [counter.confirmed],
            "skipped_s": [pacer.skipped_s],
            "late_start_s": [pacer.late_start_s],
        },
        schema=_RESULT_ARROW,
    )


def _publish_batch(
    producer: Producer,
    settings: TaskSettings,
    batch: pa.RecordBatch,
    pacer: Pacer,
    counter: DeliveryCounter,
    beacons: BeaconEmitter,
) -> None:
    keys: list[Any] = batch.column(0).to_pylist()
    values: list[Any] = batch.column(1).to_pylist()
    produce, topic, headers = producer.produce, settings.topic, settings.headers
    done, rows = 0, len(keys)
    while done < rows:
        granted = pacer.take(rows - done)
        if granted:
            for index in range(done, done + granted):
                while True:
                    try:
                        produce(topic, values[index], keys[index], headers=headers)
                        break
                    except BufferError:  # local queue full: serve reports, then retry
                        producer.poll(MAX_WAIT_S)
            done += granted
            producer.poll(0)
        else:
            pacer.wait(MAX_WAIT_S)
        counter.raise_if_failed()
        beacons.tick(counter.confirmed)

"""The executor side: publish one partition at its pace, count what the broker confirmed (one task's
whole life, hence over 400 lines).

Runs inside ``mapInArrow`` (one call per partition task) and yields a single result row, so the
driver's ``collect()`` only sees the counts of attempts that succeeded (Spark discards the results
of failed attempts). docs/rules.md rules 1, 3, 4, 5: idempotent producer with ``acks=all``, key = entity
column, provenance headers on every record, and a record counts only when its delivery report came
back without error (served, no failure reported); ``flush()`` before the task ends, and any
delivery error fails the task with the broker's own error text. A record refused for its own sake
(too large, not encodable, marked bad by an earlier step) is set aside instead
(``spark_job.publish.dead_letters``): on the dead-letter topic with ``on_error=dlq``, else it fails
the task naming its event id. Beacons report the confirmed count (and when they were sent) while the
task runs.

Each record also carries its own ``replay-event-id`` header, last, so a reconcile reads ids from
headers whatever the value's format. The producer calls back on failures only; ``DeliveryCounter``
counts the rest as their reports are served, with the wall-clock time of the first and last
confirmation and per second: the run's achieved rate and rate series come from the broker's
answers, not from the driver's clock.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark import Accumulator, TaskContext

from spark_job.control import ControlFeed
from spark_job.errors import PublishError
from spark_job.progress import Beacon
from spark_job.publish.byte_budget import ByteBudget
from spark_job.publish.dead_letters import (
    BadRecord,
    DeadLetterPlan,
    DeadLetters,
    bad_record_of,
    is_bad_record,
    kafka_reason,
)
from spark_job.publish.pacing import Pacer, TimedSchedule, partition_schedule
from spark_job.publish.reach import BrokerReach, flush_while_reachable
from spark_job.publish.time_shape import Warp
from spark_job.publish.timeline import Timeline, ramped
from spark_job.publish.transactions import Transactions, committed_rows, fence, transactional_config
from spark_job.spec.model import EVENT_ID_HEADER, Control, Delivery, KafkaValue, Ramp, RateChange

Header = tuple[str, str | bytes | None]  # a record header as confluent-kafka takes it
# Batches are (key, value[, TIMESTAMP]): the optional column carries timestamp=event's epoch ms.
TIMESTAMP = "_replay_timestamp"
# ... and [, OFFSET]: a shaped replay's event time, scaled: seconds after the window's start / speed
OFFSET = "_replay_offset"
# ... and [, HEADERS]: a raw record's own headers, array<struct<name, value>>, sent before the provenance.
HEADERS = "_replay_headers"
# ... and [, EVENT_ID]: each row's event id as text, which a bad record's reason and dead letter name.
EVENT_ID = "_replay_event_id"
# ... and [, ERROR]: why a step before the publisher could not prepare the row (null when it could).
ERROR = "_replay_error"
# ... and [, ORIGINAL]: the value as the source holds it (PII still encrypted) when a step before
# decrypted it: what a dead letter carries instead, so no plaintext is ever set aside.
ORIGINAL = "_replay_original"
RESULT_SCHEMA = (
    "partition int, attempt int, task_id long, confirmed long, skipped_s double, late_start_s double,"
    " dead_lettered long, first_delivery_at double, last_delivery_at double, per_second string,"
    " bytes_held_s double, resumed long, transactions long, longest_transaction_s double"
)
_RESULT_ARROW = pa.schema(
    [
        ("partition", pa.int32()),
        ("attempt", pa.int32()),
        ("task_id", pa.int64()),
        ("confirmed", pa.int64()),
        ("skipped_s", pa.float64()),
        ("late_start_s", pa.float64()),
        ("dead_lettered", pa.int64()),
        ("first_delivery_at", pa.float64()),  # epoch seconds of the first confirmation (null: none)
        ("last_delivery_at", pa.float64()),
        ("per_second", pa.string()),  # JSON {"<epoch second>": confirmations}
        ("bytes_held_s", pa.float64()),  # max_mb: how long due events waited for bytes (null: no budget)
        # delivery=transactional: rows earlier attempts had committed, which this one skipped
        ("resumed", pa.int64()),
        ("transactions", pa.int64()),  # transactions committed (null: an idempotent run)
        ("longest_transaction_s", pa.float64()),  # the longest one stayed open, its commit included
    ]
)
MAX_WAIT_S = 0.1  # longest sleep between checks for delivery reports, beacons and deadlines
# The flushes bounded by these end early once no broker is reachable (``spark_job.publish.reach``).
FAILURE_FLUSH_S = 3.0  # on the way out of a failed task: let in-flight reports land, briefly
BEACON_FLUSH_S = 2.0
FAILURE_REPORTS_ONLY = {"delivery.report.only.error": True}  # successes are counted (DeliveryCounter)


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
    dead_letters: DeadLetterPlan = field(default_factory=DeadLetterPlan)  # on_error and its topic
    control: Control | None = None  # live rate changes: the control topic and the changes so far
    control_kafka: dict[str, KafkaValue] | None = None  # the client settings to read it with
    ramp: Ramp | None = None  # a warm-up from a share of tps to all of it, from t0
    max_bytes_per_s: int | None = None  # max_mb: the byte ceiling beside the rate; None: none
    warp: Warp | None = None  # tps=original: scaled event time -> deadline under the ceiling; None: flat
    delivery: Delivery = "idempotent"  # transactional: spark_job.publish.transactions


@dataclass(frozen=True)
class TaskTotals:
    """Accumulators Spark applies once per successful task: known on the driver even if the job fails."""

    confirmed: Accumulator[int]
    dead_lettered: Accumulator[int]


class DeliveryCounter:
    """What the broker confirmed, without a Python call per record.

    The producer calls back on failures only (``delivery.report.only.error``): a success callback
    per record cost a ``Message`` object and a Python call, a quarter of a task's time unthrottled
    (ADR 0055). Every report still comes back and is served by ``poll``; until then its record is
    outstanding (``len(producer)``). So after each poll ``confirmed`` is accepted - outstanding -
    failed, counted in total, per wall-clock second and with the first and last time it grew.
    Outstanding also holds a beacon in flight, so between polls the count may trail the broker,
    never lead it; after the last flush it is exact.

    A record the broker refused for its own sake (too large, invalid) goes to ``dead_letters``
    instead, named by the event id its own ``report`` callback was bound to.
    """

    def __init__(self, topic: str, dead_letters: DeadLetters | None = None) -> None:
        self.topic = topic
        self.producer: Producer | None = None  # attached once built (it takes this counter's callback)
        self.accepted = 0  # records produce() took (set-aside and refused ones not)
        self.confirmed = 0
        self.first_at: float | None = None  # time.time() of the first and the last confirmation seen
        self.last_at: float | None = None
        self.per_second: defaultdict[int, int] = defaultdict(int)
        self.failed = 0
        self.set_aside = 0  # refused by the broker for their own sake, after produce() took them
        self.first_error: KafkaError | None = None
        self.dead_letters = dead_letters

    def attach(self, producer: Producer) -> Producer:
        self.producer = producer
        return producer

    def poll(self, timeout_s: float) -> int:
        """``producer.poll``, then the count brought up to date (the pacer sleeps in this)."""
        assert self.producer is not None, "attached before the task publishes"
        served = self.producer.poll(timeout_s)
        self.observe()
        return served

    def flush(self, timeout_s: float) -> int:
        """``producer.flush``, then the count brought up to date; what is still outstanding."""
        assert self.producer is not None, "attached before the task publishes"
        left = self.producer.flush(timeout_s)
        self.observe()
        return left

    def observe(self) -> None:
        """Count what is no longer outstanding and was not reported failed (never lowers the count)."""
        assert self.producer is not None, "attached before the task publishes"
        confirmed = self.accepted - len(self.producer) - self.failed - self.set_aside
        if confirmed <= self.confirmed:
            return
        now = time.time()
        self.per_second[int(now)] += confirmed - self.confirmed
        self.confirmed = confirmed
        self.last_at = now
        if self.first_at is None:
            self.first_at = now

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        self.report(None, error, message)

    def report(
        self, event_id: str | None, error: KafkaError | None, message: Message, original: bytes | None = None
    ) -> None:
        """A record's failure report (the producer sends no others)."""
        if error is None:  # not asked for; a success is counted by ``observe``
            return
        if self.dead_letters is not None and is_bad_record(error):
            value = original if original is not None else message.value()
            bad = BadRecord(message.key(), value, event_id, kafka_reason(error))
            self.set_aside += 1
            self.dead_letters.set_aside(bad)
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = error

    def raise_if_failed(self) -> None:
        if self.dead_letters is not None:
            self.dead_letters.raise_if_failed()
        if self.first_error is not None:
            error = self.first_error
            raise PublishError(
                f"{error.str()} ({error.name()}): {self.failed} record(s) to topic '{self.topic}' "
                "were not confirmed by the broker"
            )


class BeaconEmitter:
    """Sends this attempt's confirmed count to the progress topic at most every interval."""

    def __init__(
        self, producer: Producer, settings: TaskSettings, attempt: Beacon, *, forced_only: bool = False
    ) -> None:
        """``forced_only``: beacons only when forced (a transactional task's, one per commit)."""
        self._producer = producer
        self._forced_only = forced_only
        self._topic = settings.progress_topic
        self._interval_s = settings.progress_interval_s
        self._attempt = attempt  # run, partition, attempt and task id; the count is filled in
        self._last_sent = -1
        self._next_at = 0.0

    def tick(self, confirmed: int, *, force: bool = False, done: bool = False, failed: bool = False) -> None:
        now = time.monotonic()
        if not force and (self._forced_only or now < self._next_at or confirmed == self._last_sent):
            return
        at = round(time.time(), 3)
        beacon = replace(self._attempt, confirmed=confirmed, done=done, failed=failed, at=at)
        try:
            self._producer.produce(self._topic, beacon.encode(), beacon.run_id, on_delivery=_ignore)
        except BufferError:
            return  # the queue is full of records: the next tick tries again
        self._last_sent = confirmed
        self._next_at = now + self._interval_s

    def send(self, confirmed: int, *, done: bool, poll: Callable[[float], object]) -> None:
        """A beacon that must go (a transaction's commit carries it): a full queue is served first."""
        beacon = replace(self._attempt, confirmed=confirmed, done=done, at=round(time.time(), 3))
        while True:
            try:
                self._producer.produce(self._topic, beacon.encode(), beacon.run_id, on_delivery=_ignore)
                break
            except BufferError:
                poll(MAX_WAIT_S)
        self._last_sent = confirmed


def _unless_orphaned(parent: int, step: Callable[[], None]) -> None:
    """``step``, unless the process that forked this worker is gone: its executor died (``kill -9``,
    a lost node), Spark has given the task to another, and a worker still sending would only add
    copies after the run's end offsets were taken (seen on a cluster: dozens of records)."""
    if os.getppid() != parent:
        raise PublishError("the executor running this task is gone: its retry elsewhere sends these rows")
    step()


def _ignore(error: KafkaError | None, message: Message) -> None:
    """Beacons are best effort: a lost one only delays what outsiders see."""


def publish_partition(
    settings: TaskSettings, totals: TaskTotals | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: publish every (key, value) row of this partition, paced by its plan.

    ``totals`` (accumulators) also receive the counts: Spark applies them once per successful task
    as tasks finish, so they are known on the driver even when the job fails later.
    """
    context = TaskContext.get()
    assert context is not None, "publish_partition runs inside a Spark task"
    partition, attempt, task_id = context.partitionId(), context.attemptNumber(), context.taskAttemptId()
    dead_letters = DeadLetters(settings.dead_letters, target=settings.topic, headers=settings.headers)
    counter = DeliveryCounter(settings.topic, dead_letters)
    reach = BrokerReach()
    transactional = settings.delivery == "transactional"
    kafka = (
        transactional_config(settings.producer, settings.run_id, partition)
        if transactional
        else settings.producer
    )
    config = {**kafka, **FAILURE_REPORTS_ONLY, "on_delivery": counter, "error_cb": reach}
    producer = counter.attach(Producer(config))
    flush = partial(flush_while_reachable, counter, reach=reach, last_confirmed_at=lambda: counter.last_at)
    resumed = 0
    if transactional:
        fence(producer)  # an earlier attempt at this partition can no longer commit
        # attempt 0 of a re-submitted stage may follow one too: every attempt looks
        resumed = committed_rows(
            settings.producer, settings.progress_topic, settings.run_id, partition, since=settings.t0_wall
        )
    timed = None
    if settings.warp is not None:  # one round: its part of the rows is its part of the ceiling
        own = settings.sizes[partition]
        timed = TimedSchedule(own, share=settings.tps * own / max(1, sum(settings.sizes)))
    schedule = timed or partition_schedule(settings.sizes, settings.tps, settings.slots, partition)
    identity = Beacon(
        settings.run_id, partition, attempt, 0, task_id=task_id, resumed=resumed, rows=schedule.rows
    )
    beacons = BeaconEmitter(producer, settings, identity, forced_only=transactional)
    transactions = (
        Transactions(
            producer,
            emit=lambda own, done: beacons.send(own, done=done, poll=counter.poll),
            accepted=lambda: counter.accepted,
        )
        if transactional
        else None
    )
    step = transactions.due if transactions is not None else lambda: beacons.tick(counter.confirmed)
    tick = partial(_unless_orphaned, os.getppid(), step)
    wall_to_clock = wall_to_monotonic()
    t0 = settings.t0_wall + wall_to_clock
    rate = RateFollower.start(settings, t0, wall_to_clock)
    timeline = rate.timeline if rate else shaped_timeline(t0, settings.ramp, ()) if settings.ramp else None
    pacer = Pacer(schedule, t0, sleep=counter.poll, timeline=timeline)
    pacer.resume(resumed)
    budget = byte_budget(settings, partition)
    seen = 0
    try:
        if transactions is None:  # a transactional task's beacons come with its commits
            beacons.tick(0, force=True)
        # Warm the producer before the first deadline: its delivery needs the connection and the
        # idempotent producer id, which would otherwise hold the first records back and release them
        # to the broker together (a burst the pacer never granted).
        flush(BEACON_FLUSH_S)
        for batch in batches:
            seen += batch.num_rows
            if seen > schedule.rows:
                raise PublishError(
                    f"partition {partition} holds more rows than the {schedule.rows} counted before "
                    "publishing: the source changed while the run read it"
                )
            if timed is not None and settings.warp is not None:  # its events' own times, under the ceiling
                timed.extend([settings.warp.at(x) for x in batch.column(OFFSET).to_pylist()])
            committed = resumed - (seen - batch.num_rows)  # rows of this batch a predecessor committed
            if committed >= batch.num_rows:
                continue
            if committed > 0:
                batch = batch.slice(committed)
            if transactions is not None:
                transactions.ensure_begun()
            _publish_batch(producer, settings, batch, pacer, counter, tick, rate, budget)
        if transactions is not None:
            transactions.ensure_begun()  # nothing left to send still ends with a beacon, done
            transactions.commit(done=True)  # delivers every record, with the last beacon, or raises
        while counter.flush(MAX_WAIT_S) > 0:
            counter.raise_if_failed()
            tick()
        counter.raise_if_failed()
        dead_lettered = dead_letters.finish()
        if transactions is None:
            beacons.tick(counter.confirmed, force=True, done=True)
            flush(BEACON_FLUSH_S)
    except BaseException:
        flush(FAILURE_FLUSH_S)  # the last count is then as true as it can be
        dead_letters.abandon()
        if transactions is not None:
            transactions.abort(FAILURE_FLUSH_S)  # no beacon: outside a transaction there is none
        else:
            with contextlib.suppress(BufferError, KafkaException):
                beacons.tick(counter.confirmed, force=True, failed=True)
                flush(BEACON_FLUSH_S)
        raise
    finally:
        if rate is not None:
            rate.close()
    confirmed = resumed + counter.confirmed  # the partition's records on the topic
    if totals is not None:
        totals.confirmed.add(confirmed)
        totals.dead_lettered.add(dead_lettered)
    yield pa.RecordBatch.from_pydict(
        {
            "partition": [partition],
            "attempt": [attempt],
            "task_id": [task_id],
            "confirmed": [confirmed],
            "skipped_s": [pacer.skipped_s],
            "late_start_s": [pacer.late_start_s],
            "bytes_held_s": [budget.held_s if budget is not None else None],
            "dead_lettered": [dead_lettered],
            "first_delivery_at": [counter.first_at],
            "last_delivery_at": [counter.last_at],
            "per_second": [json.dumps(counter.per_second, separators=(",", ":"))],
            "resumed": [resumed],
            "transactions": [transactions.commits if transactions is not None else None],
            "longest_transaction_s": [transactions.longest_s if transactions is not None else None],
        },
        schema=_RESULT_ARROW,
    )


def _publish_batch(
    producer: Producer,
    settings: TaskSettings,
    batch: pa.RecordBatch,
    pacer: Pacer,
    counter: DeliveryCounter,
    tick: Callable[[], None],
    rate: RateFollower | None = None,
    budget: ByteBudget | None = None,
) -> None:
    """Send one Arrow batch as its rows fall due and, with a byte budget, as its bytes fit; each
    granted stretch goes out in one tight loop. ``tick`` between stretches: a beacon when one is
    due, or a transaction's commit."""
    keys: list[Any] = batch.column(0).to_pylist()
    values: list[Any] = batch.column(1).to_pylist()
    event_ids = _optional(batch, EVENT_ID)
    errors = _column(batch, ERROR)
    own = _column(batch, HEADERS)
    originals = _column(batch, ORIGINAL)
    timestamps = _timestamps(batch)
    send = _Sender(producer, settings.topic, settings.headers, counter)
    done, rows = 0, len(keys)
    ends = record_ends(batch, settings.headers) if budget is not None else []
    while done < rows:
        if rate is not None:
            rate.follow(pacer)
        left = limit = rows - done
        if budget is not None:
            now = time.monotonic()
            limit = budget.fitting(ends, done, left, now)
            if limit == 0:  # the next record does not fit: it waits for bytes, due or not
                if pacer.due(now):
                    budget.hold(now)
                counter.poll(min(max(budget.frees_at() - now, 0.001), MAX_WAIT_S))
                counter.raise_if_failed()
                tick()
                continue
        granted = pacer.take(limit)
        if granted:
            end = done + granted
            if budget is not None:
                now = time.monotonic()
                budget.spend(ends[end - 1] - (ends[done - 1] if done else 0), now)
                if granted == limit < left and pacer.due(now):  # the bytes stopped a due one
                    budget.hold(now)
            if errors is None and own is None and originals is None:  # the common case: no branches
                send.plain(keys[done:end], values[done:end], event_ids[done:end], timestamps[done:end])
            else:
                for index in range(done, end):
                    send.one(
                        keys[index],
                        values[index],
                        event_ids[index],
                        timestamps[index],
                        errors[index] if errors is not None else None,
                        own[index] if own is not None else None,
                        originals[index] if originals is not None else None,
                    )
            done = end
            counter.poll(0)
        else:
            pacer.wait(MAX_WAIT_S)
        counter.raise_if_failed()
        tick()


class RateFollower:
    """A task's side of live control: reads its run's changes and bends the pacer's schedule.

    Changes are wall-clock instants (the daemon's); the pacer runs on this task's monotonic clock, so
    they are mapped with the offset ``t0`` was mapped with (``wall_to_clock``). Speeds are relative to
    the planned rate.
    """

    def __init__(
        self,
        feed: ControlFeed,
        *,
        planned_tps: int,
        t0: float,
        wall_to_clock: float,
        changes: tuple[RateChange, ...],
        ramp: Ramp | None = None,
    ) -> None:
        self._feed = feed
        self._planned = planned_tps
        self._t0 = t0
        self._ramp = ramp
        self._wall_to_clock = wall_to_clock
        self.timeline = self._timeline(changes)

    @classmethod
    def start(cls, settings: TaskSettings, t0: float, wall_to_clock: float) -> RateFollower | None:
        """None when the run has no live control (an unthrottled or reconcile run, an older spec)."""
        if settings.control is None or settings.tps == 0:
            return None
        feed = ControlFeed(
            kafka=settings.control_kafka or {}, control=settings.control, run_id=settings.run_id
        )
        return cls(
            feed,
            planned_tps=settings.tps,
            t0=t0,
            wall_to_clock=wall_to_clock,
            changes=settings.control.changes,
            ramp=settings.ramp,
        )

    def _timeline(self, changes: tuple[RateChange, ...]) -> Timeline:
        bends = [
            (change.at + self._wall_to_clock, 0.0 if change.paused else change.tps / self._planned)
            for change in changes
        ]
        return shaped_timeline(self._t0, self._ramp, bends)

    def follow(self, pacer: Pacer) -> None:
        """Look for a change (cheap: at most every ``POLL_EVERY_S``) and apply it to ``pacer``."""
        changes = self._feed.poll()
        if changes is not None:
            self.timeline = self._timeline(changes)
            pacer.retime(self.timeline)

    def close(self) -> None:
        self._feed.close()


def wall_to_monotonic(
    reads: int = 5,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> float:
    """What to add to a wall-clock time for the same instant on ``time.monotonic()``.

    Read between two monotonic reads, the tightest pair of a few: a task descheduled between two
    reads would otherwise map every instant early or late by as long as it was away."""
    best, offset = math.inf, 0.0
    for _ in range(reads):
        before = monotonic()
        wall = wall_clock()
        after = monotonic()
        if after - before < best:
            best, offset = after - before, (before + after) / 2 - wall
    return offset


def shaped_timeline(t0: float, ramp: Ramp | None, bends: Sequence[tuple[float, float]]) -> Timeline:
    """The schedule's clock: the live changes' speeds (``bends``), under the run's ramp when it has one."""
    if ramp is None:
        return Timeline.of(t0, bends)
    return Timeline.of(t0, ramped(t0, ramp.seconds, ramp.start, bends))


class _Sender:
    """``produce()`` for a stretch of rows: the per-row work is one call, its headers and its report.

    Each record's header list is built as it is sent and dropped right after (no list per row kept
    for the whole batch: fewer objects alive, fewer garbage-collector passes).
    """

    def __init__(
        self, producer: Producer, topic: str, appended: list[Header], counter: DeliveryCounter
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.appended = appended
        self.counter = counter
        self.report = counter.report
        self.dead_letters = counter.dead_letters

    def plain(self, keys: list[Any], values: list[Any], event_ids: list[Any], timestamps: list[int]) -> None:
        produce, topic, appended, report = self.producer.produce, self.topic, self.appended, self.report
        accepted = 0
        try:
            for key, value, event_id, stamp in zip(keys, values, event_ids, timestamps, strict=True):
                try:
                    produce(
                        topic,
                        value,
                        key,
                        headers=[*appended, (EVENT_ID_HEADER, event_id)],
                        timestamp=stamp,
                        on_delivery=partial(report, event_id),
                    )
                    accepted += 1
                except (BufferError, KafkaException, TypeError, ValueError):
                    self.one(key, value, event_id, stamp, None, None, None)  # counts its own
        finally:
            self.counter.accepted += accepted

    def one(
        self,
        key: Any,
        value: Any,
        event_id: str | None,
        stamp: int,
        error: str | None,
        own: list[dict[str, Any]] | None,
        original: bytes | None,
    ) -> None:
        """One record, with every case: marked bad before, its own headers, a full queue, a refusal.

        A dead letter carries ``original`` when there is one: the value before decryption."""
        dead_letters = self.dead_letters
        parked = original if original is not None else value
        if error is not None and dead_letters is not None:  # marked by a step before
            dead_letters.set_aside(BadRecord(key, parked, event_id, error))
            return
        headers = [(header["name"], header["value"]) for header in own or ()]
        headers += [*self.appended, (EVENT_ID_HEADER, event_id)]
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    key,
                    headers=headers,
                    timestamp=stamp,
                    on_delivery=partial(self.report, event_id, original=original),
                )
                self.counter.accepted += 1
                return
            except BufferError:  # local queue full: serve reports, then retry
                self.counter.poll(MAX_WAIT_S)
            except (KafkaException, TypeError, ValueError) as exc:  # refused at produce()
                reason = bad_record_of(exc, key, value)
                if reason is None or dead_letters is None:
                    raise
                dead_letters.set_aside(BadRecord(key, parked, event_id, reason))
                return


def byte_budget(settings: TaskSettings, partition: int) -> ByteBudget | None:
    """This task's part of ``max_bytes_per_s``: its rows' share of its round, like its event share."""
    if settings.max_bytes_per_s is None or settings.tps == 0:
        return None
    slots = settings.slots
    first = partition - partition % slots
    round_rows = sum(settings.sizes[first : first + slots])
    own = settings.sizes[partition]
    if own == 0:
        return None
    return ByteBudget(settings.max_bytes_per_s * own / round_rows)


def record_ends(batch: pa.RecordBatch, headers: Sequence[Header]) -> list[int]:
    """Running totals of the batch's record sizes: key, value and header bytes (the event id header
    and ``headers``, which every record carries), as the producer is handed them."""
    fixed = len(EVENT_ID_HEADER) + sum(len(name) + len(value or b"") for name, value in headers)
    sizes = pc.add(
        pc.fill_null(pc.binary_length(batch.column(0)), 0), pc.fill_null(pc.binary_length(batch.column(1)), 0)
    )
    index = batch.schema.get_field_index(EVENT_ID)
    if index >= 0:
        sizes = pc.add(sizes, pc.fill_null(pc.binary_length(batch.column(index)), 0))
    return list(itertools.accumulate(size + fixed for size in sizes.to_pylist()))


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    """An optional column's values, or None when the batch has no such column."""
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _optional(batch: pa.RecordBatch, name: str) -> list[Any]:
    """An optional column's values, or ``None`` for every row when the batch has no such column."""
    index = batch.schema.get_field_index(name)
    return [None] * batch.num_rows if index < 0 else batch.column(index).to_pylist()


def _timestamps(batch: pa.RecordBatch) -> list[int]:
    """Each record's timestamp in epoch ms (``timestamp=event``); 0 lets the producer stamp "now"."""
    index = batch.schema.get_field_index(TIMESTAMP)
    if index < 0:
        return [0] * batch.num_rows
    return [stamp or 0 for stamp in batch.column(index).to_pylist()]

"""Progress beacons: confirmed counts observable from outside the job while it runs.

A task that paces for an hour cannot report through Spark until it ends, so every task emits a
small JSON beacon ``{run_id, partition, attempt, confirmed, done, at, rows}`` (key = run id) to the
progress topic at least every ``progress.interval_s`` and once more when it ends; ``at`` is when the
beacon was emitted (epoch seconds), so a reader computes rates from the beacons' own clock, never
from its polling clock (older beacons lack it: None). Anyone (the daemon, the
driver after a failure) can rebuild the confirmed total with ``aggregate``: per partition the
highest attempt's latest count wins, so a retry that re-publishes a partition never inflates it.

    with ProgressReader(kafka={"bootstrap.servers": ...}, topic="replay.progress", run_id="r-42") as r:
        r.read().confirmed

The progress topic is shared by every run, so a reader given ``since`` (when the run was submitted)
starts each partition at the first beacon sent after that instant less ``CLOCK_MARGIN_S`` (found
with the broker's time index), not at the topic's beginning: what it reads grows with the runs
going on meanwhile, never with the topic's history.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from types import TracebackType

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from spark_job.kafka_conf import client_config
from spark_job.spec.model import KafkaValue

# Beacons carry the executors' clock, ``since`` the daemon's: the margin covers their skew (and a
# launcher that records the submission a little after the job started).
CLOCK_MARGIN_S = 300.0

AttemptId = tuple[int, int]  # (partition, Spark task id): task ids grow, so a retry sorts after


@dataclass(frozen=True)
class Beacon:
    run_id: str
    partition: int
    attempt: int
    confirmed: int
    done: bool = False
    failed: bool = False
    task_id: int = 0  # Spark's taskAttemptId: unique in the application, later attempts are higher
    at: float | None = None  # epoch seconds when the task emitted it (None: a beacon from before)
    # delivery=transactional: the partition's records earlier attempts committed, which this one
    # resumed after (its own ``confirmed`` come on top); 0 for an idempotent run
    resumed: int = 0
    rows: int | None = None  # the partition's rows, counted before publishing (None: a beacon from before)

    @property
    def partition_total(self) -> int:
        """The partition's records on the topic as this attempt counts them: resumed, then its own."""
        return self.resumed + self.confirmed

    @property
    def attempt_id(self) -> AttemptId:
        return (self.partition, self.task_id)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Beacon:
        fields = json.loads(data)
        return cls(**{key: fields[key] for key in cls.__dataclass_fields__ if key in fields})


def latest_per_attempt(beacons: Iterable[Beacon]) -> dict[AttemptId, Beacon]:
    """The furthest beacon of every attempt (counts only grow within an attempt)."""
    latest: dict[AttemptId, Beacon] = {}
    for beacon in beacons:
        keep_furthest(latest, beacon)
    return latest


def keep_furthest(latest: dict[AttemptId, Beacon], beacon: Beacon) -> None:
    """Fold ``beacon`` into ``latest`` (`latest_per_attempt`'s step)."""
    seen = latest.get(beacon.attempt_id)
    further = seen is None or (beacon.confirmed, beacon.done, beacon.failed) > (
        seen.confirmed,
        seen.done,
        seen.failed,
    )
    if further:
        latest[beacon.attempt_id] = beacon


def newest_per_partition(beacons: Iterable[Beacon]) -> dict[int, Beacon]:
    """For each partition, the highest attempt's latest beacon."""
    newest: dict[int, Beacon] = {}
    for beacon in latest_per_attempt(beacons).values():
        seen = newest.get(beacon.partition)
        if seen is None or beacon.attempt_id > seen.attempt_id:
            newest[beacon.partition] = beacon
    return newest


def aggregate(beacons: Iterable[Beacon]) -> int:
    """Confirmed total: for each partition, the highest attempt's latest count (with what it resumed
    after, when an earlier attempt's transactions were committed)."""
    return sum(beacon.partition_total for beacon in newest_per_partition(beacons).values())


def duplicates_possible(beacons: Iterable[Beacon], succeeded: Collection[AttemptId] | None = None) -> int:
    """Records confirmed by attempts that did not succeed: a retry (or a re-run) sends them again.

    ``succeeded`` names the attempts whose results Spark kept. Without it (a run still going), the
    lost attempts are those that reported a failure or were superseded by a later attempt. A
    transactional retry resumes after what its predecessors committed (``resumed``), so those
    records are not sent twice: only a partition's lost records beyond that count.
    """
    beacons = list(beacons)
    latest = latest_per_attempt(beacons)
    if succeeded is None:
        newest: dict[int, int] = {}
        for partition, task_id in latest:
            newest[partition] = max(task_id, newest.get(partition, task_id))
        lost = [b for b in latest.values() if b.failed or b.task_id < newest[b.partition]]
    else:
        lost = [beacon for attempt, beacon in latest.items() if attempt not in succeeded]
    resumed = {partition: beacon.resumed for partition, beacon in newest_per_partition(beacons).items()}
    per_partition: dict[int, int] = {}
    for beacon in lost:
        per_partition[beacon.partition] = per_partition.get(beacon.partition, 0) + beacon.confirmed
    return sum(max(0, count - resumed.get(partition, 0)) for partition, count in per_partition.items())


@dataclass(frozen=True)
class Snapshot:
    confirmed: int
    partitions_done: int
    beacons: int
    at: float | None = None  # when the newest beacon was sent (the job's clock); None: none had a time


class ProgressReader:
    """Follows one run's beacons from the progress topic; ``read()`` catches up to the current end."""

    def __init__(
        self,
        *,
        kafka: Mapping[str, KafkaValue],
        topic: str,
        run_id: str,
        since: float | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """``since``: epoch seconds no beacon of the run predates (None: read the topic from its
        beginning). ``logger`` receives librdkafka's own log lines (else they go to stderr)."""
        self._topic = topic
        self._key = run_id.encode()
        self._since = since
        config = {
            **client_config(kafka),
            "group.id": f"replay-progress-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
        }
        # Beacons are read committed: a transactional task's come with its records or not at all
        # (ADR 0057). The end to read to is the high watermark, which only a read-uncommitted query
        # answers (read committed, it is the oldest open transaction's start: a beacon past it would
        # be left out).
        committed = {**config, "isolation.level": "read_committed"}
        whole = {**config, "isolation.level": "read_uncommitted"}
        self._consumer = Consumer(committed, logger=logger) if logger else Consumer(committed)
        self._watermarks = Consumer(whole, logger=logger) if logger else Consumer(whole)
        self._positions: dict[int, int] | None = None
        self._started: dict[int, int] = {}
        # Only each attempt's furthest beacon is kept (all any reader of them asks): a run of days
        # sends one per attempt and second, and a daemon reads them every tick.
        self._latest: dict[AttemptId, Beacon] = {}
        self._beacons_read = 0
        self._newest_at: float | None = None
        self._messages_read = 0

    def __enter__(self) -> ProgressReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()
        self._watermarks.close()

    def beacons(self) -> list[Beacon]:
        """Each attempt's furthest beacon (`latest_per_attempt` of every beacon read)."""
        return list(self._latest.values())

    @property
    def started_at_offsets(self) -> dict[int, int]:
        """Where reading began, per partition (empty until the topic was found)."""
        return dict(self._started)

    @property
    def messages_read(self) -> int:
        """Messages consumed so far, every run's: the cost of following this one."""
        return self._messages_read

    def read(self, timeout_s: float = 10.0) -> Snapshot:
        """Consume everything published so far; ``TimeoutError`` if the end is not reached in time."""
        if self._positions is None and not self._assign(timeout_s):
            return self.snapshot()
        assert self._positions is not None
        ends: dict[int, int] = {}
        for partition, position in self._positions.items():
            low, high = self._watermarks.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=timeout_s, cached=False
            )
            self._positions[partition] = max(position, low)  # retention may have removed the oldest
            ends[partition] = high
        deadline = time.monotonic() + timeout_s
        while any(self._positions[p] < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"progress topic '{self._topic}' not read to its end within {timeout_s}s")
            for message in self._consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is not None:
                    raise KafkaException(message.error())
                where, offset, value = message.partition(), message.offset(), message.value()
                if where is None or offset is None:
                    continue  # only error events lack a position, and an error raised above
                self._positions[where] = offset + 1
                self._messages_read += 1
                if message.key() == self._key and value is not None:
                    self._keep(Beacon.decode(value))
            self._step_over_markers(ends)
        return self.snapshot()

    def _step_over_markers(self, ends: Mapping[int, int]) -> None:
        """A transaction's marker takes an offset no message is delivered for (a transactional run's
        beacons end with one): the consumer's position is past it, the last message read is not."""
        positions = self._positions
        assert positions is not None, "assigned before reading"
        short = [p for p, end in ends.items() if positions[p] < end]
        if short:
            for tp in self._consumer.position([TopicPartition(self._topic, p) for p in short]):
                positions[tp.partition] = max(positions[tp.partition], tp.offset)

    def _keep(self, beacon: Beacon) -> None:
        keep_furthest(self._latest, beacon)
        self._beacons_read += 1
        if beacon.at is not None and (self._newest_at is None or beacon.at > self._newest_at):
            self._newest_at = beacon.at

    def snapshot(self) -> Snapshot:
        latest = self._latest.values()
        return Snapshot(
            confirmed=aggregate(latest),
            partitions_done=len({beacon.partition for beacon in latest if beacon.done}),
            beacons=self._beacons_read,
            at=self._newest_at,
        )

    def _assign(self, timeout_s: float) -> bool:
        metadata = self._consumer.list_topics(topic=self._topic, timeout=timeout_s)
        found = metadata.topics.get(self._topic)
        if found is None or found.error is not None:
            return False  # not created yet: nothing published
        partitions = sorted(found.partitions)
        if self._since is None:
            self._positions = {partition: 0 for partition in partitions}
            self._consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        else:
            self._positions = self._offsets_since(partitions, self._since - CLOCK_MARGIN_S, timeout_s)
            self._consumer.assign([TopicPartition(self._topic, p, o) for p, o in self._positions.items()])
        self._started = dict(self._positions)
        return True

    def _offsets_since(self, partitions: list[int], since: float, timeout_s: float) -> dict[int, int]:
        """Per partition, the first offset whose timestamp is at or after ``since``; the end of a
        partition with none. Each end is read *before* the time lookup: a beacon appended between
        the two is then at or past that end, never skipped."""
        ends = {
            partition: self._watermarks.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=timeout_s, cached=False
            )[1]
            for partition in partitions
        }
        wanted = [TopicPartition(self._topic, p, int(since * 1000)) for p in partitions]
        found = self._consumer.offsets_for_times(wanted, timeout=timeout_s)
        for answer in found:
            if answer.error is not None:
                raise KafkaException(answer.error)
        return {tp.partition: tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in found}

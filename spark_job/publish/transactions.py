"""``delivery=transactional``: a task's records in Kafka transactions, its progress committed with them.

The idempotent producer cannot absorb a retried task: a new attempt is a new producer session, so it
sends its partition again and a live topic holds duplicates (counted, not absent). Here each task's
producer has a ``transactional.id`` derived from the run and the partition (``transactional_id``), so
a retry's ``init_transactions`` fences its predecessor and aborts the transaction it left open.

Every transaction ends with a beacon (``spark_job.progress``) carrying how many of the partition's
records are committed, written to the progress topic *inside* the transaction: the count and the
records become visible together or not at all. A retry reads the last committed beacon of its
partition (``committed_rows``) and resumes after that many rows of the partition's deterministic
order (the job sorts each partition by event id), instead of sending the partition again. A
transaction is committed once ``interval_s`` has passed since it began (about a second of events),
so a retry repeats at most what was uncommitted, and a consumer reading committed waits about that
long for each record. See docs/decisions/0057-exactly-once-delivery.md.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from spark_job.errors import PublishError
from spark_job.kafka_conf import client_config
from spark_job.progress import CLOCK_MARGIN_S, Beacon
from spark_job.spec.model import KafkaValue

COMMIT_INTERVAL_S = 1.0  # at most about this much of a task's events in one transaction
# A dead attempt's open transaction is aborted by the broker after this (librdkafka wants it no
# shorter than a record's delivery timeout, which then sets it), or at once by its retry's fencing.
TRANSACTION_TIMEOUT_MS = 60_000
INIT_TIMEOUT_S = 30.0
COMMIT_TIMEOUT_S = 60.0
# A retry reads its partition's last commit: siblings' open transactions hold the committed end back
# for up to their commit interval, a dead sibling's for up to the transaction timeout.
CHECKPOINT_READ_S = 180.0
TRANSACTION_STATE_LOG = "__transaction_state"


def transactional_id(run_id: str, partition: int) -> str:
    """The same for every attempt at one partition of one run: a retry fences the one before it."""
    return f"replay-{run_id}-p{partition}"


def transactional_config(
    producer: Mapping[str, KafkaValue], run_id: str, partition: int
) -> dict[str, KafkaValue]:
    delivery_ms = max(int(producer.get(name, 0)) for name in ("message.timeout.ms", "delivery.timeout.ms"))
    return {
        **producer,
        "transactional.id": transactional_id(run_id, partition),
        "transaction.timeout.ms": max(TRANSACTION_TIMEOUT_MS, delivery_ms),
    }


def read_committed(kafka: Mapping[str, KafkaValue]) -> dict[str, KafkaValue]:
    """Client settings that see only committed records: what a transactional run is reconciled with."""
    return {**kafka, "isolation.level": "read_committed"}


class Transactions:
    """One task's transactions, after ``fence``: ``ensure_begun`` before rows are sent, ``due`` commits
    each one once it has lasted ``interval_s`` and begins the next, ``commit(done=True)`` ends the last.

    ``emit(own, done)`` writes the task's beacon into the open transaction just before its commit,
    ``own`` being every record this attempt handed to the producer: the commit either delivers all
    of them or raises.
    """

    def __init__(
        self,
        producer: Producer,
        emit: Callable[[int, bool], None],
        accepted: Callable[[], int],
        *,
        interval_s: float = COMMIT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._producer = producer
        self._emit = emit
        self._accepted = accepted
        self._interval_s = interval_s
        self._clock = clock
        self._began: float | None = None
        self.commits = 0
        self.longest_s = 0.0  # the longest a transaction stayed open, commit included

    def begin(self) -> None:
        self._producer.begin_transaction()
        self._began = self._clock()

    def ensure_begun(self) -> None:
        """Begin, unless one is open: the first only once there is a row to send, so no transaction
        waits open on the partition's sort or on rows a predecessor already committed."""
        if self._began is None:
            self.begin()

    def due(self) -> None:
        """Commit, and begin the next, once the open transaction has lasted ``interval_s``."""
        if self._began is not None and self._clock() - self._began >= self._interval_s:
            self.commit()
            self.begin()

    def commit(self, *, done: bool = False) -> None:
        assert self._began is not None, "a transaction is open"
        own = self._accepted()
        self._emit(own, done)
        self._producer.commit_transaction(COMMIT_TIMEOUT_S)
        self.longest_s = max(self.longest_s, self._clock() - self._began)
        self._began = None
        self.commits += 1

    def abort(self, timeout_s: float) -> None:
        """Best effort on the way out of a failed task: readers of committed data move on at once
        instead of waiting for the broker's timeout (a fenced producer cannot abort: nothing to do)."""
        if self._began is None:
            return
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(timeout_s)
        self._began = None


def refusal(live_brokers: int, factors: list[int | None]) -> str | None:
    """Why no transaction can start on a cluster that has no transaction log yet; None when that is
    not certain.

    The transaction coordinator creates its log on first use, with its broker's
    ``transaction.state.log.replication.factor``: with fewer live brokers than that it cannot, and
    every ``init_transactions`` waits out its timeout. ``factors`` is each live broker's setting;
    one unknown (no right to read a broker's config) or any broker that could create the log leaves
    it to each task's own ``fence``, whose timeout says the same later."""
    if not factors or any(factor is None for factor in factors):
        return None
    least = min(factor for factor in factors if factor is not None)
    if least <= live_brokers:
        return None
    count = f"{live_brokers} live broker" + ("" if live_brokers == 1 else "s")
    return (
        "the Kafka cluster cannot start a transaction now: it has no transaction log "
        f"({TRANSACTION_STATE_LOG}) yet, its brokers' transaction.state.log.replication.factor is "
        f"{least} and it has {count}; replay with delivery=idempotent or fix the brokers' settings"
    )


def require_transactions(kafka: Mapping[str, KafkaValue], *, timeout_s: float = 15.0) -> None:
    """On the driver, before the publishing tasks: refuse at once a cluster that says it has no
    transaction log and cannot make one (``refusal``), rather than have every task wait
    ``INIT_TIMEOUT_S`` per attempt to learn it. Only the cluster's own "no such topic" counts as
    missing: a log hidden from this client (ACLs) or any error is no reason to refuse."""
    admin = AdminClient({**client_config(kafka), "allow.auto.create.topics": False})
    try:
        metadata = admin.list_topics(topic=TRANSACTION_STATE_LOG, timeout=timeout_s)
    except KafkaException:
        return  # unreachable: the topic checks beside this one say so in their own words
    log_topic = metadata.topics.get(TRANSACTION_STATE_LOG)
    error = None if log_topic is None else log_topic.error
    if error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART or not metadata.brokers:
        return
    reason = refusal(len(metadata.brokers), _log_factors(admin, list(metadata.brokers), timeout_s))
    if reason is not None:
        raise PublishError(reason)


def _log_factors(admin: AdminClient, brokers: list[int], timeout_s: float) -> list[int | None]:
    """Each broker's ``transaction.state.log.replication.factor``; None where it cannot be read."""
    resources = [ConfigResource(ConfigResource.Type.BROKER, str(broker)) for broker in brokers]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout_s)
    except KafkaException:
        return [None]
    factors: list[int | None] = []
    for future in futures.values():
        try:
            entry = future.result().get("transaction.state.log.replication.factor")
            factors.append(int(entry.value) if entry is not None and entry.value else None)
        except (KafkaException, ValueError):
            factors.append(None)
    return factors


def fence(producer: Producer) -> None:
    """``init_transactions``: fences any earlier attempt at this partition and aborts what it left
    open. A cluster that cannot serve transactions answers here, and the reason says so."""
    try:
        producer.init_transactions(INIT_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in (
            KafkaError._TIMED_OUT,
            KafkaError.COORDINATOR_NOT_AVAILABLE,
        ):
            raise PublishError(
                f"the Kafka cluster did not start a transaction in {INIT_TIMEOUT_S:.0f}s ({error.str()}): "
                "its brokers may not accept transactions (transaction.state.log.replication.factor "
                "above the brokers' count, or transaction.state.log.min.isr not met); "
                "replay with delivery=idempotent or fix the brokers' settings"
            ) from exc
        raise


def committed_rows(
    kafka: Mapping[str, KafkaValue],
    topic: str,
    run_id: str,
    partition: int,
    *,
    since: float,
    timeout_s: float = CHECKPOINT_READ_S,
) -> int:
    """How many of ``partition``'s rows earlier attempts committed: the largest count among the run's
    committed beacons for it (0 when none).

    Read up to the high watermarks taken now, i.e. after this attempt fenced its predecessor: every
    transaction the predecessor committed lies below them. First every beacon, committed or not, which
    costs no wait: a first attempt finds none of its partition and starts at 0 at once. Otherwise
    again with ``read_committed`` up to the same high watermarks (not the committed end, which stops
    at the oldest open transaction: a sibling's, or another run's), so that read waits while a
    transaction open below them ends (about a second), following the consumer's position, which
    steps over the transactions' markers.
    """
    seen, ends = _largest(kafka, topic, run_id, partition, since, "read_uncommitted", None, timeout_s)
    if seen is None:
        return 0
    committed, _ = _largest(kafka, topic, run_id, partition, since, "read_committed", ends, timeout_s)
    return committed or 0


def _largest(
    kafka: Mapping[str, KafkaValue],
    topic: str,
    run_id: str,
    partition: int,
    since: float,
    isolation: str,
    ends: dict[int, int] | None,
    timeout_s: float,
) -> tuple[int | None, dict[int, int]]:
    """The largest partition total among the run's beacons for ``partition`` that a consumer reading
    with ``isolation`` sees below ``ends`` (None: the high watermarks now, read uncommitted), and the
    ends it read to; None when it sees none."""
    consumer = Consumer(
        {
            **client_config(kafka),
            "isolation.level": isolation,
            "group.id": f"replay-checkpoint-{uuid.uuid4().hex}",  # assign() only: never joins or commits
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
        }
    )
    key = run_id.encode()
    best: int | None = None
    try:
        found = consumer.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
        if found is None or found.error is not None:
            return None, {}  # no beacon was ever written
        partitions = sorted(found.partitions)
        if ends is None:  # read uncommitted, a watermark query answers the high watermark itself
            assert isolation == "read_uncommitted", "the high watermarks come from an uncommitted read"
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s, cached=False)[
                    1
                ]
                for p in partitions
            }
        wanted = [TopicPartition(topic, p, int((since - CLOCK_MARGIN_S) * 1000)) for p in partitions]
        starts = {
            tp.partition: tp.offset if tp.offset >= 0 else ends.get(tp.partition, 0)
            for tp in consumer.offsets_for_times(wanted, timeout=timeout_s)
        }
        left = [p for p in partitions if starts[p] < ends.get(p, 0)]
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in left])
        deadline = time.monotonic() + timeout_s
        while left:
            positions = consumer.position([TopicPartition(topic, p) for p in left])
            left = [tp.partition for tp in positions if tp.offset < ends[tp.partition]]
            if not left:
                break
            if time.monotonic() > deadline:
                raise PublishError(
                    f"the committed progress of partition {partition} was not read from topic "
                    f"'{topic}' within {timeout_s:.0f}s: a transaction there stayed open, or the "
                    "topic holds too much to read in that time"
                )
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is not None:
                    raise KafkaException(message.error())
                value = message.value()
                if message.key() != key or value is None:
                    continue
                beacon = Beacon.decode(value)
                if beacon.partition == partition:
                    best = max(best or 0, beacon.partition_total)
        return best, ends
    finally:
        consumer.close()

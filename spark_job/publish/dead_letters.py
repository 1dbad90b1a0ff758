"""Records that cannot be published: set aside on the run's dead-letter topic, or the run's reason to fail.

A record is *bad* when the fault is its own, not the broker's: too large for the topic's
``max.message.bytes`` (refused by the broker in its delivery report, or by the producer at
``produce()``), not encodable, or not decryptable (a step before the publisher marks such a row).
Any other delivery error (timeout, broker down, authorization) fails the run whatever ``on_error``.

With ``on_error=dlq`` a bad record goes to the dead-letter topic with its key and value as they
were, the target's headers, and ``replay-error`` / ``replay-event-id`` / ``replay-topic``. It counts
as dead-lettered only once the broker confirmed that copy, so every record of a successful task is
either confirmed or dead-lettered (docs/rules.md rule 1): ``confirmed + dead_lettered == rows_selected``.
With ``on_error=fail`` the first bad record fails the task and the reason names its event id.

A dead letter holds what the source held, never more: a decrypted record is set aside with its
value as read (``publisher.ORIGINAL``, PII still encrypted), and the topic keeps each one for the
platform's retention (the spec's ``dlq_retention_ms``) from the moment the broker appended it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from spark_job.errors import PublishError
from spark_job.publish.topics import ensure_topic, set_topic_config
from spark_job.spec.model import KafkaValue

OnError = Literal["fail", "dlq"]
DeadLetterHeader = tuple[str, str | bytes | None]  # as confluent-kafka takes it
# Delivery errors that are the record's own fault; anything else is the broker's or the network's.
BAD_RECORD_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError._KEY_SERIALIZATION,
        KafkaError._VALUE_SERIALIZATION,
    }
)
# The dead-letter topic takes what the target refused for its size: its limit, and its producer's.
DEAD_LETTER_MAX_BYTES = 16 * 1024 * 1024
DEAD_LETTER_FLUSH_S = 30.0


@dataclass(frozen=True)
class BadRecord:
    key: bytes | None
    value: bytes | None
    event_id: str | None
    reason: str  # never the value: it may hold what the row was protecting


class BadRecordError(PublishError):
    """``on_error=fail``: the first record that could not be published, named by its event id."""

    def __init__(self, record: BadRecord, topic: str) -> None:
        event = f"event '{record.event_id}'" if record.event_id is not None else "a record (no event id)"
        super().__init__(f"{event} cannot be published to topic '{topic}': {record.reason}")
        self.record = record


@dataclass(frozen=True)
class DeadLetterPlan:
    """The run's choice for bad records, decided on the driver and shipped with the task closure."""

    on_error: OnError = "fail"
    topic: str | None = None  # required with "dlq"
    producer: Mapping[str, KafkaValue] = field(default_factory=dict)


def kafka_reason(error: KafkaError) -> str:
    """The broker's (or librdkafka's) own words, with the error's name: what ``replay-error`` says."""
    return f"{error.str()} ({error.name()})"


def is_bad_record(error: KafkaError) -> bool:
    return error.code() in BAD_RECORD_CODES


def bad_record_of(exc: Exception, key: object, value: object) -> str | None:
    """The reason ``produce()`` refused one record for the record's own sake; None for anything else.

    A type error is the record's only when its key or value is not bytes: any other is a bug of
    ours (headers, arguments), which must fail the run rather than set every record aside.
    """
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return kafka_reason(exc.args[0]) if is_bad_record(exc.args[0]) else None
    encodable = all(isinstance(part, bytes | str | None) for part in (key, value))
    if isinstance(exc, TypeError | ValueError) and not encodable:
        return f"not encodable: {type(exc).__name__}: {exc}"
    return None


def dead_letter_topic_config(retention_ms: int | None) -> dict[str, str]:
    """Large enough for what the target refused and, with ``retention_ms``, kept no longer than that
    from the moment the broker took it (``LogAppendTime``: a record's own old timestamp must not
    shorten its stay, nor a future one lengthen it)."""
    config = {"max.message.bytes": str(DEAD_LETTER_MAX_BYTES + 64 * 1024)}
    if retention_ms is not None:
        config |= {
            "retention.ms": str(retention_ms),
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete",
        }
    return config


def ensure_dead_letter_topic(kafka: Mapping[str, KafkaValue], topic: str, retention_ms: int | None) -> None:
    """Create the dead-letter topic unless it exists, then set its config: a topic made before (by an
    older version, or by hand) is brought to the platform's retention before any record goes there."""
    config = dead_letter_topic_config(retention_ms)
    ensure_topic(kafka, topic, config=config)
    if retention_ms is not None:
        set_topic_config(kafka, topic, config)


class DeadLetters:
    """One task's bad records: sent to the dead-letter topic (``dlq``) or kept as its failure (``fail``).

    ``set_aside`` may be called from the target producer's delivery callback, so it never raises:
    the publisher calls ``raise_if_failed`` between batches and ``finish`` before the task ends.
    """

    def __init__(self, plan: DeadLetterPlan, *, target: str, headers: list[DeadLetterHeader]) -> None:
        if plan.on_error == "dlq" and not plan.topic:
            raise PublishError("on_error=dlq needs a dead-letter topic")
        self._plan = plan
        self._target = target
        self._headers = headers
        self._producer: Producer | None = None
        self.first_bad: BadRecord | None = None
        self.confirmed = 0
        self._failed = 0
        self._first_error: KafkaError | None = None

    @property
    def keeps(self) -> bool:
        """True when bad records are set aside (``dlq``), False when the first one fails the run."""
        return self._plan.on_error == "dlq"

    def set_aside(self, record: BadRecord) -> None:
        if self.first_bad is None:
            self.first_bad = record
        if not self.keeps:
            return
        if self._producer is None:
            config = {**self._plan.producer, "message.max.bytes": DEAD_LETTER_MAX_BYTES}
            self._producer = Producer({**config, "on_delivery": self._delivered})
        headers: list[DeadLetterHeader] = [
            *self._headers,
            ("replay-error", record.reason.encode()),
            ("replay-event-id", (record.event_id or "").encode()),
            ("replay-topic", self._target.encode()),
        ]
        topic = self._plan.topic or ""
        while True:
            try:
                self._producer.produce(topic, record.value, record.key, headers=headers)
                break
            except BufferError:
                self._producer.poll(0.1)
            except KafkaException as exc:  # even the dead-letter topic cannot take it: a failure
                self._failed += 1
                self._first_error = self._first_error or exc.args[0]
                break
        self._producer.poll(0)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.confirmed += 1
            return
        self._failed += 1
        self._first_error = self._first_error or error

    def raise_if_failed(self) -> None:
        """``fail``: the first bad record; ``dlq``: a copy the dead-letter topic refused."""
        if self.first_bad is not None and not self.keeps:
            raise BadRecordError(self.first_bad, self._target)
        if self._first_error is not None:
            raise PublishError(
                f"{kafka_reason(self._first_error)}: {self._failed} record(s) to dead-letter topic "
                f"'{self._plan.topic}' were not confirmed by the broker"
            )

    def finish(self) -> int:
        """Wait for every dead-letter copy's report; returns how many the broker confirmed."""
        if self._producer is not None:
            self._producer.flush(DEAD_LETTER_FLUSH_S)
            if len(self._producer):
                raise PublishError(
                    f"{len(self._producer)} record(s) to dead-letter topic '{self._plan.topic}' unconfirmed"
                )
        self.raise_if_failed()
        return self.confirmed

    def abandon(self) -> None:
        """On the way out of a failed task: let in-flight copies land, briefly."""
        if self._producer is not None:
            self._producer.flush(3.0)

"""`KafkaDeadLetters`: a run's dead letters, read back from its source's dead-letter topic for its page.

The topic is the source's (`replay.dlq.<source>`, every run's together): the run's letters are the
records whose `replay-run-id` header names it. The scan reads every partition from its start to the
end it had when asked, within a time budget, and keeps the first `limit` letters of the run; the
page says how many the run set aside in all (the job's own count), so a cut list is never taken for
the whole one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from daemon.core.errors import Unavailable
from daemon.usecases.ports import DeadLetter, DeadLetters

SCAN_BUDGET_S = 5.0


class KafkaDeadLetters(DeadLetters):
    def __init__(self, *, config: Mapping[str, str], budget_s: float = SCAN_BUDGET_S) -> None:
        self._config = dict(config)
        self._budget_s = budget_s

    def of_run(self, topic: str, run_id: str, *, limit: int) -> list[DeadLetter]:
        consumer = Consumer(
            {
                **self._config,
                "group.id": f"replayd-pages-{uuid.uuid4().hex}",  # assigned, never joins nor commits
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        try:
            return self._scan(consumer, topic, run_id.encode(), limit)
        except KafkaException as exc:
            raise Unavailable(f"the dead-letter topic '{topic}' could not be read: {exc}") from exc
        finally:
            consumer.close()

    def _scan(self, consumer: Consumer, topic: str, run_id: bytes, limit: int) -> list[DeadLetter]:
        metadata = consumer.list_topics(topic, timeout=self._budget_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []  # no letter was ever set aside for this source
        ends: dict[int, int] = {}
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self._budget_s
            )
            if high > low:
                ends[partition] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        letters: list[DeadLetter] = []
        deadline = time.monotonic() + self._budget_s
        while ends and len(letters) < limit and time.monotonic() < deadline:
            record = consumer.poll(0.2)
            if record is None or record.error() is not None:
                continue
            partition, offset = record.partition(), record.offset()
            if partition is None or offset is None:
                continue
            if offset + 1 >= ends.get(partition, 0):
                ends.pop(partition, None)
            headers = dict(record.headers() or [])
            if headers.get("replay-run-id") != run_id:
                continue
            stamp = record.timestamp()[1]
            letters.append(
                DeadLetter(
                    event_id=_text(headers.get("replay-event-id")),
                    reason=_text(headers.get("replay-error")),
                    at=datetime.fromtimestamp(stamp / 1000, tz=UTC) if stamp > 0 else None,
                    partition=partition,
                    offset=offset,
                )
            )
        return letters


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value or ""

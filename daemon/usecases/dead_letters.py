"""Where a run's bad records go: its ``on_error`` (the request's, else the source's default) and topic.

A record that cannot be published (too large for the topic, not encodable, not decryptable) fails
the run with ``on_error=fail``; with ``dlq`` it is set aside on the source's dead-letter topic, one
per source (``replay.dlq.<source>``), its records telling runs apart by their ``replay-run-id``
header. The job creates the topic when it is missing. Both choices are recorded in the run's
options when it is created, so a later change to the catalog never changes a run already asked for.

A dead letter is a replayed record like any other, so it lives no longer than one: the job sets the
topic's retention to the platform's (``topic_retention_ms``), and never beyond the replay topics'
time to live, counted from the moment the broker took it. The topic TTL deletes the topic itself
once its source has had no run for that long (``TopicTtl.sweep_dead_letters``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

DEAD_LETTER_PREFIX = "replay.dlq."


def dead_letter_topic(source: str) -> str:
    return f"{DEAD_LETTER_PREFIX}{source}"


def dead_letter_retention_ms(topic_retention_ms: int, ttl: timedelta) -> int:
    """How long the dead-letter topic keeps a record: the platform's retention, at most the TTL."""
    return max(1, min(topic_retention_ms, int(ttl.total_seconds() * 1000)))


def dead_letter_options(on_error: str, source: str) -> dict[str, Any]:
    """The ``RunOptions`` fields naming what a bad record does: ``on_error`` and, for ``dlq``, its topic."""
    if on_error == "dlq":
        return {"on_error": "dlq", "dlq_topic": dead_letter_topic(source)}
    return {"on_error": "fail", "dlq_topic": None}

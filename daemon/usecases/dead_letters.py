"""Where a run's bad records go: its ``on_error`` (the request's, else the source's default) and topic.

A record that cannot be published (too large for the topic, not encodable, not decryptable) fails
the run with ``on_error=fail``; with ``dlq`` it is set aside on the source's dead-letter topic, one
per source (``replay.dlq.<source>``), its records telling runs apart by their ``replay-run-id``
header. The job creates the topic when it is missing. Both choices are recorded in the run's
options when it is created, so a later change to the catalog never changes a run already asked for.
"""

from __future__ import annotations

from typing import Any

DEAD_LETTER_PREFIX = "replay.dlq."


def dead_letter_topic(source: str) -> str:
    return f"{DEAD_LETTER_PREFIX}{source}"


def dead_letter_options(on_error: str, source: str) -> dict[str, Any]:
    """The ``RunOptions`` fields naming what a bad record does: ``on_error`` and, for ``dlq``, its topic."""
    if on_error == "dlq":
        return {"on_error": "dlq", "dlq_topic": dead_letter_topic(source)}
    return {"on_error": "fail", "dlq_topic": None}

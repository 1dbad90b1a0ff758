"""What a run reports: one final stdout line the daemon parses, and the same JSON at ``result_uri``.

Success::

    REPLAY_RESULT {"status": "succeeded", "run_id": "r-42", "rows_selected": 900, "confirmed": 900,
                   "failed_tasks": 0, "duplicates_possible": 0, "achieved_tps": 99.6, "tps": 100,
                   "started_at": "...Z", "ended_at": "...Z", "publish_seconds": 9.04,
                   "behind_schedule_s": 0.0, "late_start_s": 0.012,
                   "watermark_high": null, "partition_skew": 1.02, "slots": 2, "partitions": 2,
                   "topic": "replay.orders.r-42", "dead_lettered": 0}

Failure (exit status 1)::

    REPLAY_FAILED {"status": "failed", "run_id": "r-42", "reason": "Broker: Message size too large
                   (MSG_SIZE_TOO_LARGE): ...", "confirmed": 0, "failed_tasks": 2,
                   "duplicates_possible": 0, "started_at": "...Z", "ended_at": "...Z"}

``confirmed`` counts only records of successful tasks whose delivery the broker confirmed;
``duplicates_possible`` counts records that failed attempts had confirmed before they failed (a
retry or a re-run sends them again; null when their beacons could not be read).
``behind_schedule_s`` is the most schedule time any task gave up because it could not keep its
pace (0 when the requested TPS was sustained); ``late_start_s`` the most any task started after
its first deadline (task launch; each further round of partitions adds one). ``partition_skew``
is largest/smallest partition, null when a partition is empty. ``dead_lettered`` counts records
set aside with ``on_error=dlq`` (too large, not encodable, not decryptable) whose copy the broker
confirmed on the dead-letter topic: ``confirmed + dead_lettered == rows_selected``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from spark_job.errors import ReplayError
from spark_job.uris import write_text

RESULT_PREFIX = "REPLAY_RESULT"
FAILED_PREFIX = "REPLAY_FAILED"
_OURS = re.compile(
    r"^(?:[\w.]+\.)?(?:PublishError|ReplayError|SourceError|TopicError|DecryptError)"
    r": (.+)$",
    re.M,
)
# The last line of a Python traceback: "module.SomeError: message".
_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt)): (.+)$", re.M)
_MAX_REASON = 500


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    rows_selected: int
    confirmed: int
    failed_tasks: int
    duplicates_possible: int | None
    achieved_tps: float
    tps: int
    started_at: str
    ended_at: str
    publish_seconds: float
    behind_schedule_s: float
    late_start_s: float
    watermark_high: str | int | float | None
    partition_skew: float | None
    slots: int
    partitions: int
    topic: str
    dead_lettered: int = 0  # records set aside on the dead-letter topic instead (on_error=dlq)

    def document(self) -> dict[str, Any]:
        return {"status": "succeeded", **asdict(self)}


@dataclass(frozen=True)
class ReplayFailure:
    run_id: str | None
    reason: str
    confirmed: int | None
    failed_tasks: int | None = None
    duplicates_possible: int | None = None
    started_at: str | None = None
    ended_at: str | None = None

    def document(self) -> dict[str, Any]:
        return {"status": "failed", **asdict(self)}


class JobFailed(ReplayError):
    """Publishing started and failed: carries what is known about the counts so far."""

    def __init__(self, failure: ReplayFailure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reason_of(exc: BaseException) -> str:
    """One human-readable line: our own message, else the broker's or Spark's first line."""
    if isinstance(exc, ReplayError):
        return _one_line(str(exc))
    text = str(exc)
    ours = _OURS.findall(text)
    if ours:
        return _one_line(ours[-1])  # the innermost (last) one is the task's own error
    if "Traceback (most recent call last)" in text:
        raised = _PYTHON_ERROR.findall(text.split("Traceback (most recent call last)")[-1])
        if raised:
            name, message = raised[-1]
            return _one_line(f"{name.rsplit('.', 1)[-1]}: {message}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _one_line(lines[0] if lines else type(exc).__name__)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 1] + "…"


def report(outcome: ReplayResult | ReplayFailure, result_uri: str | None) -> str:
    """The final stdout line; the same document goes to ``result_uri`` (best effort on failure)."""
    document = outcome.document()
    text = json.dumps(document, sort_keys=True)
    if result_uri:
        try:
            write_text(result_uri, text + "\n")
        except Exception:
            if isinstance(outcome, ReplayResult):
                raise
    prefix = RESULT_PREFIX if isinstance(outcome, ReplayResult) else FAILED_PREFIX
    return f"{prefix} {text}"

"""What a run reports: one final stdout line the daemon parses, and the same JSON at ``result_uri``.

Success (a replay)::

    REPLAY_RESULT {"status": "succeeded", "mode": "replay", "run_id": "r-42", "rows_selected": 900,
                   "confirmed": 900, "failed_tasks": 0, "duplicates_possible": 0, "dead_lettered": 0,
                   "achieved_tps": 99.6, "tps": 100, "first_delivery_at": "...Z",
                   "last_delivery_at": "...Z", "rate_series": {"start": 1717000000, "counts": [98, 100]},
                   "offsets": {"topic": "replay.orders.r-42", "partitions": {"0": [120, 570]}},
                   "reconcile": {...}, "started_at": "...Z", "ended_at": "...Z",
                   "publish_seconds": 9.04, "behind_schedule_s": 0.0, "late_start_s": 0.012,
                   "start_spread_s": 0.004, "watermark_high": null, "partition_skew": 1.02,
                   "slots": 2, "partitions": 2, "topic": "replay.orders.r-42"}

Success (``mode: "reconcile"``, nothing published)::

    REPLAY_RESULT {"status": "succeeded", "mode": "reconcile", "run_id": "r-43", "reconcile": {...}}

Failure (exit status 1)::

    REPLAY_FAILED {"status": "failed", "run_id": "r-42", "reason": "Broker: Message size too large
                   (MSG_SIZE_TOO_LARGE): ...", "confirmed": 0, "on_topic_at_least": 310,
                   "dead_lettered": 0, "failed_tasks": 2, "duplicates_possible": 0,
                   "offsets": {...}, "started_at": "...Z", "ended_at": "...Z"}

``confirmed`` counts only records of successful tasks whose delivery the broker confirmed;
``duplicates_possible`` counts records that failed attempts had confirmed before they failed (a
retry or a re-run sends them again; null when their beacons could not be read, never 0 for unknown).
``achieved_tps`` is ``confirmed / (last_delivery_at - first_delivery_at)``, both read from the
tasks' own delivery reports (one clock, the executors' wall clock; null below 2 confirmed records).
``rate_series`` counts confirmed deliveries per wall-clock second (``counts[i]`` is second ``start +
i``), summed over successful tasks; a shaped run's (``tps=original``) also holds ``targets``, the
events its own times put in each of those seconds under the ceiling, and ``slid_s``, how much later
than its own time the ceiling let the last event go. ``offsets`` holds, per partition of the target
topic, the end offsets snapshotted before publishing and after every task ended: every record the
run sent lies in ``[lo, hi)``. ``behind_schedule_s`` is the most schedule time any task still owed
when its last event went: how much later than its schedule it finished after a stall it could not
make up at most 5 % above its share (0 when the requested TPS was sustained); ``late_start_s`` the
most any task started after its first deadline, ``start_spread_s`` how much later the latest task
started than the earliest (each against its own schedule): the whole run's span is at most its
schedule's plus that spread, so a shortfall of ``achieved_tps`` that is not stalls shows here.
``bytes_held_s`` (``max_mb``) is the longest any task's due events waited for its share of the bytes
per second (``spark_job.publish.byte_budget``): the time the byte ceiling, not the rate, set; null
without a byte ceiling. That wait also shows in ``behind_schedule_s`` when it was not made up.
``partition_skew`` is largest/smallest partition, null when a partition is empty. ``by_partition``
lists each partition's ``{partition, rows, confirmed, attempts}`` (rows counted before publishing;
attempts: every try the beacons name, at least the successful one's number).
``delivery`` says how the records were sent: ``transactional`` runs also report ``transactions``
(committed, over every task), ``longest_transaction_s`` (the longest one stayed open, its commit
included) and ``resumed`` (rows a retry skipped because an earlier attempt had committed them); their
``reconcile`` read committed records only, which is what a consumer must read to see them once.
``dead_lettered`` counts records set aside with ``on_error=dlq`` whose copy the broker
confirmed on the dead-letter topic: ``confirmed + dead_lettered == rows_selected``.

``reconcile`` (null when no rows were selected) compares the selected event ids with the
``replay-event-id`` headers of the records within ``offsets`` that carry this run's
``replay-run-id`` (docs/rules.md rule 9)::

    {"selected": 900, "found": 905, "missing": 0, "unexpected": 0, "duplicates": 5,
     "missing_sample": [], "unexpected_sample": [], "duplicates_sample": ["e-1", ...],
     "missing_dead_lettered": null, "scanned_records": 905, "error": null}

``found == selected - missing + duplicates + unexpected``: ``duplicates`` sums the extra copies of
selected ids, ``unexpected`` counts records whose id was not selected; samples are at most 10 ids,
sorted; ``missing_ids`` lists the first ``IDS_KEPT`` (100,000) missing ids, sorted, and
``unexpected_ids`` / ``duplicated_ids`` the first of theirs as ``[id, records]`` pairs (the counts say
when there are more). ``missing_dead_lettered`` is how many missing ids are on the dead-letter
topic under this run (null without one). When reconcile could not be done ``error`` says why and
the counts are null.

On failure ``on_topic_at_least`` is what the broker confirmed for any attempt (successful tasks'
counts, every attempt's last beacon): a lower bound, null when unknown; ``dead_lettered`` counts
successful tasks only. A failure before publishing started says 0 for both, and only then.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spark_job.errors import JobError
from spark_job.uris import write_text

RESULT_PREFIX = "REPLAY_RESULT"
FAILED_PREFIX = "REPLAY_FAILED"
_OURS = re.compile(
    r"^(?:[\w.]+\.)?(?:PublishError|JobError|SourceError|TopicError|DecryptError)"
    r": (.+)$",
    re.M,
)
# The last line of a Python traceback: "module.SomeError: message".
_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt)): (.+)$", re.M)
_MAX_REASON = 500
_log = logging.getLogger("spark_job.phases")


SAMPLE_SIZE = 10  # sample ids per reconcile category
# Ids per reconcile category a verdict lists in full, sorted (the run's page pages them and offers
# them as CSV). A bound, so the driver's memory and the result line never follow the window (rule
# 11): above it the list is the first IDS_KEPT, and the counts still say how many there are.
IDS_KEPT = 100_000
Copies = tuple[tuple[str, int], ...]  # (event id, records carrying it), sorted by id


@dataclass(frozen=True)
class Reconciliation:
    """The selected event ids against the run's records on the topic (see the module's docstring)."""

    selected: int | None
    found: int | None
    missing: int | None
    unexpected: int | None
    duplicates: int | None
    missing_sample: tuple[str, ...] = ()
    unexpected_sample: tuple[str, ...] = ()
    duplicates_sample: tuple[str, ...] = ()
    missing_ids: tuple[str, ...] = ()  # the first IDS_KEPT missing ids, sorted
    unexpected_ids: Copies = ()  # the first IDS_KEPT unexpected ids and their records
    duplicated_ids: Copies = ()  # the first IDS_KEPT duplicated ids and their records (2 or more)
    missing_dead_lettered: int | None = None
    scanned_records: int | None = None
    error: str | None = None
    suppressed: int | None = None  # an erasure list: the erased keys' events left out (not selected)
    erasures_as_of: str | None = None  # that list's version: its newest erasure honoured

    @classmethod
    def failed(cls, error: str) -> Reconciliation:
        """Reconcile could not be done: every count unknown (never 0), and why."""
        return cls(None, None, None, None, None, error=error)

    def document(self) -> dict[str, Any]:
        document = asdict(self)
        for name in ("missing_sample", "unexpected_sample", "duplicates_sample", "missing_ids"):
            document[name] = list(document[name])
        for name in ("unexpected_ids", "duplicated_ids"):
            document[name] = [[event_id, copies] for event_id, copies in document[name]]
        return document


@dataclass(frozen=True)
class ReplayResult:
    run_id: str
    rows_selected: int
    confirmed: int
    failed_tasks: int
    duplicates_possible: int | None
    achieved_tps: float | None
    tps: int
    started_at: str
    ended_at: str
    publish_seconds: float
    behind_schedule_s: float
    late_start_s: float
    start_spread_s: float
    watermark_high: str | int | float | None
    partition_skew: float | None
    slots: int
    partitions: int
    topic: str
    dead_lettered: int = 0  # records set aside on the dead-letter topic instead (on_error=dlq)
    first_delivery_at: str | None = None
    last_delivery_at: str | None = None
    rate_series: dict[str, Any] | None = None  # {"start": epoch second, "counts": [...]}
    offsets: dict[str, Any] | None = None  # OffsetRanges.document()
    reconcile: Reconciliation | None = None
    bytes_held_s: float | None = None  # max_mb: the longest any task's due events waited for bytes
    suppressed: int | None = None  # an erasure list: the erased keys' events left out; None: no list
    erasures_as_of: str | None = None  # the list's version the run honoured (its newest erasure)
    delivery: str = "idempotent"  # or "transactional" (spark_job.publish.transactions)
    transactions: int | None = None  # transactional: transactions committed over every task
    longest_transaction_s: float | None = None  # transactional: the longest one stayed open
    resumed: int | None = None  # transactional: rows retries skipped because a predecessor committed them
    # each partition's {partition, rows, confirmed, attempts}, in order: the run's page lists them
    by_partition: list[dict[str, int]] | None = None

    def document(self) -> dict[str, Any]:
        document = {"status": "succeeded", "mode": "replay", **asdict(self)}
        document["reconcile"] = self.reconcile.document() if self.reconcile is not None else None
        return document


@dataclass(frozen=True)
class ReconcileResult:
    """``mode: "reconcile"``: nothing was published, only an earlier run's records were checked."""

    run_id: str
    reconcile: Reconciliation

    def document(self) -> dict[str, Any]:
        return {
            "status": "succeeded",
            "mode": "reconcile",
            "run_id": self.run_id,
            "reconcile": self.reconcile.document(),
        }


@dataclass(frozen=True)
class ReplayFailure:
    run_id: str | None
    reason: str
    confirmed: int | None
    failed_tasks: int | None = None
    duplicates_possible: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    on_topic_at_least: int | None = None  # a lower bound on this run's records on the topic
    dead_lettered: int | None = None
    offsets: dict[str, Any] | None = None

    def document(self) -> dict[str, Any]:
        return {"status": "failed", **asdict(self)}


@dataclass
class Phase:
    """How far a run got: once publishing started, no failure may claim that nothing was sent.

    ``mark`` logs each phase as ``phase=<name> s=<seconds it took> t=<seconds since origin>``, the
    origin being the ``spark-submit`` process's start when the job runs under it (bench/e2e.py reads
    these lines to say where the time to the first event goes).
    """

    publishing: bool = False
    origin: float = field(default_factory=lambda: submitted_at() or time.time())
    last: float = field(default_factory=time.time)

    def mark(self, name: str) -> None:
        now = time.time()
        _log.info("phase=%s s=%.3f t=%.3f", name, now - self.last, now - self.origin)
        self.last = now


def submitted_at() -> float | None:
    """When the ``spark-submit`` JVM that runs this driver started (epoch seconds), read from /proc;
    None elsewhere (in-process runs, other systems)."""
    try:
        parent = Path(f"/proc/{os.getppid()}")
        if b"org.apache.spark.deploy.SparkSubmit" not in (parent / "cmdline").read_bytes():
            return None
        ticks = int((parent / "stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


# Markers of a JVM that ran out of memory, or died (local mode: an OutOfMemoryError kills it).
_OUT_OF_MEMORY = ("OutOfMemoryError", "Java heap space", "GC overhead limit exceeded")
_JVM_GONE = ("Py4JNetworkError", "Answer from Java side is empty", "Error while sending or receiving")


def memory_hint(exc: BaseException) -> str:
    """``reason_of(exc)``, prefixed with what to raise when Spark ran out of memory (or its JVM died,
    which is how an out-of-memory error ends a local run)."""
    reason = reason_of(exc)
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in _OUT_OF_MEMORY):
        cause = "Spark ran out of memory"
    elif any(marker in text for marker in _JVM_GONE) or (isinstance(exc, ConnectionError) and _in_py4j(exc)):
        cause = "the Spark JVM is gone (most often out of memory)"
    else:
        return reason
    return _one_line(
        f"{cause}: raise spark.executor.memory (local runs: spark.driver.memory; "
        f"on EMR: emr.executor_memory_gb). {reason}"
    )


Outcome = ReplayResult | ReconcileResult | ReplayFailure


class JobFailed(JobError):
    """Publishing started and failed: carries what is known about the counts so far."""

    def __init__(self, failure: ReplayFailure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def utc_now() -> str:
    return iso_utc(datetime.now(UTC).timestamp())


def iso_utc(epoch_s: float) -> str:
    """Epoch seconds as ISO-8601 UTC with milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(epoch_s, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rate_series(histograms: Iterable[Mapping[int, int]]) -> dict[str, Any] | None:
    """Per-second counts summed over tasks, as ``{"start": second, "counts": [...]}`` with every second
    from the first to the last (0 where nothing was confirmed); None when nothing was."""
    totals: dict[int, int] = {}
    for histogram in histograms:
        for second, count in histogram.items():
            totals[second] = totals.get(second, 0) + count
    if not totals:
        return None
    start = min(totals)
    return {"start": start, "counts": [totals.get(second, 0) for second in range(start, max(totals) + 1)]}


def _in_py4j(exc: BaseException) -> bool:
    """Raised on the way to the JVM (its socket refused): the JVM is no longer there."""
    frames = traceback.extract_tb(exc.__traceback__)
    return any("py4j" in Path(frame.filename).parts for frame in frames)


def reason_of(exc: BaseException) -> str:
    """One human-readable line: our own message, else the broker's or Spark's first line."""
    if isinstance(exc, JobError):
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


def report(outcome: Outcome, result_uri: str | None) -> str:
    """The final stdout line; the same document goes to ``result_uri`` (best effort on failure)."""
    document = outcome.document()
    text = json.dumps(document, sort_keys=True)
    if result_uri:
        try:
            write_text(result_uri, text + "\n")
        except Exception:
            if not isinstance(outcome, ReplayFailure):
                raise
    prefix = FAILED_PREFIX if isinstance(outcome, ReplayFailure) else RESULT_PREFIX
    return f"{prefix} {text}"

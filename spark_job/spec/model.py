"""The job spec: everything one replay run needs, as ONE JSON document (argv[1] of ``main.py``).

The daemon builds a ``JobSpec`` in Python and writes ``spec.to_json()``; the job reads it back with
``spark_job.spec.parse.load_spec(uri)`` (a path, ``file://`` or ``s3://``). Unknown fields are
refused so a typo fails fast instead of being ignored. Shape (optional fields show their defaults)::

    {
      "run_id": "r-42",
      "source": {"name": "orders", "path": "s3://lake/orders", "format": "parquet"},
                                        # or "table": "lake.orders" (catalog) instead of "path"
      "window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-07"},
                                        # inclusive days on a date / partition column, or
                                        # {"column": "updated_at", "start": ISO, "end": ISO}: [start, end)
      "watermark": {"column": "updated_at", "low": null, "high": "2024-01-08T00:00:00Z"},
                                        # instead of "window": (low, high]; null low = from the start,
                                        # null high = everything past low
      "commits": {"low": "41", "high": "43"},
                                        # instead of "window": the rows the Iceberg or Delta table's
                                        # commits (low, high] appended; null low = the whole table at
                                        # high (source.snapshot is high)
      "topic": "replay.orders.r-42",
      "kafka": {"bootstrap.servers": "broker:9092"},   # librdkafka client settings
      "tps": 1000,                      # aggregate events/s; 0 = unthrottled
      "key_column": "order_id",         # Kafka message key (the entity)
      "event_id_column": "event_id",
      "event_time_column": "updated_at",   # orders one entity's events; required for "entity"
      "value_format": "json",           # "json" = value_columns as JSON, or "raw" (a bronze table)
      "value_column": null,             # raw: the value bytes, published untouched (required)
      "value_columns": null,            # json: the value's columns; null = all but "partition_column"
      "partition_column": null,         # json: storage layout, left out of a whole-row value
      "headers_column": null,           # raw: array<struct<name: string, value: binary>>, published
                                        # first and in order, the provenance headers after them
      "raw_timestamp_column": null,     # raw: the bronze record's original timestamp
      "headers": {},                    # added to every record, next to the replay-* provenance
      "ordering": "entity",             # or "none"
      "partitioner": "murmur2_random",  # librdkafka's name; murmur2 = the Java client's partitions
      "timestamp": "replay",            # or "event": each record's timestamp is its row's event time
      "delivery": "idempotent",         # or "transactional": each task sends in Kafka transactions
                                        # and resumes a retry after its last commit (exactly once
                                        # for consumers that read committed); a reconcile reads
                                        # committed records only
      "progress": {"topic": "replay.progress", "interval_s": 10},
      "result_uri": null,               # where the REPLAY_RESULT JSON is also written
      "max_partition_multiple": null,   # cap on k in k x slots partitions
      "decrypt": null,                  # PII columns to decrypt, see spark_job.spec.decrypt
      "on_error": "fail",               # or "dlq": a record that cannot be published (too large,
                                        # not encodable, not decryptable) goes to dlq_topic
      "dlq_topic": null,                # required with "dlq"; the job creates it when missing
      "dlq_retention_ms": null,         # with "dlq": how long a dead letter is kept; the job sets it
                                        # on the topic (and LogAppendTime), created or not
      "mode": "replay",                 # or "reconcile": publish nothing, reconcile an earlier run
      "reconcile": null,                # with "reconcile" only: {"run_id": "r-41", "offsets":
                                        # {"topic": ..., "partitions": {"0": [lo, hi]}} or null =
                                        # the whole topic, "dlq_topic": null}
      "ramp": null,                     # {"seconds": 300, "start": 0.1}: from a tenth of tps up to tps
      "max_bytes_per_s": null,          # a byte ceiling beside tps (key, value and header bytes)
      "shape": null,                    # {"speed": 10, "origin": epoch s}: each event at its own
                                        # (time - origin) / speed, tps a ceiling per second
      "where": null,                    # a row filter (spark_job.spec.row_filter): {"op": "compare",
                                        # "column": "status", "cmp": "=", "value": {"type": "string",
                                        # "value": "paid"}}, and/or/not/in/between/is_null nodes
      "executor": null,                 # {"cores": 2, "memory": "4g"}: the source's executor size
                                        # on a Spark cluster (read by the launcher that submits the
                                        # job; the job counts the cores it was given)
      "control": null                   # live control (spark_job.control): {"topic": "replay.control",
                                        # "offset": 0, "changes": [{"at": epoch s, "tps": 3000,
                                        # "paused": false}], "key": hex}: the rate from "at" on;
                                        # tasks read newer changes from "topic" at "offset" onward,
                                        # following only those signed with "key"
    }

Naive timestamps are read as UTC. This module is the shape and its invariants only: reading a
document is ``spark_job.spec.parse``, which imports this module (never the other way round).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal, get_args

from spark_job.errors import SpecError
from spark_job.spec.decrypt import Decrypt, validate_decrypt
from spark_job.spec.row_filter import RowFilter

KafkaValue = str | int | float | bool
Bound = str | int | float | None
# sections a spec leaves out when it has none (specs without them stay as they were)
_OPTIONAL_SECTIONS = (
    "control",
    "executor",
    "ramp",
    "max_bytes_per_s",
    "shape",
    "where",
    "erasures",
    "keys_file",
    "repair",
    "redrive",
)
RESERVED_HEADERS = (
    "replay-run-id",
    "replay-source",
    "replay-window",
    "replay-watermark",
    "replay-filter",
    "replay-repair-of",
    "replay-redrive-of",
    "replay-event-id",
)
EVENT_ID_HEADER = "replay-event-id"  # each record's own event id, after the other provenance headers
# librdkafka's partitioners; murmur2 hashes keys the way the Java client, Kafka Streams and most
# services do, so a replayed key lands on the partition its live events are on.
Partitioner = Literal[
    "murmur2_random", "murmur2", "consistent_random", "consistent", "random", "fnv1a_random", "fnv1a"
]
PARTITIONERS: tuple[str, ...] = get_args(Partitioner)
DEFAULT_PARTITIONER: Partitioner = "murmur2_random"
Delivery = Literal["idempotent", "transactional"]  # spark_job.publish.transactions
DELIVERIES: tuple[Delivery, ...] = ("idempotent", "transactional")
Timestamp = Literal["replay", "event"]  # the record's Kafka timestamp: publish time, or the row's event time


TABLE_FORMATS = ("parquet", "iceberg", "delta")


@dataclass(frozen=True)
class Source:
    name: str
    path: str | None = None
    table: str | None = None
    format: str = "parquet"  # one of TABLE_FORMATS
    # Iceberg: the snapshot id to read; Delta: the version. None: the table as it is now (and Parquet).
    snapshot: str | None = None
    # Parquet at a path: the files to read (relative to it), as the plan listed them; None: list them.
    files: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DayWindow:
    """Inclusive days on a date (or partition) column: the filter Spark prunes partitions with."""

    column: str
    start_day: date
    end_day: date

    def describe(self) -> str:
        return f"{self.column} {self.start_day}..{self.end_day}"


@dataclass(frozen=True)
class TimeWindow:
    """A half-open ``[start, end)`` range on a timestamp column."""

    column: str
    start: datetime
    end: datetime

    def describe(self) -> str:
        return f"{self.column} [{_iso(self.start)}, {_iso(self.end)})"


@dataclass(frozen=True)
class WatermarkRange:
    """``(low, high]``: rows past the committed watermark, up to and including ``high``."""

    column: str
    low: Bound = None
    high: Bound = None

    def describe(self) -> str:
        return f"{self.column} ({_bound(self.low, missing='-inf')}, {_bound(self.high, missing='+inf')}]"


@dataclass(frozen=True)
class CommitRange:
    """The rows an Iceberg or Delta table's commits ``(low, high]`` appended (snapshot ids, versions);
    ``low`` None: every row of ``high``. Only appends are read: a pipeline refuses a range holding any
    other commit before a job is built (``daemon.core.commits``)."""

    low: str | None
    high: str

    def describe(self) -> str:
        return f"commits ({self.low or '-inf'}, {self.high}]"


Selection = DayWindow | TimeWindow | WatermarkRange | CommitRange
Mode = Literal["replay", "reconcile"]


@dataclass(frozen=True)
class OffsetRanges:
    """Per partition of ``topic``, a half-open ``[lo, hi)`` offset range (what a run's records lie in)."""

    topic: str
    partitions: dict[int, tuple[int, int]]

    def document(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partitions": {str(p): [lo, hi] for p, (lo, hi) in self.partitions.items()},
        }


@dataclass(frozen=True)
class ReconcileTarget:
    """``mode: "reconcile"``: the earlier run whose records to check, and where they lie."""

    run_id: str
    offsets: OffsetRanges | None = None  # None: the topic's whole current range
    dlq_topic: str | None = None
    also: tuple[str, ...] = ()  # the run's repairs: their records count as the run's own

    @property
    def runs(self) -> tuple[str, ...]:
        return (self.run_id, *self.also)


@dataclass(frozen=True)
class Progress:
    topic: str = "replay.progress"
    interval_s: float = 10.0


@dataclass(frozen=True)
class RateChange:
    """From wall-clock time ``at`` (epoch seconds) on, the run's rate is ``tps``; none while ``paused``
    (``tps`` is then the rate it resumes at)."""

    at: float
    tps: int
    paused: bool = False


_CONTROL_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Control:
    """Where a running job learns of rate changes: ``topic`` from ``offset`` on; ``changes`` are those
    made before the spec was written (the rate in ``tps`` holds until the first of them)."""

    topic: str
    offset: int
    changes: tuple[RateChange, ...] = ()
    key: str | None = None  # the run's control key (hex); None: no message is followed


@dataclass(frozen=True)
class Repair:
    """``repair r-…``: publish only the selected events whose ids no record of ``runs`` (the repaired
    run ``of`` and its earlier repairs) carries on the topic, then reconcile the whole selection
    against the records of those runs and this one."""

    of: str
    runs: tuple[str, ...]


# A redrive's rows (``spark_job.redrive``): what its spec names as key, value, headers, id and time.
DEAD_LETTER_KEY, DEAD_LETTER_VALUE, DEAD_LETTER_HEADERS = "key", "value", "headers"
DEAD_LETTER_ID, DEAD_LETTER_TIME = "event_id", "set_aside_at"


@dataclass(frozen=True)
class Redrive:
    """``redrive r-…``: the records are ``of``'s dead letters on ``dlq_topic`` meant for the run's
    topic (set aside by any of ``runs``: the subject and its earlier redrives), not the table's rows;
    those an earlier redrive landed are left out (``spark_job.redrive``)."""

    of: str
    dlq_topic: str
    runs: tuple[str, ...]


@dataclass(frozen=True)
class KeysFile:
    """``keys=@<file>``: only rows whose ``column`` is a key in the file, whose keys must still have
    the ``digest`` the plan recorded (``spark_job.key_files``)."""

    path: str
    column: str
    digest: str


@dataclass(frozen=True)
class Erasures:
    """The source's erasure list: events whose ``column`` holds a key on it are left out of every read
    (publish and reconcile alike), whatever else the spec says. ``as_of``: only erasures up to then
    (the list's version the run honours); None: the whole list as the job finds it at its start."""

    path: str
    format: str  # "parquet" or "csv" (with a header)
    column: str  # the source's column the keys name
    key: str  # the list's column of erased keys
    erased_at: str  # the list's column of erasure times
    as_of: datetime | None = None


@dataclass(frozen=True)
class Ramp:
    """The rate starts at ``start`` of itself and rises linearly to all of it over ``seconds`` from the
    schedule's start (the daemon's ``ramp=``; ``spark_job.publish.timeline.ramped``)."""

    seconds: int
    start: float


@dataclass(frozen=True)
class Shape:
    """``tps=original``: every event at ``(event time - origin) / speed`` seconds after the schedule's
    start, ``tps`` being a ceiling per second (``spark_job.publish.time_shape``)."""

    speed: float
    origin: float  # epoch seconds: the window's start, where scaled time is 0


SPARK_MEMORY = re.compile(r"^[1-9][0-9]{0,6}[kmgt]$")  # Spark's size strings: 512m, 4g


@dataclass(frozen=True)
class Executor:
    """A source's executor size on a Spark cluster (the catalog's ``executor``), over the launcher's
    settings: a source of wide rows asks for more memory, one whose rate needs more slots per
    executor for more cores. None in either field: the setting's."""

    cores: int | None = None
    memory: str | None = None


@dataclass(frozen=True)
class JobSpec:
    run_id: str
    source: Source
    selection: Selection
    topic: str
    kafka: dict[str, KafkaValue]
    tps: int
    key_column: str
    event_id_column: str
    event_time_column: str | None = None
    value_format: Literal["json", "raw"] = "json"
    value_column: str | None = None
    value_columns: tuple[str, ...] | None = None
    partition_column: str | None = None
    headers_column: str | None = None
    raw_timestamp_column: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    ordering: Literal["entity", "none"] = "entity"
    progress: Progress = field(default_factory=Progress)
    result_uri: str | None = None
    max_partition_multiple: int | None = None
    decrypt: Decrypt | None = None  # PII columns to decrypt on the executors (spark_job.spec.decrypt)
    partitioner: Partitioner = DEFAULT_PARTITIONER
    timestamp: Timestamp = "replay"
    delivery: Delivery = "idempotent"
    on_error: Literal["fail", "dlq"] = "fail"  # what a bad record does: fail the run, or go to dlq_topic
    dlq_topic: str | None = None
    dlq_retention_ms: int | None = None  # None: the topic's own retention is left as it is
    mode: Mode = "replay"
    reconcile: ReconcileTarget | None = None  # required with mode "reconcile", refused otherwise
    control: Control | None = None  # live rate changes (spark_job.control); None: the rate is fixed
    ramp: Ramp | None = None  # a warm-up from a share of the rate to all of it; None: the rate at once
    max_bytes_per_s: int | None = None  # max_mb: a byte ceiling beside the rate; None: none
    shape: Shape | None = None  # tps=original: the traffic's own timeline, tps its ceiling; None: flat
    where: RowFilter | None = None  # where=: the rows of the selection to keep; None: every row
    erasures: Erasures | None = None  # the source's erasure list; None: the source has none
    keys_file: KeysFile | None = None  # keys=@<file>: only the entities it lists
    repair: Repair | None = None  # repair r-…: only what the repaired run is still missing
    redrive: Redrive | None = None  # redrive r-…: the subject's dead letters, sent back
    executor: Executor | None = None  # the source's executor size on a cluster; None: the settings'

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        selection = document.pop("selection")
        key = _selection_key(self.selection)
        document[key] = {k: _iso(v) if isinstance(v, date) else v for k, v in selection.items()}
        if document["source"]["snapshot"] is None:
            del document["source"]["snapshot"]  # and specs of unversioned tables
        if document["source"]["files"] is None:
            del document["source"]["files"]
        else:
            document["source"]["files"] = list(document["source"]["files"])
        if document["decrypt"] is None:
            del document["decrypt"]  # specs of sources without PII stay as they were
        document["where"] = dict(self.where.document) if self.where is not None else None
        if self.erasures is not None and self.erasures.as_of is not None:
            document["erasures"]["as_of"] = _iso(self.erasures.as_of)
        if self.repair is not None:
            document["repair"]["runs"] = list(self.repair.runs)
        if self.redrive is not None:
            document["redrive"]["runs"] = list(self.redrive.runs)
        if self.reconcile is not None and not self.reconcile.also:
            del document["reconcile"]["also"]  # and reconciles of unrepaired runs stay as they were
        if self.executor is not None:
            document["executor"] = {k: v for k, v in document["executor"].items() if v is not None}
        if self.delivery == "idempotent":
            del document["delivery"]  # the default: specs from before transactions stay as they were
        for optional in _OPTIONAL_SECTIONS:
            if document[optional] is None:
                del document[optional]  # and specs without them stay as they were
        if self.mode == "replay":
            del document["mode"], document["reconcile"]  # and replay specs as they were
        elif self.reconcile is not None:
            offsets = self.reconcile.offsets
            document["reconcile"]["offsets"] = offsets.document() if offsets is not None else None
        return document

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def _selection_key(selection: Selection) -> str:
    if isinstance(selection, WatermarkRange):
        return "watermark"
    if isinstance(selection, CommitRange):
        return "commits"
    return "window"


def _validate(spec: JobSpec) -> None:
    if spec.tps < 0:
        raise SpecError("tps", f"must be >= 0 (0 = unthrottled), got {spec.tps}")
    if (spec.source.path is None) == (spec.source.table is None):
        raise SpecError("source.path", "give exactly one of 'path' or 'table'")
    if spec.source.format not in TABLE_FORMATS:
        raise SpecError(
            "source.format", f"must be one of {', '.join(TABLE_FORMATS)}, got {spec.source.format!r}"
        )
    if spec.source.snapshot is not None and spec.source.format == "parquet":
        raise SpecError("source.snapshot", "a Parquet table has no snapshots to pin")
    if spec.source.files is not None and (spec.source.format != "parquet" or spec.source.path is None):
        raise SpecError("source.files", "only a Parquet table at a path is read from a listing")
    for file in spec.source.files or ():
        if not file or file.startswith("/") or ".." in file.split("/") or "://" in file:
            raise SpecError("source.files", f"must be paths under the table's, got {file!r}")
    if spec.source.snapshot is not None and not spec.source.snapshot.isdigit():
        raise SpecError(
            "source.snapshot", f"must be a snapshot id or version number, got {spec.source.snapshot!r}"
        )
    if isinstance(spec.selection, CommitRange):
        commits = spec.selection
        if spec.source.format not in ("iceberg", "delta"):
            raise SpecError("commits", f"a {spec.source.format} table has no commits to read")
        if spec.source.snapshot != commits.high:
            raise SpecError("commits.high", "is the snapshot the run reads (source.snapshot)")
        if not all(bound.isdigit() for bound in (commits.low or "0", commits.high)):
            raise SpecError("commits", "bounds are snapshot ids or version numbers")
    if isinstance(spec.selection, DayWindow) and spec.selection.start_day > spec.selection.end_day:
        raise SpecError("window.end_day", "is before window.start_day")
    if isinstance(spec.selection, TimeWindow) and spec.selection.start >= spec.selection.end:
        raise SpecError("window.end", "must be after window.start")
    if "bootstrap.servers" not in spec.kafka:
        raise SpecError("kafka.bootstrap.servers", "is required")
    for key, value in spec.kafka.items():
        if not isinstance(value, KafkaValue):
            raise SpecError(f"kafka.{key}", "must be a string, number or boolean")
    if str(spec.kafka.get("enable.idempotence", "true")).lower() != "true":
        raise SpecError("kafka.enable.idempotence", "must stay true: replays use the idempotent producer")
    if str(spec.kafka.get("acks", "all")).lower() not in ("all", "-1"):
        raise SpecError("kafka.acks", "must stay 'all': a record counts only once every replica has it")
    if spec.value_format not in ("json", "raw"):
        raise SpecError("value_format", f"must be 'json' or 'raw', got {spec.value_format!r}")
    if spec.value_format == "raw" and not spec.value_column:
        raise SpecError("value_column", "is required when value_format is 'raw'")
    _validate_value_shape(spec)
    if spec.ordering not in ("entity", "none"):
        raise SpecError("ordering", f"must be 'entity' or 'none', got {spec.ordering!r}")
    if spec.ordering == "entity" and not spec.event_time_column:
        raise SpecError("event_time_column", "is required when ordering is 'entity'")
    if spec.partitioner not in PARTITIONERS:
        raise SpecError("partitioner", f"must be one of {', '.join(PARTITIONERS)}, got {spec.partitioner!r}")
    if "partitioner" in spec.kafka:
        raise SpecError("kafka.partitioner", "set the spec's 'partitioner' field instead")
    if spec.timestamp not in ("replay", "event"):
        raise SpecError("timestamp", f"must be 'replay' or 'event', got {spec.timestamp!r}")
    if spec.timestamp == "event" and event_timestamp_column(spec) is None:
        raise SpecError("event_time_column", "is required when timestamp is 'event'")
    for name, value in spec.headers.items():
        if not isinstance(value, str):
            raise SpecError(f"headers.{name}", "must be a string")
        if name.lower() in RESERVED_HEADERS:
            raise SpecError(f"headers.{name}", "is reserved for the replay's provenance headers")
    if spec.progress.interval_s <= 0:
        raise SpecError("progress.interval_s", "must be > 0")
    if spec.max_partition_multiple is not None and spec.max_partition_multiple < 1:
        raise SpecError("max_partition_multiple", "must be >= 1")
    if spec.on_error not in ("fail", "dlq"):
        raise SpecError("on_error", f"must be 'fail' or 'dlq', got {spec.on_error!r}")
    if spec.on_error == "dlq" and not spec.dlq_topic:
        raise SpecError("dlq_topic", "is required when on_error is 'dlq'")
    if spec.dlq_topic is not None and spec.dlq_topic == spec.topic:
        raise SpecError("dlq_topic", "must not be the target topic")
    if spec.dlq_retention_ms is not None and spec.dlq_retention_ms <= 0:
        raise SpecError("dlq_retention_ms", "must be > 0")
    _validate_mode(spec)
    _validate_redrive(spec)
    _validate_control(spec)
    _validate_ramp(spec)
    _validate_byte_ceiling(spec)
    _validate_delivery(spec)
    _validate_executor(spec.executor)
    _validate_shape(spec)
    if spec.decrypt is not None:
        protected = (spec.key_column, spec.event_id_column)
        validate_decrypt(spec.decrypt, value_format=spec.value_format, protected=protected)


def _validate_redrive(spec: JobSpec) -> None:
    """A redrive's records are dead letters, labelled with its subject's window, never a pipeline's
    slot (the job would select the table again for a slot's real range)."""
    if spec.redrive is not None and not isinstance(spec.selection, DayWindow | TimeWindow):
        raise SpecError("redrive", "needs a window of days or times, not a pipeline's slot")


def _validate_mode(spec: JobSpec) -> None:
    if spec.mode not in ("replay", "reconcile"):
        raise SpecError("mode", f"must be 'replay' or 'reconcile', got {spec.mode!r}")
    if spec.mode == "reconcile" and spec.reconcile is None:
        raise SpecError("reconcile", "is required when mode is 'reconcile'")
    if spec.mode == "replay" and spec.reconcile is not None:
        raise SpecError("reconcile", "is only used with mode 'reconcile'")
    offsets = spec.reconcile.offsets if spec.reconcile is not None else None
    for partition, (lo, hi) in (offsets.partitions if offsets is not None else {}).items():
        if not 0 <= lo <= hi:
            raise SpecError(
                f"reconcile.offsets.partitions.{partition}", f"must be 0 <= lo <= hi, got [{lo}, {hi}]"
            )


def _throttled_only(spec: JobSpec, field: str) -> None:
    """Pacing options mean nothing to a reconcile or an unthrottled run: refuse them there."""
    if spec.mode != "replay" or spec.tps == 0:
        raise SpecError(field, "is only used by a throttled replay")


def _validate_executor(executor: Executor | None) -> None:
    if executor is None:
        return
    if executor.cores is not None and not 1 <= executor.cores <= 64:
        raise SpecError("executor.cores", f"must be 1 to 64, got {executor.cores}")
    if executor.memory is not None and not SPARK_MEMORY.match(executor.memory):
        raise SpecError("executor.memory", f"must be a size like 512m or 4g, got {executor.memory!r}")


def _validate_delivery(spec: JobSpec) -> None:
    if spec.delivery not in DELIVERIES:
        raise SpecError("delivery", f"must be one of {', '.join(DELIVERIES)}, got {spec.delivery!r}")
    if spec.delivery == "transactional" and spec.on_error == "dlq":
        # a dead letter goes out on its own producer, outside the task's transactions (ADR 0057)
        raise SpecError("delivery", "transactional does not combine with on_error=dlq")


def _validate_byte_ceiling(spec: JobSpec) -> None:
    if spec.max_bytes_per_s is None:
        return
    _throttled_only(spec, "max_bytes_per_s")
    if spec.max_bytes_per_s < 1:
        raise SpecError("max_bytes_per_s", f"must be >= 1, got {spec.max_bytes_per_s}")


def _validate_shape(spec: JobSpec) -> None:
    shape = spec.shape
    if shape is None:
        return
    _throttled_only(spec, "shape")
    if not spec.event_time_column:
        raise SpecError("event_time_column", "is required for a shaped replay (tps=original)")
    if not 0.01 <= shape.speed <= 100_000:
        raise SpecError("shape.speed", f"must be between 0.01 and 100000, got {shape.speed}")
    if spec.ramp is not None:
        raise SpecError("ramp", "is for a flat rate, not a shaped replay")
    if not isinstance(spec.selection, DayWindow | TimeWindow):
        raise SpecError("shape", "needs a window of days or times, not a pipeline's slot")


def _validate_ramp(spec: JobSpec) -> None:
    ramp = spec.ramp
    if ramp is None:
        return
    _throttled_only(spec, "ramp")
    if ramp.seconds < 1:
        raise SpecError("ramp.seconds", f"must be >= 1, got {ramp.seconds}")
    if not 0 < ramp.start <= 1:
        raise SpecError("ramp.start", f"must be a share of the rate in (0, 1], got {ramp.start}")


def _validate_control(spec: JobSpec) -> None:
    control = spec.control
    if control is None:
        return
    _throttled_only(spec, "control")
    if control.offset < 0:
        raise SpecError("control.offset", f"must be >= 0, got {control.offset}")
    if control.key is not None and not _CONTROL_KEY.fullmatch(control.key):
        raise SpecError("control.key", "must be 64 hex digits (the run's control key)")
    previous = -math.inf
    for index, change in enumerate(control.changes):
        if change.tps < 1:
            raise SpecError(f"control.changes.{index}.tps", f"must be >= 1, got {change.tps}")
        if change.at < previous:
            raise SpecError(f"control.changes.{index}.at", "changes must be in time order")
        previous = change.at


def _validate_value_shape(spec: JobSpec) -> None:
    """Each format's own columns: a json value's columns, a raw record's headers and timestamp."""
    fields = {"json": ("value_columns",), "raw": ("value_column", "headers_column", "raw_timestamp_column")}
    for name in ("value_column", "headers_column", "raw_timestamp_column", "value_columns"):
        if getattr(spec, name) is not None and name not in fields[spec.value_format]:
            raise SpecError(name, f"is not used with value_format '{spec.value_format}'")
    if spec.value_columns is not None:
        if not spec.value_columns:
            raise SpecError("value_columns", "must name at least one column (or be null for the whole row)")
        for column in spec.value_columns:
            if not isinstance(column, str) or not column.strip():
                raise SpecError("value_columns", "must be non-empty strings")
        if len(set(spec.value_columns)) != len(spec.value_columns):
            raise SpecError("value_columns", "names a column twice")


def _iso(value: date) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value.isoformat()


def _bound(value: Bound, *, missing: str) -> str:
    return missing if value is None else str(value)


def event_timestamp_column(spec: JobSpec) -> str | None:
    """Where ``timestamp=event`` takes each record's timestamp: a bronze record's original one, else
    the row's event time."""
    if spec.value_format == "raw" and spec.raw_timestamp_column:
        return spec.raw_timestamp_column
    return spec.event_time_column


def provenance_headers(spec: JobSpec) -> dict[str, str]:
    """The replay-* headers every record carries, so consumers can tell a replay generation apart."""
    window_key = "replay-window" if _selection_key(spec.selection) == "window" else "replay-watermark"
    headers = {
        "replay-run-id": spec.run_id,
        "replay-source": spec.source.name,
        window_key: spec.selection.describe(),
    }
    if spec.where is not None or spec.keys_file is not None:  # which rows: the filter's fingerprint
        headers["replay-filter"] = _fingerprint(spec)
    if spec.repair is not None:  # a repair's records say which run they complete
        headers["replay-repair-of"] = spec.repair.of
    if spec.redrive is not None:  # a redriven record says whose dead letter it was
        headers["replay-redrive-of"] = spec.redrive.of
    return headers


def _fingerprint(spec: JobSpec) -> str:
    """The filter's own fingerprint, or, with a key file, of the filter and the keys' digest."""
    where = spec.where.fingerprint() if spec.where is not None else ""
    if spec.keys_file is None:
        return where
    return hashlib.sha256(f"{where}|{spec.keys_file.digest}".encode()).hexdigest()[:16]


def record_headers(spec: JobSpec) -> list[tuple[str, bytes]]:
    """User headers plus provenance, encoded once for the producer; the publisher adds each record's own
    ``replay-event-id`` after them."""
    merged: Mapping[str, str] = {**spec.headers, **provenance_headers(spec)}
    return [(name, value.encode()) for name, value in merged.items()]

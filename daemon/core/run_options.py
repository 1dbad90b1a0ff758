"""What a run (and a pipeline, for its runs) was asked to do beyond its columns, typed and versioned.

A run's settings (headers, ordering, the rows and ETA its plan promised, where bad records go, who
approved it, how its window selects rows) are fixed when the run is created and read by the launcher,
the watcher, the wire and Slack. They live in one JSON column, so this is the one place that says
what that column holds: ``encode`` writes it, ``decode`` reads it back and refuses anything it did not
write, and every default is a field default here. A new run option is one field (and, when old rows
need a value other than the default, a new version and a migration that upgrades the stored rows).
A pipeline's ``PipelineOptions`` are what each of its scheduled runs inherits, kept the same way.

The window's kind and the topic's mode are recorded, not guessed from the window's label or the
topic's name: ``WindowKind.DAYS`` reads whole partitions, ``RANGE`` an event-time interval,
``WATERMARK`` a pipeline slot past its watermark, ``COMMITS`` a pipeline slot of the rows a table's
commits appended (``snapshot`` is the slot's commit); ``relative`` says the window was written
relative to the run's creation (``last=6h``, ``today``, a zone), so a retry pins the bounds this run
read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, get_args

from daemon.core.auto_rate import AutoRate
from daemon.core.clusters import CLUSTER_NAME, DEFAULT_CLUSTER
from daemon.core.grammar.commands import (
    INCREMENTAL_CHOICES,
    Delivery,
    Incremental,
    OnError,
    Ordering,
    Timestamp,
    Topic,
)

VERSION = 1


class WindowKind(StrEnum):
    DAYS = "days"  # whole UTC days: read by the partition column
    RANGE = "range"  # a half-open event-time interval
    WATERMARK = "watermark"  # a pipeline's slot: (low, high] of its watermark column
    COMMITS = "commits"  # a pipeline's slot: the rows the table's commits (low, high] appended


@dataclass(frozen=True)
class RunOptions:
    window: WindowKind = WindowKind.RANGE
    relative: bool = False  # written relative to when it was asked: a retry pins the bounds read
    topic_mode: Topic = "auto"  # auto: a topic the platform created for it; live: the source's live topic
    headers: Mapping[str, str] = field(default_factory=dict)
    ordering: Ordering = "entity"
    timestamp: Timestamp | None = None  # None: the source's default when the job is built
    on_error: OnError | None = None  # None: the source's default when the job is built
    dlq_topic: str | None = None  # with on_error=dlq: the dead-letter topic
    delivery: Delivery = "idempotent"  # resolved when the run was created (its option, else the source's)
    cluster: str = DEFAULT_CLUSTER  # the Kafka cluster of its topic: its source's when it was created
    workers: int = 1
    partitions: int | None = None  # of the topic the run publishes to, when the run created it
    planned_rows: int | None = None  # the plan's count from table metadata; None: not planned
    planned_eta_s: float | None = None  # the plan's whole duration; None: not planned
    request: str | None = None  # the command as understood: what an Idempotency-Key stands for
    watch: tuple[str, ...] = ()  # consumer groups whose drain the run watches after it ends
    auto: AutoRate | None = None  # tps=auto: the daemon steers the rate from the group's lag
    ramp_s: int | None = None  # ramp=: seconds from a tenth of the rate up to all of it (core.rate_shape)
    max_mb: int | None = None  # max_mb=: a byte ceiling beside the rate, in megabytes a second
    # tps=original: each event at its own time this many times faster, ``tps`` the ceiling; and the
    # publishing time the plan found for that shape (None: a flat rate)
    speed: float | None = None
    shaped_s: float | None = None
    overrides: tuple[str, ...] = ()  # live, force=yes: the overlapping runs it went ahead of
    approved_by: str | None = None  # live, two owners: the second owner
    # The table version the plan counted and every read of the run sees (an Iceberg snapshot id, a
    # Delta version); None: a Parquet table, or a run from before snapshots were recorded.
    snapshot: str | None = None
    # A table named in a catalog: where the plan read it, and the job reads it instead of asking the
    # catalog (an Iceberg table's metadata file, which holds ``snapshot``; a Delta or Parquet table's
    # location in the Glue Data Catalog). None: a table at a path.
    table_metadata: str | None = None
    # A Parquet table: the window's data files the plan listed (relative to the table's root), what
    # every read of the run sees in place of a snapshot; None: a table with snapshots, or an older run.
    files: tuple[str, ...] | None = None
    # where=: the filter the run's rows passed, as canonical text (``core.grammar.predicates``); None: every
    # row of the window. A reconcile of the run keeps the subject's: the expected ids are the filtered.
    where: str | None = None
    fields: tuple[str, ...] = ()  # fields=: the columns of each JSON value; (): the source's
    keys_file: str | None = None  # keys=@<file>: only the entities listed there
    keys_digest: str | None = None  # the digest of the keys the plan read: the job refuses others
    # The source's erasure list the plan read, and its version (the newest erasure then, ISO UTC) the
    # run honours: erasures after it were not yet on the list when the run was asked for. None: the
    # source had no list (a run still honours one added since: the job reads the source's).
    erasures: str | None = None
    erasures_as_of: str | None = None
    repair_of: str | None = None  # repair r-…: the run whose missing ids this one publishes
    # a repair, or a reconcile of a repaired run: the earlier repairs whose records count as the run's
    repairs: tuple[str, ...] = ()
    redrive_of: str | None = None  # redrive r-…: the run whose dead letters this one sends back
    redrives: tuple[str, ...] = ()  # a redrive: the earlier redrives of the same run

    def __post_init__(self) -> None:
        _check(self)

    def encode(self) -> dict[str, Any]:
        """The JSON the store keeps: every field, versioned, in plain types."""
        return _encode(self)

    @classmethod
    def decode(cls, data: Mapping[str, Any]) -> RunOptions:
        """The options in a stored document; ValueError naming what is wrong when we did not write it."""
        values = _stored_fields(cls, data, "run")
        try:
            if "window" in values:
                values["window"] = WindowKind(values["window"])
            for name in ("watch", "overrides", "fields", "repairs", "redrives"):
                if name in values:
                    values[name] = tuple(_strings(name, values[name]))
            if values.get("files") is not None:
                values["files"] = tuple(_strings("files", values["files"]))
            if values.get("auto") is not None:
                auto = values["auto"]
                values["auto"] = AutoRate(
                    ceiling=auto["ceiling"], lag_limit=auto["lag_limit"], group=auto["group"]
                )
            return cls(**values)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"run options malformed ({exc})") from None


@dataclass(frozen=True)
class PipelineOptions:
    """What a pipeline's scheduled runs inherit, fixed when it is scheduled (each slot's `RunOptions`
    are built from these and the source's defaults at that slot)."""

    topic_mode: Topic = "auto"
    headers: Mapping[str, str] = field(default_factory=dict)
    on_error: OnError | None = None  # None: the source's default at each run
    watch: tuple[str, ...] = ()  # consumer groups each run watches drain
    request: str | None = None  # the schedule command as understood: what an Idempotency-Key stands for
    # watermark: rows past the watermark column's committed value; snapshot: the rows each Iceberg or
    # Delta commit appended since the committed snapshot (the pipeline's watermark_value holds it)
    incremental: Incremental = "watermark"
    where: str | None = None  # where=: each run publishes only the rows this filter keeps (canonical)
    cluster: str = DEFAULT_CLUSTER  # the Kafka cluster of its topic and runs: its source's when created

    def __post_init__(self) -> None:
        _check_common(self)
        if self.where is not None and not isinstance(self.where, str):
            raise ValueError("option where is text, or absent")
        if self.incremental not in INCREMENTAL_CHOICES:
            raise ValueError(f"option incremental={self.incremental!r}: one of {INCREMENTAL_CHOICES}")

    def encode(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def decode(cls, data: Mapping[str, Any]) -> PipelineOptions:
        values = _stored_fields(cls, data, "pipeline")
        try:
            if "watch" in values:
                values["watch"] = tuple(_strings("watch", values["watch"]))
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"pipeline options malformed ({exc})") from None


def _encode(options: RunOptions | PipelineOptions) -> dict[str, Any]:
    data: dict[str, Any] = {"v": VERSION}
    for item in fields(options):
        value = getattr(options, item.name)
        if isinstance(value, AutoRate):
            value = {"ceiling": value.ceiling, "lag_limit": value.lag_limit, "group": value.group}
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, StrEnum):
            value = str(value)
        data[item.name] = value
    return data


def _stored_fields(cls: type[RunOptions | PipelineOptions], data: Any, what: str) -> dict[str, Any]:
    """A stored document's fields, once its version and keys are ones this daemon wrote."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} options are an object, not {type(data).__name__}")
    values = dict(data)
    version = values.pop("v", None)
    if version != VERSION:
        raise ValueError(f"{what} options of version {version!r}: this daemon reads version {VERSION}")
    unknown = sorted(set(values) - {item.name for item in fields(cls)})
    if unknown:
        raise ValueError(f"unknown {what} options: {', '.join(unknown)}")
    return values


def _strings(name: str, value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"run option {name} is a list of strings")
    return list(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_common(options: RunOptions | PipelineOptions) -> None:
    """The fields runs and pipelines share have the types they declare."""
    for name, allowed in (("topic_mode", get_args(Topic)), ("on_error", (None, *get_args(OnError)))):
        if getattr(options, name) not in allowed:
            raise ValueError(f"option {name}={getattr(options, name)!r}: one of {allowed}")
    if not isinstance(options.headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.headers.items()
    ):
        raise ValueError("option headers maps names to text")
    if not isinstance(options.watch, tuple) or not all(isinstance(item, str) for item in options.watch):
        raise ValueError("option watch is a tuple of strings")
    if options.request is not None and not isinstance(options.request, str):
        raise ValueError("option request is text, or absent")
    if not isinstance(options.cluster, str) or not CLUSTER_NAME.match(options.cluster):
        raise ValueError(f"option cluster={options.cluster!r}: a cluster name")


def _check(options: RunOptions) -> None:
    """Every field has the type it declares: a decode of a damaged row fails here, not far away."""
    _check_common(options)
    choices: dict[str, tuple[Any, ...]] = {
        "ordering": get_args(Ordering),
        "timestamp": (None, *get_args(Timestamp)),
        "delivery": get_args(Delivery),
    }
    for name, allowed in choices.items():
        if getattr(options, name) not in allowed:
            raise ValueError(f"run option {name}={getattr(options, name)!r}: one of {allowed}")
    if not isinstance(options.window, WindowKind):
        raise ValueError(f"run option window={options.window!r}: one of {[str(k) for k in WindowKind]}")
    if not isinstance(options.relative, bool):
        raise ValueError("run option relative is true or false")
    if not _is_int(options.workers) or options.workers < 1:
        raise ValueError(f"run option workers={options.workers!r}: a whole number of at least 1")
    for name in ("partitions", "planned_rows", "ramp_s", "max_mb"):
        value = getattr(options, name)
        if value is not None and (not _is_int(value) or value < 0):
            raise ValueError(f"run option {name}={value!r}: a whole number, or absent")
    for name in ("planned_eta_s", "speed", "shaped_s"):
        value = getattr(options, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ValueError(f"run option {name}={value!r}: a number of at least 0, or absent")
    for name in (
        "dlq_topic",
        "approved_by",
        "where",
        "keys_file",
        "keys_digest",
        "erasures",
        "erasures_as_of",
        "repair_of",
        "redrive_of",
    ):
        value = getattr(options, name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"run option {name} is text, or absent")
    for name in ("overrides", "fields", "repairs", "redrives"):
        value = getattr(options, name)
        if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"run option {name} is a tuple of strings")
    if options.files is not None and (
        not isinstance(options.files, tuple) or not all(isinstance(item, str) for item in options.files)
    ):
        raise ValueError("run option files is a tuple of strings, or absent")
    if options.auto is not None and not isinstance(options.auto, AutoRate):
        raise ValueError("run option auto is an AutoRate, or absent")
    if options.on_error == "dlq" and options.dlq_topic is None:
        raise ValueError("run option on_error=dlq names its dlq_topic")

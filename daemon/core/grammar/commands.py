"""The commands ``parse`` returns: frozen values that check themselves on construction.

A command built in code (the CLI, a test, the API) is held to the same rules as a typed one, and
each refusal shows the usage line of that command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from daemon.core.auto_rate import AutoRate
from daemon.core.cron import parse_cron
from daemon.core.grammar.auto import AUTO_OPTIONS, check_auto
from daemon.core.grammar.drain import check_drain_groups
from daemon.core.grammar.groups import LagCommand, RewindCommand
from daemon.core.grammar.help import USAGE
from daemon.core.grammar.predicates import Predicate, check_canonical, columns_of
from daemon.core.grammar.run_control import PauseRunCommand, ResumeRunCommand, TpsCommand
from daemon.core.grammar.selection import check_key_file, check_listed
from daemon.core.grammar.shaped import check_speed
from daemon.core.grammar.sources import SourcesCommand
from daemon.core.grammar.values import (
    MAX_IDLE_DAYS,
    MAX_TPS,
    MAX_WORKERS,
    GrammarError,
    blaming,
    check_choice,
    check_column,
    check_headers,
    check_id,
    check_range,
    check_snapshot,
    check_source,
)
from daemon.core.ids import PIPELINE_ID_PATTERN, RUN_ID_PATTERN
from daemon.core.quantities import MAX_DURATION_SECONDS, MINUTE, InvalidValue
from daemon.core.rate_shape import MAX_MB, MAX_RAMP_S
from daemon.core.windows import (
    DayWindow,
    RecentDayWindow,
    RelativeWindow,
    TimeWindow,
    Window,
    in_zone,
    parse_zone,
)

Topic = Literal["auto", "live"]
Ordering = Literal["entity", "none"]
Timestamp = Literal["event", "replay"]  # a record's Kafka timestamp: the row's event time, or publish time
ListFilter = Literal["all", "mine", "running"]
PipelineFilter = Literal["all", "mine", "idle"]
Incremental = Literal["watermark", "snapshot"]  # past a column that only grows, or past a table commit
INCREMENTAL_CHOICES: tuple[Incremental, ...] = ("watermark", "snapshot")
OnError = Literal["fail", "dlq"]  # a record that cannot be published: fail the run, or set it aside
ON_ERROR_CHOICES: tuple[OnError, ...] = ("fail", "dlq")
# idempotent: a retried task may send again (counted); transactional: Kafka transactions, once for
# consumers that read committed (ADR 0057)
Delivery = Literal["idempotent", "transactional"]
DELIVERY_CHOICES: tuple[Delivery, ...] = ("idempotent", "transactional")

TRANSACTIONAL_DLQ = (
    "delivery=transactional does not combine with on_error=dlq: a dead letter is sent outside the "
    "transactions; give on_error=fail, or delivery=idempotent"
)

RUN_OPTIONS = (
    "tps",
    "topic",
    "headers",
    "workers",
    "ordering",
    "force",
    "timestamp",
    "on_error",
    "delivery",
    "watch",
    "ramp",
    "max_mb",
    "speed",
    "tz",
    *AUTO_OPTIONS,
    "keys",
    "types",
    "fields",
    "snapshot",
    "where",
)
SCHEDULE_OPTIONS = (
    "every",
    "cron",
    "watermark",
    "incremental",
    "tps",
    "topic",
    "lookback",
    "headers",
    "idle_after",
    "on_error",
    "watch",
    "where",
)


@dataclass(frozen=True)
class ReplaySpec:
    """What to replay; shared by ``ReplayCommand`` and ``PlanCommand`` (which only estimates it)."""

    source: str
    window: Window
    tps: int | None = None  # None: the service's default rate
    topic: Topic = "auto"
    headers: tuple[tuple[str, str], ...] = ()
    workers: int | None = None
    ordering: Ordering = "entity"
    force: bool = False  # replay into the live topic even over an overlapping recent run
    timestamp: Timestamp | None = None  # None: the source's default (catalog)
    on_error: OnError | None = None  # None: the source's default (catalog)
    delivery: Delivery | None = None  # None: the source's default (catalog)
    watch: tuple[str, ...] = ()  # consumer groups whose drain the run watches after it ends
    auto: AutoRate | None = None  # tps=auto: the daemon steers the rate from a group's lag (tps stays None)
    tz: str | None = None  # the zone the window's days and times were written in (IANA name); None: UTC
    ramp_s: int | None = None  # seconds from a tenth of the rate up to all of it (daemon.core.rate_shape)
    max_mb: int | None = None  # a byte ceiling beside the rate, megabytes per second; None: none
    # tps=original: each event at its own time, this many times faster, ``tps`` the ceiling (max=)
    speed: float | None = None
    where: Predicate | None = None  # where=: the rows of the window to replay; None: all of them
    keys: tuple[str, ...] = ()  # keys=: only these entities' events (the source's key column)
    keys_file: str | None = None  # keys=@<file>: the entities listed in a file (thousands of them)
    types: tuple[str, ...] = ()  # types=: only events of these types (the source's type_column)
    fields: tuple[str, ...] = ()  # fields=: only these columns in each JSON value; (): the source's
    snapshot: str | None = None  # snapshot=: read this Iceberg snapshot / Delta version; None: the current

    def __post_init__(self) -> None:
        if self.where is not None:
            check_canonical(self.where)
        with blaming(None, USAGE["plan" if isinstance(self, PlanCommand) else "replay"]):
            check_source(self.source)
            if not isinstance(self.window, DayWindow | TimeWindow | RelativeWindow | RecentDayWindow):
                raise InvalidValue(
                    None, "window must be a DayWindow, TimeWindow, RelativeWindow or RecentDayWindow"
                )
            if self.tz is not None:
                if parse_zone(self.tz) != self.tz:
                    raise InvalidValue(
                        None, f"tz must be spelled as the tz database does: {parse_zone(self.tz)}"
                    )
                if isinstance(self.window, DayWindow):
                    in_zone(self.window, self.tz)  # its days must exist as instants in that zone
            check_range("tps", self.tps, 1, MAX_TPS)
            check_choice("topic", self.topic, ("auto", "live"))
            check_headers(self.headers)
            check_range("workers", self.workers, 1, MAX_WORKERS)
            check_choice("ordering", self.ordering, ("entity", "none"))
            if not isinstance(self.force, bool):
                raise InvalidValue(None, "force must be true or false")
            if self.timestamp is not None:
                check_choice("timestamp", self.timestamp, ("event", "replay"))
            if self.on_error is not None:
                check_choice("on_error", self.on_error, ON_ERROR_CHOICES)
            if self.delivery is not None:
                check_choice("delivery", self.delivery, DELIVERY_CHOICES)
                if self.delivery == "transactional" and self.on_error == "dlq":
                    raise InvalidValue(None, TRANSACTIONAL_DLQ)
            check_drain_groups(self.watch)
            check_range("ramp", self.ramp_s, 1, MAX_RAMP_S)
            check_range("max_mb", self.max_mb, 1, MAX_MB)
            for name in ("keys", "types", "fields"):
                if getattr(self, name):
                    check_listed(name, getattr(self, name), columns=name == "fields")
            if self.snapshot is not None:
                check_snapshot(self.snapshot)
            if self.keys_file is not None:
                check_key_file(self.keys_file)
                if self.keys:
                    raise InvalidValue(None, "give keys=k1,k2 or keys=@<file>, not both")
            if self.speed is not None:
                check_speed(self.speed)
                if self.auto is not None:
                    raise InvalidValue(None, "give tps=original or tps=auto, not both")
                if self.ramp_s is not None:
                    raise InvalidValue(None, "ramp= is for a flat rate; tps=original keeps the traffic's own")
            if self.auto is not None:
                if not isinstance(self.auto, AutoRate):
                    raise InvalidValue(None, "auto must be an AutoRate")
                if self.tps is not None:
                    raise InvalidValue(None, "give tps=N or tps=auto, not both")
                check_auto(self.auto)


@dataclass(frozen=True)
class ReplayCommand(ReplaySpec):
    """Replay a window of a source's history to a topic."""


@dataclass(frozen=True)
class PlanCommand(ReplaySpec):
    """Dry run: what a replay with these options would read, send and take."""


@dataclass(frozen=True)
class StatusCommand:
    run_id: str | None = None  # None: the caller's latest run

    def __post_init__(self) -> None:
        if self.run_id is not None:
            with blaming(None, USAGE["status"]):
                check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class ListCommand:
    filter: ListFilter = "all"

    def __post_init__(self) -> None:
        with blaming(None, USAGE["list"]):
            check_choice("filter", self.filter, ("all", "mine", "running"))


@dataclass(frozen=True)
class CancelCommand:
    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["cancel"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class RepairCommand:
    """Publish only the ids a finished run's reconcile found missing, then reconcile the whole run."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["repair"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class RedriveCommand:
    """Send a finished run's dead letters back to its topic, paced like a replay, then reconcile them."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["redrive"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class ReconcileCommand:
    """Check a finished run's event ids against its topic again (in a Spark job); publishes nothing."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["reconcile"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class ChartCommand:
    """A finished run's events per second against its target, as a PNG."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["chart"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class OpenCommand:
    """A link to a run's page, or to the console: it signs the asker in to the pages."""

    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.run_id is not None:
            with blaming(None, USAGE["open"]):
                check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class HelpCommand:
    topic: str | None = None  # a key of USAGE, or None for everything

    def __post_init__(self) -> None:
        if self.topic is not None and self.topic not in USAGE:
            raise GrammarError(f"no help topic '{self.topic}'", usage=USAGE["help"])


@dataclass(frozen=True)
class ScheduleCommand:
    """An incremental pipeline: every period (or on a cron), replay rows past the watermark, or (with
    ``incremental="snapshot"``) the rows an Iceberg or Delta table's commits appended since the last
    published snapshot."""

    source: str
    every_seconds: int | None
    cron: str | None
    watermark: str | None
    incremental: Incremental = "watermark"
    tps: int | None = None
    topic: Topic = "auto"
    lookback_seconds: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    idle_after_days: int | None = None
    on_error: OnError | None = None  # None: the source's default (catalog), read at each run
    watch: tuple[str, ...] = ()  # consumer groups each run watches drain after it ends
    where: Predicate | None = None  # where=: each run publishes only the rows this keeps

    def __post_init__(self) -> None:
        if self.where is not None:
            check_canonical(self.where)
            if self.watermark is not None and self.watermark in columns_of(self.where):
                raise GrammarError(
                    f"a filter on the watermark column `{self.watermark}` would break the pipeline's "
                    "watermark (rows it leaves out would move it anyway, or hold it back forever): "
                    "filter on other columns",
                    token=self.watermark,
                    usage=USAGE["schedule"],
                )
        with blaming(None, USAGE["schedule"]):
            check_source(self.source)
            if (self.every_seconds is None) == (self.cron is None):
                raise InvalidValue(None, "give exactly one of every= or cron=")
            check_range("every", self.every_seconds, MINUTE, MAX_DURATION_SECONDS)
            if self.cron is not None and parse_cron(self.cron) != self.cron:
                raise InvalidValue(None, "cron must be five fields separated by single spaces")
            check_choice("incremental", self.incremental, INCREMENTAL_CHOICES)
            if self.incremental == "snapshot":
                if self.watermark is not None:
                    raise InvalidValue(
                        None, "incremental=snapshot follows table commits: leave out watermark="
                    )
                if self.lookback_seconds:
                    raise InvalidValue(
                        None, "lookback= moves a watermark back; incremental=snapshot has none"
                    )
            elif self.watermark is None:
                raise InvalidValue(None, "missing watermark=<column> (the column that only grows)")
            else:
                check_column(self.watermark)
            check_range("tps", self.tps, 1, MAX_TPS)
            check_choice("topic", self.topic, ("auto", "live"))
            check_range("lookback", self.lookback_seconds, 0, MAX_DURATION_SECONDS)
            check_headers(self.headers)
            check_range("idle_after days", self.idle_after_days, 1, MAX_IDLE_DAYS)
            if self.on_error is not None:
                check_choice("on_error", self.on_error, ON_ERROR_CHOICES)
            check_drain_groups(self.watch)


@dataclass(frozen=True)
class PipelinesCommand:
    filter: PipelineFilter = "all"

    def __post_init__(self) -> None:
        with blaming(None, USAGE["pipelines"]):
            check_choice("filter", self.filter, ("all", "mine", "idle"))


@dataclass(frozen=True)
class PipelineAction:
    """A command on one pipeline; the subclass decides which (see ``ACTION_WORDS``)."""

    pipeline_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE[ACTION_WORDS[type(self)]]):
            check_id(self.pipeline_id, PIPELINE_ID_PATTERN, "pipeline id")


@dataclass(frozen=True)
class PipelineCommand(PipelineAction):
    """Show one pipeline."""


@dataclass(frozen=True)
class PauseCommand(PipelineAction):
    pass


@dataclass(frozen=True)
class ResumeCommand(PipelineAction):
    pass


@dataclass(frozen=True)
class UnscheduleCommand(PipelineAction):
    pass


ACTION_WORDS: dict[type[PipelineAction], str] = {
    PipelineCommand: "pipeline",
    PauseCommand: "pause",
    ResumeCommand: "resume",
    UnscheduleCommand: "unschedule",
}

Command: TypeAlias = (
    ReplayCommand
    | PlanCommand
    | StatusCommand
    | ListCommand
    | CancelCommand
    | ReconcileCommand
    | RepairCommand
    | RedriveCommand
    | ChartCommand
    | OpenCommand
    | HelpCommand
    | ScheduleCommand
    | PipelinesCommand
    | PipelineCommand
    | PauseCommand
    | ResumeCommand
    | UnscheduleCommand
    | LagCommand
    | RewindCommand
    | TpsCommand
    | PauseRunCommand
    | ResumeRunCommand
    | SourcesCommand
)

"""The Replay Service's wire contract: every request and answer between the daemon and its clients.

The daemon's routes declare these, the `DaemonClient` parses its answers into them, and Slack rendering
reads them, so the bot, the CLI and the API cannot drift apart. Requests are built from the same
parsed commands both front ends use (`ReplayBody.of(command)`), and read back into them
(`body.command(...)`). Only the core and pydantic are imported here: a store row becomes one of these in
`daemon.usecases.wire`, in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from daemon.core.auto_rate import AutoRate
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.cron import parse_cron
from daemon.core.drain import DrainStage
from daemon.core.errors import BadRequest
from daemon.core.grammar import (
    Delivery,
    Incremental,
    OnError,
    PlanCommand,
    ReplayCommand,
    ScheduleCommand,
    Timestamp,
    Topic,
)
from daemon.core.grammar.predicates import MAX_PREDICATE_CHARS, parse_predicate, render_predicate
from daemon.core.quantities import parse_duration, render_duration
from daemon.core.reconcile import IdList, Tally, Verdict, verdict
from daemon.core.run_options import WindowKind
from daemon.core.states import FailureKind, PipelineState, RunKind, RunState
from daemon.core.windows import label, parse_window

T = TypeVar("T")
Spec = TypeVar("Spec", ReplayCommand, PlanCommand)


class AutoBody(BaseModel):
    """``tps=auto max=N lag<M group=G``: the daemon steers the rate to keep G's lag under M."""

    model_config = ConfigDict(extra="forbid")

    max: int = Field(ge=1, description="the ceiling: the rate never goes above it")
    lag_below: int = Field(ge=1, description="keep the group's lag on the run's topic under this")
    group: str = Field(min_length=1, max_length=249, description="the consumer group whose lag steers")

    @classmethod
    def of(cls, auto: AutoRate | None) -> AutoBody | None:
        return None if auto is None else cls(max=auto.ceiling, lag_below=auto.lag_limit, group=auto.group)


class ReplayBody(BaseModel):
    """A replay or plan request: the same fields as the `/replay` command."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=63)
    window: str = Field(min_length=1, max_length=80, examples=["2024-01-01..2024-01-07", "last=6h"])
    tz: str | None = Field(
        default=None, max_length=64, examples=["Europe/Paris"], description="the window's zone; None: UTC"
    )
    tps: int | None = Field(default=None, description="events per second across the whole job")
    topic: Literal["auto", "live"] = "auto"
    headers: dict[str, str] = Field(default_factory=dict)
    workers: int | None = Field(default=None, ge=1, le=512)
    ordering: Literal["entity", "none"] = "entity"
    force: bool = Field(default=False, description="replay into the live topic over an overlapping run")
    timestamp: Timestamp | None = Field(
        default=None, description="records' Kafka timestamp: event time or publish time; None = the source's"
    )
    on_error: OnError | None = Field(
        default=None, description="a record that cannot be published: fail the run, or set it aside (dlq)"
    )
    delivery: Delivery | None = Field(
        default=None,
        description="idempotent, or in Kafka transactions (once for readers of committed records); "
        "None = the source's",
    )
    watch: list[str] = Field(
        default_factory=list, description="consumer groups whose drain the run watches after it ends"
    )
    auto: AutoBody | None = Field(default=None, description="tps=auto (then leave tps out)")
    ramp_s: int | None = Field(
        default=None, description="seconds from a tenth of the rate up to all of it; None: all of it at once"
    )
    max_mb: int | None = Field(default=None, description="at most this many megabytes a second; None: none")
    speed: float | None = Field(
        default=None,
        description="tps=original: each event at its own time this many times faster; tps the ceiling",
    )
    keys: list[str] = Field(default_factory=list, description="keys=: only these entities' events")
    keys_file: str | None = Field(
        default=None, max_length=1_024, description="keys=@<file>: a file of keys (one per line, or Parquet)"
    )
    types: list[str] = Field(default_factory=list, description="types=: only events of these types")
    fields: list[str] = Field(default_factory=list, description="fields=: only these columns in each value")
    snapshot: str | None = Field(
        default=None,
        max_length=20,
        description="snapshot=: read this Iceberg snapshot id or Delta version; None: the table's current",
    )
    where: str | None = Field(
        default=None,
        max_length=MAX_PREDICATE_CHARS,
        examples=["merchant IN ('m-1', 'm-2') AND amount > 100"],
        description="where=: only the rows this filter keeps (the grammar's filter language); None: all",
    )
    confirm_live: bool = False
    approved_by: str | None = Field(
        default=None, max_length=64, description="the second owner who approved a live replay"
    )
    slack_channel: str | None = Field(default=None, max_length=64)

    @classmethod
    def of(
        cls,
        command: ReplayCommand | PlanCommand,
        *,
        confirm_live: bool = False,
        approved_by: str | None = None,
        slack_channel: str | None = None,
    ) -> ReplayBody:
        """The request for a parsed replay or plan command."""
        return cls(
            source=command.source,
            window=label(command.window, command.tz),
            tz=command.tz,
            tps=command.tps,
            topic=command.topic,
            headers=dict(command.headers),
            workers=command.workers,
            ordering=command.ordering,
            force=command.force,
            timestamp=command.timestamp,
            on_error=command.on_error,
            delivery=command.delivery,
            watch=list(command.watch),
            auto=AutoBody.of(command.auto),
            ramp_s=command.ramp_s,
            max_mb=command.max_mb,
            speed=command.speed,
            where=None if command.where is None else render_predicate(command.where),
            keys=list(command.keys),
            keys_file=command.keys_file,
            types=list(command.types),
            fields=list(command.fields),
            snapshot=command.snapshot,
            confirm_live=confirm_live,
            approved_by=approved_by,
            slack_channel=slack_channel,
        )

    def command(self, kind: type[Spec]) -> Spec:
        """The request read back as the command it came from (`ReplayCommand` or `PlanCommand`)."""
        return kind(
            source=self.source,
            window=parse_window(self.window, self.tz),
            tz=self.tz,
            tps=self.tps,
            topic=self.topic,
            headers=tuple(sorted(self.headers.items())),
            workers=self.workers,
            ordering=self.ordering,
            force=self.force,
            timestamp=self.timestamp,
            on_error=self.on_error,
            delivery=self.delivery,
            watch=tuple(self.watch),
            auto=None
            if self.auto is None
            else AutoRate(ceiling=self.auto.max, lag_limit=self.auto.lag_below, group=self.auto.group),
            ramp_s=self.ramp_s,
            max_mb=self.max_mb,
            speed=self.speed,
            where=None if self.where is None else parse_predicate(self.where),
            keys=tuple(self.keys),
            keys_file=self.keys_file,
            types=tuple(self.types),
            fields=tuple(self.fields),
            snapshot=self.snapshot,
        )


class RepairBody(BaseModel):
    """`/replay repair r-…`: publish only the ids the run's reconcile found missing."""

    model_config = ConfigDict(extra="forbid")

    confirm_live: bool = Field(default=False, description="the run published into its live topic: confirm")
    slack_channel: str | None = Field(default=None, max_length=64)


class ScheduleBody(BaseModel):
    """A scheduled pipeline: the same fields as `/replay schedule`."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=63)
    every: str | None = Field(default=None, max_length=20, examples=["15m", "1h", "1d"])
    cron: str | None = Field(default=None, max_length=120, examples=["*/15 * * * *"])
    watermark: str | None = Field(
        default=None, min_length=1, max_length=128, description="the column that only grows"
    )
    incremental: Incremental = Field(
        default="watermark",
        description="watermark: rows past the watermark column; snapshot: the rows each Iceberg or "
        "Delta commit appended (no watermark)",
    )
    tps: int | None = None
    topic: Literal["auto", "live"] = "auto"
    lookback: str | None = Field(default=None, max_length=20, examples=["1h"])
    headers: dict[str, str] = Field(default_factory=dict)
    idle_after_days: int | None = Field(default=None, ge=1, le=3660)
    on_error: OnError | None = Field(default=None, description="for every run; None = the source's default")
    watch: list[str] = Field(
        default_factory=list, description="consumer groups whose drain each run watches after it ends"
    )
    where: str | None = Field(
        default=None, max_length=MAX_PREDICATE_CHARS, description="where=: each run sends only these rows"
    )
    confirm_live: bool = False
    approved_by: str | None = Field(
        default=None,
        max_length=64,
        description="the second owner who approved a live pipeline (service credential only)",
    )
    slack_channel: str | None = Field(default=None, max_length=64)

    @classmethod
    def of(
        cls,
        command: ScheduleCommand,
        *,
        confirm_live: bool = False,
        approved_by: str | None = None,
        slack_channel: str | None = None,
    ) -> ScheduleBody:
        """The request for a parsed `schedule` command."""
        every = command.every_seconds
        return cls(
            source=command.source,
            every=render_duration(every) if every is not None else None,
            cron=command.cron,
            watermark=command.watermark,
            incremental=command.incremental,
            tps=command.tps,
            topic=command.topic,
            lookback=render_duration(command.lookback_seconds) if command.lookback_seconds else None,
            headers=dict(command.headers),
            idle_after_days=command.idle_after_days,
            on_error=command.on_error,
            watch=list(command.watch),
            where=None if command.where is None else render_predicate(command.where),
            confirm_live=confirm_live,
            approved_by=approved_by,
            slack_channel=slack_channel,
        )

    def command(self) -> ScheduleCommand:
        return ScheduleCommand(
            source=self.source,
            every_seconds=_option("every", self.every, lambda v: parse_duration(v, minimum=60)),
            cron=_option("cron", self.cron, parse_cron),
            watermark=self.watermark,
            incremental=self.incremental,
            tps=self.tps,
            topic=self.topic,
            lookback_seconds=_option("lookback", self.lookback, parse_duration) or 0,
            headers=tuple(sorted(self.headers.items())),
            idle_after_days=self.idle_after_days,
            on_error=self.on_error,
            watch=tuple(self.watch),
            where=None if self.where is None else parse_predicate(self.where),
        )


def _option(name: str, value: str | None, parse: Callable[[str], T]) -> T | None:
    """Parse one option's text; an error names the option as the user wrote it (`every=0m`)."""
    if value is None:
        return None
    try:
        return parse(value)
    except BadRequest as exc:
        reason = getattr(exc, "reason", str(exc))
        raise BadRequest(f"`{name}={value}`: {reason}") from None


class KeepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    days: int | None = Field(default=None, ge=1, le=365)


class UnscheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    confirm: bool = False


class ResumeBody(BaseModel):
    """Resume a pipeline; a live one of a two-owner source names the owner who approved (the bot)."""

    model_config = ConfigDict(extra="forbid")

    approved_by: str | None = Field(default=None, max_length=64)


class DeleteBody(BaseModel):
    """Delete an idle pipeline now: refused without `confirm` (the bot's button asks first)."""

    model_config = ConfigDict(extra="forbid")

    confirm: bool = False


class TpsBody(BaseModel):
    """A running run's new rate (`/replay tps r-… 5k`); bounds are the service's (`REPLAY_MAX_TPS`)."""

    model_config = ConfigDict(extra="forbid")

    tps: int = Field(description="events per second across the whole job, from a moment from now")


class RateChangeOut(BaseModel):
    """From `at` on, the run's rate is `tps`; none while `paused` (`tps` is then the rate it resumes at)."""

    at: datetime
    tps: int
    paused: bool = False


class OverlapOut(BaseModel):
    """A running or recently succeeded replay whose window a live replay would publish again."""

    run_id: str
    requester: str
    state: RunState
    window: str


class PlanOut(BaseModel):
    """What a replay would do: the dry run's answer, and what a live confirmation shows."""

    source: str
    window: str
    window_start: datetime
    window_end: datetime
    rows: int = Field(description="rows in the window (that the filter keeps), counted from the table")
    where: str | None = Field(
        default=None,
        description="where=, keys= and types= as one filter, canonical; None: every row",
    )
    fields: list[str] = Field(
        default_factory=list, description="fields=: the value's columns; []: the source's"
    )
    keys_file: str | None = Field(default=None, description="keys=@<file>: the key file read")
    keys_count: int | None = Field(default=None, description="keys=@<file>: its distinct keys")
    tps: int
    ramp_s: int | None = Field(default=None, description="ramp=: seconds from a tenth of `tps` up to it")
    max_mb: int | None = Field(default=None, description="max_mb=: megabytes a second at most, beside `tps`")
    speed: float | None = Field(
        default=None, description="tps=original: the speed-up; `tps` is then the ceiling"
    )
    peak_tps: float | None = Field(
        default=None, description="tps=original: the busiest second of the window's own times, sped up"
    )
    slid_s: float | None = Field(
        default=None, description="tps=original: how much later the last event goes because of the ceiling"
    )
    eta_s: float = Field(
        description="from the command to the final state: the wait for a launcher slot + start-up + "
        "publishing + wind-down"
    )
    eta_startup_s: float | None = Field(
        default=None, description="submission to the first event, learned from the launcher's recent runs"
    )
    warm: bool | None = Field(
        default=None,
        description="it would start warm now (a standby driver is ready: ADR 0049), or cold; None: the "
        "launcher cannot tell",
    )
    eta_publish_s: float | None = Field(default=None, description="rows / tps")
    eta_finish_s: float | None = Field(default=None, description="the last event to the final state")
    eta_queue_s: float = Field(
        default=0.0, description="waiting for a launcher slot behind the runs ahead (0: one is free)"
    )
    runs_ahead: int = Field(default=0, description="runs holding a slot or queued ahead while it waits")
    topic: str
    topic_mode: Literal["auto", "live"]
    partitions: int
    workers: int
    headers: dict[str, str] = Field(default_factory=dict)
    ordering: Literal["entity", "none"] = "entity"
    timestamp: Timestamp = Field(default="replay", description="the records' Kafka timestamp, as resolved")
    on_error: OnError = Field(default="fail", description="what a bad record does, as resolved")
    delivery: Delivery = Field(default="idempotent", description="how records are sent, as resolved")
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster of the topic: the source's")
    overlapping: list[OverlapOut] = Field(
        default_factory=list, description="live replays this one would repeat (refused unless force)"
    )
    live_approvals: int = Field(default=1, description="owners who must agree to a live replay (1 or 2)")
    rewind_instead: str | None = Field(
        default=None, description="the window is still on the live topic: a rewind that re-delivers it"
    )
    snapshot: str | None = Field(
        default=None,
        description="the table version counted, which the run reads (Iceberg snapshot id, Delta version)",
    )
    listed_files: int | None = Field(
        default=None,
        description="a Parquet table: the window's files listed and counted, which the run reads",
    )
    erasures: str | None = Field(default=None, description="the source's erasure list; None: none")
    erased_keys: int | None = Field(default=None, description="keys on the erasure list the run will honour")
    erasures_as_of: datetime | None = Field(
        default=None, description="the list's newest erasure: its version"
    )


class ListedIdOut(BaseModel):
    event_id: str
    records: int = Field(description="its records on the topic under the run's id (0: missing)")


class VerdictIdsOut(BaseModel):
    """One page of a verdict list: the ids behind its count, in the job's order (sorted by id)."""

    run_id: str
    kind: IdList
    listed: int = Field(description="ids the list holds: the first 100,000 when the count is higher")
    ids: list[ListedIdOut]
    next_after: int | None = Field(description="after= for the next page; None: this page is the last")


class ReconcileOut(BaseModel):
    """The event ids a run selected against the ones on its topic carrying its run id header.

    Counts are None when the reconcile could not be done (`error` says why): never 0 for unknown."""

    at: datetime
    selected: int | None = Field(description="distinct event ids the run selected")
    found: int | None = Field(description="records on the topic carrying this run's replay-run-id header")
    missing: int | None
    unexpected: int | None
    duplicates: int | None = Field(description="extra copies: each id's count beyond one, summed")
    missing_sample: list[str] = Field(default_factory=list, max_length=10)
    unexpected_sample: list[str] = Field(default_factory=list, max_length=10)
    duplicates_sample: list[str] = Field(default_factory=list, max_length=10)
    missing_dead_lettered: int | None = Field(
        default=None, description="of the missing, how many are on the dead-letter topic; None: no DLQ"
    )
    scanned_records: int | None = None
    error: str | None = None
    on_demand: bool = Field(default=False, description="asked for after the run, not at its end")
    suppressed: int | None = Field(
        default=None, description="erased keys' events the selection left out (not expected); None: no list"
    )
    erasures_as_of: str | None = Field(
        default=None, description="the erasure list's newest erasure the run honoured (its version)"
    )
    repaired_by: str | None = Field(
        default=None, description="the repair run whose verdict this is (the run's records and its own)"
    )

    def verdict(self) -> Verdict:
        """What the counts mean (`daemon.core.reconcile`), the one reading every front end shows."""
        return verdict(
            Tally(
                selected=self.selected,
                found=self.found,
                missing=self.missing,
                unexpected=self.unexpected,
                duplicates=self.duplicates,
                missing_dead_lettered=self.missing_dead_lettered,
                error=self.error,
                suppressed=self.suppressed,
                erasures_as_of=self.erasures_as_of,
            )
        )


class RateSeriesOut(BaseModel):
    """Confirmed deliveries per second, from the job's delivery reports (its own clock)."""

    start: datetime = Field(description="the first second (UTC)")
    counts: list[int]
    target_tps: int
    targets: list[float] = Field(
        default_factory=list,
        description="the rate asked for in each second (ramp, rate changes and pauses); empty: target_tps",
    )


class GroupDrainOut(BaseModel):
    """A consumer group a run watches drain (`watch=`): its lag on the run's topic against its baseline.

    Lags are None when unknown (no committed offset on the topic), never 0; `note` says why."""

    group: str
    state: DrainStage
    baseline: int | None = Field(description="the group's lag when the run started")
    lag: int | None = Field(description="its lag at `last_at`")
    last_at: datetime | None = None
    drain_per_s: float | None = Field(default=None, description="lag shrinking per second; < 0: growing")
    seconds_to_baseline: float | None = Field(default=None, description="at the current drain")
    caught_up_at: datetime | None = None
    caught_up_after_s: float | None = Field(default=None, description="seconds after the run's last event")
    note: str | None = None


class RunOut(BaseModel):
    """A run. Two row counts, never merged: the plan's (known at once, from metadata) and the job's
    own (known once it reported); `confirmed` is what the broker acknowledged, the count that matters."""

    id: str
    kind: RunKind
    state: RunState
    source: str
    window: str | None
    topic: str
    tps: int = Field(description="the rate asked for at launch")
    current_tps: int = Field(description="the rate as last set (live control); `tps` until changed")
    delivery: Delivery = Field(
        default="idempotent",
        description="transactional: consumers reading committed see each event once, whatever was retried",
    )
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster of its topic")
    repair_of: str | None = Field(
        default=None, description="a repair: the run whose missing ids it publishes"
    )
    redrive_of: str | None = Field(default=None, description="a redrive: the run whose dead letters it sends")
    where: str | None = Field(
        default=None,
        description="where=, keys= and types= as one filter, canonical; None: every row",
    )
    fields: list[str] = Field(
        default_factory=list, description="fields=: the value's columns; []: the source's"
    )
    keys_file: str | None = Field(default=None, description="keys=@<file>: the key file the run reads")
    ramp_s: int | None = Field(default=None, description="ramp=: seconds from a tenth of `tps` up to it")
    max_mb: int | None = Field(default=None, description="max_mb=: megabytes a second at most, beside `tps`")
    speed: float | None = Field(
        default=None, description="tps=original: the speed-up; `tps` is then the ceiling"
    )
    slid_s: float | None = Field(
        default=None,
        description="tps=original: how much later the ceiling let the last event go; None: unknown",
    )
    paused: bool = Field(default=False, description="paused by live control (as last set)")
    rate_changes: list[RateChangeOut] = Field(
        default_factory=list, description="live control: the run's rate changes, pauses and resumes, in order"
    )
    requester: str
    rows_planned: int | None = Field(description="rows the plan counted; None for a pipeline run")
    snapshot: str | None = Field(
        default=None,
        description="the table version the run reads (Iceberg snapshot id, Delta version); None for Parquet",
    )
    listed_files: int | None = Field(
        default=None, description="a Parquet table: how many files its plan listed, the only ones it reads"
    )
    rows_selected: int | None = Field(description="rows the job selected; None until it reports")
    confirmed: int | None = Field(
        description="events the broker confirmed; null: unknown (see on_topic_at_least)"
    )
    achieved_tps: float | None
    failed_tasks: int
    duplicates: int | None = Field(description="records sent twice by retried tasks; None: not measured")
    dead_lettered: int | None = Field(
        default=None, description="records set aside on the dead-letter topic (on_error=dlq); None: unknown"
    )
    dlq_topic: str | None = Field(default=None, description="where this run sets bad records aside")
    failure_reason: str | None
    failure_kind: FailureKind | None = Field(
        default=None, description="a failed run: launch, lost (no result), job (it reported failure) or plan"
    )
    on_topic_at_least: int | None = Field(
        default=None, description="a failed run: records the broker had confirmed before it failed"
    )
    behind_schedule_s: float | None = Field(default=None, description="schedule time the run could not keep")
    transactions: int | None = Field(
        default=None,
        description="transactional delivery: transactions committed; None: idempotent, or unknown",
    )
    longest_transaction_s: float | None = Field(
        default=None,
        description="transactional delivery: the longest a transaction stayed open, its commit included",
    )
    resumed: int | None = Field(
        default=None, description="delivery=transactional: rows retried tasks skipped, committed before them"
    )
    bytes_held_s: float | None = Field(
        default=None, description="max_mb: how long due events waited for bytes; None: no ceiling, or unknown"
    )
    partition_skew: float | None = Field(default=None, description="largest / smallest Spark partition")
    erasures: str | None = Field(default=None, description="the erasure list the run honoured; None: none")
    suppressed: int | None = Field(
        default=None, description="events of erased keys the run left out; None: no list, or unknown"
    )
    erasures_as_of: datetime | None = Field(
        default=None, description="the erasure list's version the run honoured: its newest erasure"
    )
    reconcile: ReconcileOut | None = None
    window_start: datetime | None = Field(default=None, description="the resolved window, UTC")
    window_end: datetime | None = None
    window_kind: WindowKind = Field(
        default=WindowKind.RANGE, description="days (whole partitions), range (event time) or watermark"
    )
    window_relative: bool = Field(
        default=False, description="written relative to its creation (last=, today, tz=): a retry pins it"
    )
    topic_mode: Topic = Field(
        default="auto", description="auto: a topic made for the run; live: the source's"
    )
    has_series: bool = Field(default=False, description="a per-second rate series (and chart) exists")
    reconciles: str | None = Field(default=None, description="a reconcile run: the run it checks")
    pipeline_id: str | None = None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    slack_channel: str | None
    slack_ts: str | None
    slack_progress_ts: str | None = None
    queue_position: int | None = Field(
        default=None, description="a queued run's place in line (1: the next to start); None otherwise"
    )
    eta_s: float | None = Field(
        default=None, description="the plan's estimate from the command to the final state, start-up included"
    )
    watch: list[GroupDrainOut] = Field(
        default_factory=list, description="consumer groups watched drain after the run (`watch=`)"
    )
    watch_deadline: datetime | None = Field(default=None, description="when an unfinished watch gives up")

    @model_validator(mode="before")
    @classmethod
    def _rate_unchanged_by_default(cls, data: Any) -> Any:
        """An answer without live control (an older daemon) runs at the rate it was launched at."""
        if isinstance(data, dict) and "current_tps" not in data and "tps" in data:
            return {**data, "current_tps": data["tps"]}
        return data

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    @property
    def rows(self) -> int | None:
        """The best count known: the job's own once it reported, the plan's until then, else None."""
        return self.rows_selected if self.rows_selected is not None else self.rows_planned

    @property
    def duration_s(self) -> float | None:
        """From the job's start to the run's end; None until both are known."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def duration_estimate_s(self) -> float | None:
        """How long the run is expected to take: the plan's estimate (start-up included, `eta_s`),
        else its rows at the asked rate; None when the count is unknown."""
        if self.eta_s is not None:
            return self.eta_s
        rows = self.rows
        return rows / self.tps if rows is not None and self.tps else None


class RunCreated(RunOut):
    created: bool


class RunPageOut(BaseModel):
    runs: list[RunOut]
    next_cursor: str | None


class ErrorOut(BaseModel):
    """Every error the API answers, whatever its status: one sentence a person can act on, and for a
    503 the dependency that is down (`kafka`, `table storage`...) and where."""

    error: str
    dependency: str | None = None
    where: str | None = None


class PipelineOut(BaseModel):
    id: str
    source: str
    schedule: str
    state: PipelineState
    incremental: Incremental = Field(
        default="watermark", description="what it follows: a column that only grows, or table commits"
    )
    watermark_column: str | None = Field(description="None: it follows the table's commits")
    where: str | None = Field(default=None, description="where=: each run sends only these rows")
    watermark: str | None = Field(
        description="the committed watermark: the column's value, or the last snapshot published"
    )
    lookback_seconds: int
    tps: int
    topic: str
    topic_mode: Topic = Field(default="auto", description="auto: a topic made for it; live: the source's")
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster of its topics")
    owners: list[str]
    next_run_at: datetime | None
    last_published_at: datetime | None
    created_at: datetime
    slack_channel: str | None
    slack_ts: str | None
    deprovision_reason: str | None = Field(
        default=None, description="why it is being removed, while its removal goes on (then archived)"
    )


class PipelineDetailOut(PipelineOut):
    runs: list[RunOut]


class IdlePipelineOut(PipelineOut):
    deadline: datetime


class PipelinePageOut(BaseModel):
    pipelines: list[PipelineOut]
    next_cursor: str | None


class IdlePipelinePageOut(BaseModel):
    pipelines: list[IdlePipelineOut]
    next_cursor: str | None


class SourceOut(BaseModel):
    name: str
    description: str
    live_topic: str | None
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster of its topics")
    owners: list[str]
    live_approvals: int = Field(default=1, description="owners who must agree to publish into live (1 or 2)")
    partition_column: str
    watermark_column: str | None
    table_format: str = "parquet"  # how the table is stored
    value_format: str = "json"  # what a record's value is: json, or the raw bytes of a bronze table
    retention: str | None = None  # the catalog's word on how far back the table goes
    snapshot: str | None = Field(
        default=None,
        description="the table's current snapshot (Iceberg snapshot id, Delta version), which a replay "
        "planned now would pin; null for Parquet, which has none, or when the table could not be read",
    )
    snapshot_unreadable: str | None = Field(
        default=None, description="why the table's current snapshot could not be read (null: it was)"
    )


class SourcesOut(BaseModel):
    sources: list[SourceOut]


class HealthOut(BaseModel):
    status: str


class PageLinkBody(BaseModel):
    """`/replay open [r-…]`, `replay open [r-…]`: a link that signs the asker in to the pages."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = Field(default=None, max_length=64, description="a run's page; null: the console")


class PageLinkOut(BaseModel):
    url: str = Field(description="open it in a browser before `expires_at`: it signs you in and leads there")
    expires_at: datetime


class WhoAmIOut(BaseModel):
    """Whom a token acts for: `replay login` stores a personal token only after asking this."""

    user: str = Field(description="the acting user: a personal token's owner, or the bot's named user")
    credential: Literal["service", "personal"]


@dataclass(frozen=True)
class IdlePrompt:
    """The question put to each owner of an idle pipeline: keep it, or let it be de-provisioned."""

    pipeline: PipelineOut
    idle_since: datetime
    deadline: datetime
    keep_days: int

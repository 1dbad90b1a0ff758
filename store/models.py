"""ORM models for the job store (SQLAlchemy 2.x typed declarative).

The initial migration (``migrations/versions/0001_initial.py``) is a frozen copy of this
schema; a test compares the two so they cannot drift. No relationships are mapped on
purpose: repositories hand out detached objects, and a lazy load after the session closed
would fail far from its cause. Progress samples are read through ``RunRepository.progress``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, validates

from daemon.core.ids import new_control_key
from daemon.core.run_options import PipelineOptions, RunOptions
from daemon.core.states import FailureKind, PipelineState, RunKind, RunState
from store.sqltypes import JsonType, OptionsType, UtcDateTime, require_aware

# Deterministic constraint names, so later migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only autoincrements an INTEGER PRIMARY KEY.
BigIntId = BigInteger().with_variant(Integer(), "sqlite")


def _str_enum(enum_cls: type[Any], name: str) -> Enum:
    """Stored as VARCHAR + CHECK of the enum *values* (not a native PostgreSQL enum type)."""
    return Enum(
        enum_cls,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=16,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime()}


class _AwareTimestamps:
    """Mixin: every datetime column refuses naive values on assignment."""

    @validates(
        "window_start",
        "window_end",
        "lease_expires_at",
        "created_at",
        "admitted_at",
        "submitted_at",
        "started_at",
        "ended_at",
        "updated_at",
        "last_published_at",
        "at",
        "sent_at",
        "delivered_at",
        "next_run_at",
        "scheduled_for",
        "idle_since",
        "delete_after",
        "snoozed_until",
        "first_delivery_at",
        "last_delivery_at",
        "erasures_as_of",
        "topic_deleted_at",
        "released_at",
    )
    def _check_aware(self, key: str, value: datetime | None) -> datetime | None:
        return require_aware(key, value)


class Pipeline(_AwareTimestamps, Base):
    """A scheduled incremental publication of a lake table to a topic."""

    __tablename__ = "pipelines"
    __table_args__ = (UniqueConstraint("created_by", "idempotency_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    source: Mapped[str] = mapped_column(Text)
    schedule: Mapped[str] = mapped_column(Text)
    watermark_column: Mapped[str | None] = mapped_column(Text)  # None: it follows table commits
    watermark_value: Mapped[str | None] = mapped_column(Text)
    lookback_seconds: Mapped[int] = mapped_column(Integer, default=0)
    tps: Mapped[int] = mapped_column(Integer)
    topic: Mapped[str] = mapped_column(Text)
    topic_created: Mapped[bool] = mapped_column(Boolean, default=False)
    options: Mapped[PipelineOptions] = mapped_column(OptionsType(PipelineOptions), default=PipelineOptions)
    owners: Mapped[list[str]] = mapped_column(JsonType, default=list)
    state: Mapped[PipelineState] = mapped_column(
        _str_enum(PipelineState, "pipeline_state"), default=PipelineState.ACTIVE, index=True
    )
    idle_after_days: Mapped[int | None] = mapped_column(Integer)
    last_published_at: Mapped[datetime | None]
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    emr_application_id: Mapped[str | None] = mapped_column(String(128))
    slack_channel: Mapped[str | None] = mapped_column(String(64))
    slack_ts: Mapped[str | None] = mapped_column(String(32))
    version: Mapped[int] = mapped_column(Integer, default=1)
    next_run_at: Mapped[datetime | None]
    # Idle clean-up: the idle period owners were asked about, when it will be de-provisioned, snoozes.
    idle_since: Mapped[datetime | None]
    delete_after: Mapped[datetime | None]
    snoozed_until: Mapped[datetime | None]
    snoozed_by: Mapped[str | None] = mapped_column(String(64))
    # De-provisioning begun (paused, its run asked to stop) and why; the EMR application still to delete.
    deprovision_reason: Mapped[str | None] = mapped_column(Text)
    application_release: Mapped[str | None] = mapped_column(String(128))
    idempotency_key: Mapped[str | None] = mapped_column(String(128))  # a create's key, unique per creator


class Run(_AwareTimestamps, Base):
    """One replay, or one scheduled execution of a pipeline."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("requester", "idempotency_key"),
        UniqueConstraint("pipeline_id", "scheduled_for"),
        Index("ix_runs_created_at_id", "created_at", "id"),
        Index("ix_runs_requester_created_at", "requester", "created_at"),
        Index("ix_runs_pipeline_id_created_at", "pipeline_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[RunKind] = mapped_column(_str_enum(RunKind, "run_kind"))
    pipeline_id: Mapped[str | None] = mapped_column(ForeignKey("pipelines.id"))
    source: Mapped[str] = mapped_column(Text)
    window_start: Mapped[datetime | None]
    window_end: Mapped[datetime | None]
    window_label: Mapped[str | None] = mapped_column(Text)
    watermark_column: Mapped[str | None] = mapped_column(Text)
    watermark_low: Mapped[str | None] = mapped_column(Text)
    watermark_high: Mapped[str | None] = mapped_column(Text)
    topic: Mapped[str] = mapped_column(Text)
    topic_created: Mapped[bool] = mapped_column(Boolean, default=False)
    topic_deleted_at: Mapped[datetime | None]  # the one-off topic it created was deleted (its TTL ran out)
    tps: Mapped[int] = mapped_column(Integer)
    options: Mapped[RunOptions] = mapped_column(OptionsType(RunOptions), default=RunOptions)
    requester: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    state: Mapped[RunState] = mapped_column(_str_enum(RunState, "run_state"), index=True)
    rows_selected: Mapped[int | None] = mapped_column(BigInteger)
    # records the broker confirmed; None: unknown (the job could not count them: see on_topic_at_least)
    confirmed: Mapped[int | None] = mapped_column(BigInteger, default=0)
    failed_tasks: Mapped[int] = mapped_column(Integer, default=0)
    # records retried tasks sent twice; None: not measured (their progress beacons were unreadable)
    duplicates: Mapped[int | None] = mapped_column(BigInteger, default=0)
    # records set aside on the dead-letter topic (on_error=dlq); None until the job reported it
    dead_lettered: Mapped[int | None] = mapped_column(BigInteger)
    achieved_tps: Mapped[float | None] = mapped_column(Float)
    failure_reason: Mapped[str | None] = mapped_column(Text)
    # what kind of failure ``failure_reason`` explains (``FailureKind``); None unless the run failed
    failure_kind: Mapped[FailureKind | None] = mapped_column(_str_enum(FailureKind, "failure_kind"))
    on_topic_at_least: Mapped[int | None] = mapped_column(BigInteger)  # a failed run's confirmed so far
    behind_schedule_s: Mapped[float | None] = mapped_column(Float)
    bytes_held_s: Mapped[float | None] = mapped_column(Float)  # max_mb: due events waited for bytes
    # delivery=transactional: transactions committed, the longest one open, rows retries resumed after
    transactions: Mapped[int | None] = mapped_column(BigInteger)
    longest_transaction_s: Mapped[float | None] = mapped_column(Float)
    resumed: Mapped[int | None] = mapped_column(BigInteger)
    # an erasure list: the erased keys' events the run left out, and the list's newest erasure it honoured
    suppressed: Mapped[int | None] = mapped_column(Integer)
    erasures_as_of: Mapped[datetime | None]
    partition_skew: Mapped[float | None] = mapped_column(Float)
    reconcile: Mapped[dict[str, Any] | None] = mapped_column(JsonType)  # the last event-id reconcile
    rate_series: Mapped[dict[str, Any] | None] = mapped_column(JsonType)  # {start, counts} per second
    offsets: Mapped[dict[str, Any] | None] = mapped_column(JsonType)  # {topic, partitions: {p: [lo, hi]}}
    # each Spark partition's rows and confirmed records ({"at", "partitions": [...]}): the beacons
    # while it runs, the job's own report at its end (``daemon.core.partitions``)
    partition_progress: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    reconciles: Mapped[str | None] = mapped_column(String(32))  # a reconcile run: the run it checks
    launcher_kind: Mapped[str | None] = mapped_column(String(32))
    launcher_handle: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None]
    # everything its job held was freed (spec, one-time EMR application); None when finished: still to do
    released_at: Mapped[datetime | None] = mapped_column(index=True)
    slack_channel: Mapped[str | None] = mapped_column(String(64))
    slack_ts: Mapped[str | None] = mapped_column(String(32))
    slack_progress_ts: Mapped[str | None] = mapped_column(String(32))  # the one progress message
    created_at: Mapped[datetime]
    # when the run took a launcher slot (``RunQueue.admit``): it holds it from then until it ends
    admitted_at: Mapped[datetime | None]
    submitted_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer, default=1)
    scheduled_for: Mapped[datetime | None]
    # the job's first and last broker-confirmed delivery: start-up and wind-down, for the ETA
    first_delivery_at: Mapped[datetime | None]
    last_delivery_at: Mapped[datetime | None]
    # live control: the rate changes so far, [{at, tps, paused}] in time order; None: the rate is fixed
    control: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonType)
    # what the run's control messages are signed with; its job gets it in its spec (never on the wire)
    control_key: Mapped[str | None] = mapped_column(String(64), default=new_control_key)
    # consumer groups watched drain after the run (``daemon.core.drain``); ``watching`` while unfinished
    watch: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    watching: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)

    @property
    def terminal(self) -> bool:
        return RunState(self.state).terminal


class RunProgress(_AwareTimestamps, Base):
    """A progress sample: confirmed deliveries so far and the rate at that moment."""

    __tablename__ = "run_progress"
    __table_args__ = (Index("ix_run_progress_run_id_at", "run_id", "at"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    at: Mapped[datetime]
    confirmed: Mapped[int] = mapped_column(BigInteger)
    rate: Mapped[float] = mapped_column(Float)


class VerdictId(Base):
    """One id a run's latest reconcile listed: missing, unexpected or duplicated (with its records).

    The verdict's counts stay on the run (``runs.reconcile``); these are its full lists, up to the
    job's bound per kind, which the run's page pages and offers as CSV. Replaced with each verdict.
    """

    __tablename__ = "verdict_ids"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # missing, unexpected, duplicated
    # its place in the job's list (sorted by id, bytewise): pages follow it, whatever the collation
    n: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[str] = mapped_column(Text)
    copies: Mapped[int] = mapped_column(Integer)  # records carrying it (0 for a missing one)


class Notification(_AwareTimestamps, Base):
    """A Slack message we decided to send; ``dedup_key`` makes sending at-most-once."""

    __tablename__ = "notifications"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    dedup_key: Mapped[str] = mapped_column(String(255), unique=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    pipeline_id: Mapped[str | None] = mapped_column(ForeignKey("pipelines.id", ondelete="SET NULL"))
    channel: Mapped[str | None] = mapped_column(String(64))  # None: the notifier's default channel
    kind: Mapped[str] = mapped_column(String(64))
    sent_at: Mapped[datetime]
    delivered_at: Mapped[datetime | None]  # when Slack accepted it; None: recorded, not (yet) delivered
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    slack_ts: Mapped[str | None] = mapped_column(String(32))


class AuditEntry(_AwareTimestamps, Base):
    """Who asked for what, and whether we did it."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(index=True)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(128))
    outcome: Mapped[str] = mapped_column(String(32))
    detail: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)

"""Initial job store schema: runs, run_progress, pipelines, notifications, audit_log.

A frozen copy of ``store/models.py`` at the time; later changes get new revisions.

Revision ID: 0001
Revises:
Create Date: 2024-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

RUN_KINDS = ("replay", "pipeline")
RUN_STATES = ("queued", "submitted", "running", "cancelling", "succeeded", "failed", "cancelled", "skipped")
PIPELINE_STATES = ("active", "paused", "archived")


def _json() -> sa.JSON:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts(name: str, *, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True)


def _enum(values: tuple[str, ...], name: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=16)


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("watermark_column", sa.Text(), nullable=False),
        sa.Column("watermark_value", sa.Text(), nullable=True),
        sa.Column("lookback_seconds", sa.Integer(), nullable=False),
        sa.Column("tps", sa.Integer(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("topic_created", sa.Boolean(), nullable=False),
        sa.Column("options", _json(), nullable=False),
        sa.Column("owners", _json(), nullable=False),
        sa.Column("state", _enum(PIPELINE_STATES, "pipeline_state"), nullable=False),
        sa.Column("idle_after_days", sa.Integer(), nullable=True),
        _ts("last_published_at"),
        sa.Column("created_by", sa.String(64), nullable=False),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
        sa.Column("emr_application_id", sa.String(128), nullable=True),
        sa.Column("slack_channel", sa.String(64), nullable=True),
        sa.Column("slack_ts", sa.String(32), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pipelines"),
    )
    op.create_index("ix_pipelines_state", "pipelines", ["state"])

    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("kind", _enum(RUN_KINDS, "run_kind"), nullable=False),
        sa.Column("pipeline_id", sa.String(32), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        _ts("window_start"),
        _ts("window_end"),
        sa.Column("window_label", sa.Text(), nullable=True),
        sa.Column("watermark_column", sa.Text(), nullable=True),
        sa.Column("watermark_low", sa.Text(), nullable=True),
        sa.Column("watermark_high", sa.Text(), nullable=True),
        sa.Column("target_topic", sa.Text(), nullable=False),
        sa.Column("topic_created", sa.Boolean(), nullable=False),
        sa.Column("tps", sa.Integer(), nullable=False),
        sa.Column("options", _json(), nullable=False),
        sa.Column("requester", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.Column("state", _enum(RUN_STATES, "run_state"), nullable=False),
        sa.Column("rows_selected", sa.BigInteger(), nullable=True),
        sa.Column("confirmed_count", sa.BigInteger(), nullable=False),
        sa.Column("failed_tasks", sa.Integer(), nullable=False),
        sa.Column("duplicates_reported", sa.BigInteger(), nullable=False),
        sa.Column("achieved_tps", sa.Float(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("launcher_kind", sa.String(32), nullable=True),
        sa.Column("launcher_handle", _json(), nullable=True),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        _ts("lease_expires_at"),
        sa.Column("slack_channel", sa.String(64), nullable=True),
        sa.Column("slack_ts", sa.String(32), nullable=True),
        _ts("created_at", nullable=False),
        _ts("submitted_at"),
        _ts("started_at"),
        _ts("ended_at"),
        _ts("updated_at", nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(["pipeline_id"], ["pipelines.id"], name="fk_runs_pipeline_id_pipelines"),
        sa.UniqueConstraint("requester", "idempotency_key", name="uq_runs_requester_idempotency_key"),
    )
    op.create_index("ix_runs_state", "runs", ["state"])
    op.create_index("ix_runs_created_at_id", "runs", ["created_at", "id"])
    op.create_index("ix_runs_requester_created_at", "runs", ["requester", "created_at"])
    op.create_index("ix_runs_pipeline_id_created_at", "runs", ["pipeline_id", "created_at"])

    op.create_table(
        "run_progress",
        _id(),
        sa.Column("run_id", sa.String(32), nullable=False),
        _ts("at", nullable=False),
        sa.Column("confirmed", sa.BigInteger(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_progress"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_progress_run_id_runs", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_run_progress_run_id_at", "run_progress", ["run_id", "at"])

    op.create_table(
        "notifications",
        _id(),
        sa.Column("dedup_key", sa.String(255), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("pipeline_id", sa.String(32), nullable=True),
        sa.Column("channel", sa.String(64), nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        _ts("sent_at", nullable=False),
        sa.Column("payload", _json(), nullable=False),
        sa.Column("slack_ts", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
        sa.UniqueConstraint("dedup_key", name="uq_notifications_dedup_key"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_notifications_run_id_runs", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["pipeline_id"],
            ["pipelines.id"],
            name="fk_notifications_pipeline_id_pipelines",
            ondelete="SET NULL",
        ),
    )
    op.create_index("ix_notifications_run_id", "notifications", ["run_id"])

    op.create_table(
        "audit_log",
        _id(),
        _ts("at", nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(128), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", _json(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    for table in ("audit_log", "notifications", "run_progress", "runs", "pipelines"):
        op.drop_table(table)

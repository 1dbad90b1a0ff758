"""Runs: the consumer groups a run watches drain (``watch=``), so a restarted daemon resumes the watch.

``watch`` (JSON): ``{"topic", "groups": [{group, state, baseline, lag, last_at, drain_per_s, ...,
caught_up_at, sample}], "deadline", "message_ts", "noted_at"}`` (``daemon.core.watch``); NULL for a run
that watches nothing. ``watching``: true while some group's watch is unfinished, which is how the
watcher finds (and leases) finished runs that still have a watch to drive.

Revision ID: 0008
Revises: 0007
Create Date: 2024-10-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("watch", _JSON, nullable=True))
        batch.add_column(sa.Column("watching", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.create_index("ix_runs_watching", ["watching"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_watching")
        batch.drop_column("watching")
        batch.drop_column("watch")

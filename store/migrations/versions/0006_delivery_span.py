"""Runs: when the first and the last event reached the broker, from the job's delivery reports.

``first_delivery_at - submitted_at`` is a launcher's start-up and ``ended_at - last_delivery_at`` its
wind-down: the plan's ETA learns both from recent runs (``daemon.usecases.eta``).

Revision ID: 0006
Revises: 0005
Create Date: 2024-09-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("first_delivery_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("last_delivery_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("last_delivery_at")
        batch.drop_column("first_delivery_at")

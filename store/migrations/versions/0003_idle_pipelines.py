"""Idle pipelines: the idle period an owner was asked about, its deletion deadline, and snoozes.

Revision ID: 0003
Revises: 0002
Create Date: 2024-06-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("idle_since", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("delete_after", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("snoozed_by", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        for column in ("snoozed_by", "snoozed_until", "delete_after", "idle_since"):
            batch.drop_column(column)

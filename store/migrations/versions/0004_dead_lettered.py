"""Runs: how many records a run set aside on its dead-letter topic (``on_error=dlq``).

Nullable: a run that has not reported, or ran before the count existed, has no known count, and
an unknown count is never shown as 0.

Revision ID: 0004
Revises: 0003
Create Date: 2024-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("dead_lettered", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("dead_lettered")

"""A transactional run says what its transactions came to: ``runs.transactions``,
``runs.longest_transaction_s`` and ``runs.resumed``.

``delivery=transactional`` (ADR 0057) commits each task's records about every second; the report
says how many transactions there were, how long the longest stayed open (what a consumer reading
committed waits at most for a record), and how many rows retries skipped because an earlier
attempt had committed them. Idempotent runs, and every run before, have none: null (unknown is
never 0).

Revision ID: 0021
Revises: 0020
Create Date: 2024-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("transactions", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("longest_transaction_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("resumed", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("resumed")
        batch.drop_column("longest_transaction_s")
        batch.drop_column("transactions")

"""A run says what its source's erasure list left out: ``runs.suppressed`` and ``runs.erasures_as_of``.

A source may name a list of erased keys; every run leaves their events out. The run keeps how many
events it left out and the list's version it honoured (its newest erasure), so its report, its
reconcile and the audit can say "suppressed 3 (erasure list as of ...)". Existing runs had no list:
both columns are null for them (unknown is never 0).

Revision ID: 0020
Revises: 0019
Create Date: 2024-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("suppressed", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("erasures_as_of", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("erasures_as_of")
        batch.drop_column("suppressed")

"""A run's launcher slot is claimed in the store: ``runs.admitted_at``.

Two daemons on one store each counted the jobs in flight, found a slot free and launched a run in
the same instant: one job more than the cap. Admission is now one transaction (``RunQueue.admit``)
that counts the slots held and claims one; a run holds its slot from ``admitted_at`` until it ends.
Runs already launched keep holding theirs through their state, so nothing is filled in here.

Revision ID: 0017
Revises: 0016
Create Date: 2024-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("admitted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("admitted_at")

"""Releases that survive a restart.

``runs.released_at``: when everything the run's job held (its spec, a one-time EMR application) was
freed; None on a finished run with a launcher handle means the release is still to do, so a restarted
daemon finishes it. Runs that ended before this revision are taken as released (the daemon that ran
them kept the pending ones in memory only; they cannot be told apart now).

Revision ID: 0011
Revises: 0010
Create Date: 2024-10-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

TERMINAL = ("succeeded", "failed", "cancelled", "skipped")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("released_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_runs_released_at", ["released_at"])
    runs = sa.table(
        "runs",
        sa.column("state", sa.String),
        sa.column("ended_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
        sa.column("released_at", sa.DateTime(timezone=True)),
    )
    op.execute(
        runs.update()
        .where(runs.c.state.in_(TERMINAL))
        .values(released_at=sa.func.coalesce(runs.c.ended_at, runs.c.updated_at))
    )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_released_at")
        batch.drop_column("released_at")

"""Runs: live control of a running replay (``control``, JSON): the run's rate changes, pauses and
resumes so far, ``[{"at": epoch s, "tps": n, "paused": bool}, ...]`` in time order; NULL for none.

Revision ID: 0007
Revises: 0006
Create Date: 2024-10-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("control", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("control")

"""A run's confirmed count may be unknown: NULL, never a 0 nobody measured.

A job that ends without a readable count (its beacons unreadable after a failure, a cancel whose
progress cannot be read back) reported ``confirmed: null``; it was stored as 0, so a run that had
published 700 records said "0 of 1,000 confirmed". ``runs.confirmed`` becomes nullable; what progress
had counted stays beside it as ``on_topic_at_least``. Rows keep their values.

Revision ID: 0015
Revises: 0014
Create Date: 2024-11-16
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("confirmed", existing_type=sa.BigInteger(), nullable=True)


def downgrade() -> None:
    """Unknown counts go back to 0: the old schema has no way to say unknown."""
    op.execute("UPDATE runs SET confirmed = 0 WHERE confirmed IS NULL")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("confirmed", existing_type=sa.BigInteger(), nullable=False)

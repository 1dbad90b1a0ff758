"""A run reports how long its byte ceiling held events back: ``runs.bytes_held_s``.

``max_mb=`` puts a byte ceiling beside the event rate; when it is the tighter of the two, due events
wait for bytes, and the run says for how long instead of hiding it in its achieved rate. Existing
runs had no byte ceiling: the column is null for them (unknown is never 0).

Revision ID: 0019
Revises: 0018
Create Date: 2024-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("bytes_held_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("bytes_held_s")

"""A run's facts have the names the wire and every message give them.

``runs.target_topic``, ``runs.confirmed_count`` and ``runs.duplicates_reported`` become ``topic``,
``confirmed`` and ``duplicates``: the names of ``RunOut`` and of the pipelines' own ``topic``, so one
fact has one name from the row to Slack. Only the names change; values, types and nullability stay.

Revision ID: 0014
Revises: 0013
Create Date: 2024-11-09
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

# old name -> (new name, type, nullable)
RENAMED: dict[str, tuple[str, sa.types.TypeEngine[Any], bool]] = {
    "target_topic": ("topic", sa.Text(), False),
    "confirmed_count": ("confirmed", sa.BigInteger(), False),
    "duplicates_reported": ("duplicates", sa.BigInteger(), True),
}


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for old, (new, kind, nullable) in RENAMED.items():
            batch.alter_column(old, new_column_name=new, existing_type=kind, existing_nullable=nullable)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for old, (new, kind, nullable) in RENAMED.items():
            batch.alter_column(new, new_column_name=old, existing_type=kind, existing_nullable=nullable)

"""A pipeline may follow its table's commits instead of a column: ``pipelines.watermark_column`` is
nullable.

An ``incremental=snapshot`` pipeline publishes the rows each Iceberg or Delta commit appended since
the snapshot it last published; it has no watermark column, and its ``watermark_value`` holds that
snapshot (its options say which kind it is). Existing pipelines all have a column and keep it.

Revision ID: 0018
Revises: 0017
Create Date: 2024-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.alter_column("watermark_column", existing_type=sa.Text(), nullable=True)


def downgrade() -> None:
    # An older daemon cannot keep a pipeline without a column, and its runs refer to it: going down is
    # refused while one exists (unschedule and delete it first), rather than inventing a column.
    query = sa.text("SELECT count(*) FROM pipelines WHERE watermark_column IS NULL")
    following: int = op.get_bind().execute(query).scalar_one()
    if following > 0:
        raise RuntimeError(
            "pipelines following table commits (incremental=snapshot) exist; revision 0017 cannot hold "
            "them: remove them before going down"
        )
    with op.batch_alter_table("pipelines") as batch:
        batch.alter_column("watermark_column", existing_type=sa.Text(), nullable=False)

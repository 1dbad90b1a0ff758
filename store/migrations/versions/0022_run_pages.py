"""A run's page shows its partitions and its verdict's full lists: ``runs.partition_progress`` and
the ``verdict_ids`` table.

``partition_progress`` holds each Spark partition's rows and confirmed records, from the beacons while
the run goes and from the job's report at its end. ``verdict_ids`` holds the ids the latest reconcile
found missing, unexpected or duplicated (up to the job's bound per kind), one row each at its place in
the job's sorted list, so a page can list them in that order and a CSV can stream them. Runs from
before have neither: null, and no rows (their verdicts kept only samples of ten).

Revision ID: 0022
Revises: 0021
Create Date: 2024-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None

_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("partition_progress", _JSON, nullable=True))
    op.create_table(
        "verdict_ids",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("copies", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_verdict_ids_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "kind", "n", name="pk_verdict_ids"),
    )


def downgrade() -> None:
    op.drop_table("verdict_ids")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("partition_progress")

"""Schedules: a pipeline's next fire time and the slot each pipeline run was fired for.

``runs.scheduled_for`` is unique per pipeline, so two daemons that fire the same slot of the same
pipeline cannot both create a run, even if their row locks were somehow bypassed.

Revision ID: 0002
Revises: 0001
Create Date: 2024-06-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=True))
        batch.create_unique_constraint("uq_runs_pipeline_id_scheduled_for", ["pipeline_id", "scheduled_for"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_pipeline_id_scheduled_for", type_="unique")
        batch.drop_column("scheduled_for")
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("next_run_at")

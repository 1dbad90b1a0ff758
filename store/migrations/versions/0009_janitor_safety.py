"""The janitor: de-provisioning that survives a restart, and prompts counted only once delivered.

``pipelines.deprovision_reason``: set when de-provisioning began (the pipeline was paused and its run
asked to stop); a later pass finishes what a crash left. ``pipelines.application_release``: the EMR
application still to delete, kept after archiving until it is gone. ``notifications.delivered_at``:
when Slack accepted the message; a recorded but undelivered prompt is sent again.

Revision ID: 0009
Revises: 0008
Create Date: 2024-10-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("deprovision_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("application_release", sa.String(128), nullable=True))
    with op.batch_alter_table("notifications") as batch:
        batch.add_column(sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("notifications") as batch:
        batch.drop_column("delivered_at")
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_column("application_release")
        batch.drop_column("deprovision_reason")

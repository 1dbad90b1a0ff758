"""Topic TTL and idempotent pipeline creation.

``runs.topic_deleted_at``: when the platform deleted the one-off topic it created for the run (its TTL
ran out); None while the topic is kept. ``pipelines.idempotency_key``: the key a create was sent with,
unique per creator, so a retried or doubled create finds the first pipeline.

Revision ID: 0010
Revises: 0009
Create Date: 2024-10-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("topic_deleted_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("pipelines") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(128), nullable=True))
        batch.create_unique_constraint(
            "uq_pipelines_created_by_idempotency_key", ["created_by", "idempotency_key"]
        )


def downgrade() -> None:
    with op.batch_alter_table("pipelines") as batch:
        batch.drop_constraint("uq_pipelines_created_by_idempotency_key", type_="unique")
        batch.drop_column("idempotency_key")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("topic_deleted_at")

"""A run's control messages are signed: ``runs.control_key``, the key its job verifies them with.

Anyone who could write to the control topic could pause or speed up any run. Each run now gets a
random key (``daemon.core.ids.new_control_key``) when it is created; the daemon signs the run's
control messages with it and the job, which gets it in its spec, follows only what it verifies.
Unfinished runs get a key here; a finished run's job is gone and needs none.

Revision ID: 0016
Revises: 0015
Create Date: 2024-11-20
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

TERMINAL = ("succeeded", "failed", "cancelled", "skipped")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("control_key", sa.String(64), nullable=True))
    runs = sa.table(
        "runs", sa.column("id", sa.String), sa.column("state", sa.String), sa.column("control_key")
    )
    connection = op.get_bind()
    unfinished: list[str] = list(
        connection.execute(sa.select(runs.c.id).where(runs.c.state.not_in(TERMINAL))).scalars()
    )
    for run_id in unfinished:
        key = secrets.token_hex(32)
        connection.execute(sa.update(runs).where(runs.c.id == run_id).values(control_key=key))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("control_key")

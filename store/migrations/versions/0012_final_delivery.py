"""Final messages are retried until delivered: the ones sent before this revision count as delivered.

Until now a run's final message was recorded and sent once; nothing set ``delivered_at`` on it. From
now on an undelivered final record is sent again, so every existing one is marked delivered at the
time it was recorded: upgrading must not post a second final reply into every recent thread.

Revision ID: 0012
Revises: 0011
Create Date: 2024-10-27
"""

from __future__ import annotations

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute(
        "UPDATE notifications SET delivered_at = sent_at WHERE kind = 'final' AND delivered_at IS NULL"
    )


def downgrade() -> None:
    """Nothing to undo: the column stays (0009's), and a delivered mark is true either way."""

"""Runs: the honest final report and reconcile runs.

- ``duplicates_reported`` becomes nullable: a count nobody measured is unknown, never 0.
- ``on_topic_at_least``: a failed run's records the broker had confirmed before it failed.
- ``behind_schedule_s``, ``partition_skew``: from the job's result.
- ``reconcile`` (JSON): the last event-id reconcile of the run; ``rate_series`` (JSON): confirmed
  deliveries per second, from the job's delivery reports (the chart's data); ``offsets`` (JSON): the
  target topic's offset range per partition that holds the run's records (what a reconcile reads).
- ``slack_progress_ts``: the one progress message, edited in place.
- ``reconciles``: a reconcile run's subject; the ``run_kind`` check gains ``reconcile``.

Revision ID: 0005
Revises: 0004
Create Date: 2024-08-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")
_KINDS_BEFORE = ("replay", "pipeline")
_KINDS_AFTER = ("replay", "pipeline", "reconcile")


def _kind_check(kinds: tuple[str, ...]) -> str:
    return "kind IN (" + ", ".join(f"'{kind}'" for kind in kinds) + ")"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("duplicates_reported", existing_type=sa.BigInteger(), nullable=True)
        batch.add_column(sa.Column("on_topic_at_least", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("behind_schedule_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("partition_skew", sa.Float(), nullable=True))
        batch.add_column(sa.Column("reconcile", _JSON, nullable=True))
        batch.add_column(sa.Column("rate_series", _JSON, nullable=True))
        batch.add_column(sa.Column("offsets", _JSON, nullable=True))
        batch.add_column(sa.Column("slack_progress_ts", sa.String(32), nullable=True))
        batch.add_column(sa.Column("reconciles", sa.String(32), nullable=True))
        batch.drop_constraint(op.f("ck_runs_run_kind"), type_="check")
        batch.create_check_constraint("run_kind", _kind_check(_KINDS_AFTER))


def downgrade() -> None:
    op.execute("DELETE FROM runs WHERE kind = 'reconcile'")
    op.execute("UPDATE runs SET duplicates_reported = 0 WHERE duplicates_reported IS NULL")
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint(op.f("ck_runs_run_kind"), type_="check")
        batch.create_check_constraint("run_kind", _kind_check(_KINDS_BEFORE))
        for column in (
            "reconciles",
            "slack_progress_ts",
            "offsets",
            "rate_series",
            "reconcile",
            "partition_skew",
            "behind_schedule_s",
            "on_topic_at_least",
        ):
            batch.drop_column(column)
        batch.alter_column("duplicates_reported", existing_type=sa.BigInteger(), nullable=False)

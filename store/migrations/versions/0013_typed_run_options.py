"""Typed run and pipeline options, and a failure kind.

Until now a run's ``options`` was a free-form object whose readers each guessed what an absent key
meant, and three facts were read from strings: whether a window reads whole days (its bounds and
whether its label began ``last=``), whether it was relative (its label), whether the run published to
a live topic (a ``replay.`` prefix), and whether a failure was a launch failure (a prefix of the
reason). This revision writes every run's options as version 1 of ``daemon.core.run_options``, with
those facts recorded, and adds ``runs.failure_kind``; a pipeline's options become version 1 of
``PipelineOptions`` (its topic mode, where missing, from whether it created its topic). The guesses
are made once, here, from the same rules the daemon applied before; nothing after it guesses again.

Revision ID: 0013
Revises: 0012
Create Date: 2024-11-02
"""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

FAILURE_KINDS = ("launch", "lost", "job", "plan")
# What the daemon wrote as reasons before this revision (``LAUNCH_FAILURE`` and the watcher's text).
_LAUNCH_REASON = "could not launch the job"
_LOST_REASON = "job process lost"
# Version 0 keys kept as they were; ``rows`` and ``eta_s`` are renamed; anything else is dropped.
_KEPT = (
    "headers", "ordering", "timestamp", "on_error", "dlq_topic", "workers", "partitions", "request",
    "watch", "auto", "overrides", "approved_by", "topic_mode",
)  # fmt: skip
_RENAMED = {"rows": "planned_rows", "eta_s": "planned_eta_s"}


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(JSONB(), "postgresql")


def _runs() -> sa.TableClause:
    return sa.table(
        "runs",
        sa.column("id", sa.String),
        sa.column("kind", sa.String),
        sa.column("state", sa.String),
        sa.column("options", _json()),
        sa.column("window_label", sa.Text),
        sa.column("window_start", sa.DateTime(timezone=True)),
        sa.column("window_end", sa.DateTime(timezone=True)),
        sa.column("watermark_column", sa.Text),
        sa.column("target_topic", sa.Text),
        sa.column("failure_reason", sa.Text),
        sa.column("launcher_handle", _json()),
        sa.column("failure_kind", sa.String),
    )


def _window(row: Any) -> str:
    if row.watermark_column is not None:
        return "watermark"
    start, end = row.window_start, row.window_end
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return "range"
    midnight = start.time() == end.time() == time(0)
    return "days" if midnight and (row.window_label or "")[:5].lower() != "last=" else "range"


def _relative(label: str | None) -> bool:
    text = (label or "").lower()
    return text.startswith(("last=", "today", "yesterday")) or " tz=" in text


def _version_1(row: Any) -> dict[str, Any]:
    old = dict(row.options or {})
    new: dict[str, Any] = {key: old[key] for key in _KEPT if old.get(key) is not None}
    new.update({to: old[key] for key, to in _RENAMED.items() if old.get(key) is not None})
    if new.get("ordering") not in (None, "entity", "none"):
        new.pop("ordering")
    if "workers" in new:
        new["workers"] = max(1, int(new["workers"]))
    if new.get("on_error") == "dlq" and not new.get("dlq_topic"):
        new["on_error"] = "fail"
    new.setdefault("topic_mode", "auto" if str(row.target_topic).startswith("replay.") else "live")
    new["window"] = _window(row)
    new["relative"] = _relative(row.window_label)
    new["v"] = 1
    return new


def _failure_kind(row: Any) -> str | None:
    if row.state != "failed":
        return None
    reason = row.failure_reason or ""
    if reason.startswith(_LAUNCH_REASON):
        return "launch"
    if reason.startswith(_LOST_REASON):
        return "lost"
    if row.kind == "pipeline" and row.launcher_handle is None:
        return "plan"
    return "job"


_PIPELINE_KEPT = ("headers", "on_error", "watch", "request", "topic_mode")


def _pipelines() -> sa.TableClause:
    return sa.table(
        "pipelines",
        sa.column("id", sa.String),
        sa.column("options", _json()),
        sa.column("topic_created", sa.Boolean),
    )


def _pipeline_version_1(row: Any) -> dict[str, Any]:
    old = dict(row.options or {})
    new: dict[str, Any] = {key: old[key] for key in _PIPELINE_KEPT if old.get(key) is not None}
    if new.get("on_error") not in (None, "fail", "dlq"):
        new.pop("on_error")
    if new.get("topic_mode") not in ("auto", "live"):
        new["topic_mode"] = "auto" if row.topic_created else "live"
    new["v"] = 1
    return new


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column(
                "failure_kind",
                sa.Enum(
                    *FAILURE_KINDS, name="failure_kind", native_enum=False, create_constraint=True, length=16
                ),
                nullable=True,
            )
        )
    runs = _runs()
    bind = op.get_bind()
    for row in bind.execute(sa.select(runs)).all():
        bind.execute(
            runs.update()
            .where(runs.c.id == row.id)
            .values(options=_version_1(row), failure_kind=_failure_kind(row))
        )
    pipelines = _pipelines()
    for row in bind.execute(sa.select(pipelines)).all():
        bind.execute(
            pipelines.update().where(pipelines.c.id == row.id).values(options=_pipeline_version_1(row))
        )


def downgrade() -> None:
    runs = _runs()
    bind = op.get_bind()
    back = {to: key for key, to in _RENAMED.items()}
    for row in bind.execute(sa.select(runs.c.id, runs.c.options)).all():
        old = dict(row.options or {})
        old.pop("v", None)
        old.pop("window", None)
        old.pop("relative", None)
        bind.execute(
            runs.update()
            .where(runs.c.id == row.id)
            .values(options={back.get(key, key): value for key, value in old.items()})
        )
    pipelines = _pipelines()
    for row in bind.execute(sa.select(pipelines.c.id, pipelines.c.options)).all():
        old = {key: value for key, value in dict(row.options or {}).items() if key != "v"}
        bind.execute(pipelines.update().where(pipelines.c.id == row.id).values(options=old))
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint(op.f("ck_runs_failure_kind"), type_="check")
        batch.drop_column("failure_kind")

"""Shared write path for runs: row locks, version checks and the state machine in memory.

Used by ``RunRepository`` and by ``PipelineRepository.commit_watermark``, which must finish a
run and move its pipeline's watermark in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from daemon.core.errors import InvalidTransition, RunNotFound, StaleUpdate
from daemon.core.states import RUN_TRANSITIONS, RunState
from store.models import Pipeline, Run

# Fields ``transition`` and ``update`` may set; the rest have dedicated methods or never change.
UPDATABLE_RUN_FIELDS = frozenset(
    {
        "rows_selected",
        "confirmed",
        "failed_tasks",
        "duplicates",
        "dead_lettered",
        "achieved_tps",
        "failure_reason",
        "failure_kind",
        "launcher_kind",
        "launcher_handle",
        "watermark_low",
        "watermark_high",
        "topic_created",
        "options",
        "slack_channel",
        "slack_ts",
        "slack_progress_ts",
        "on_topic_at_least",
        "behind_schedule_s",
        "bytes_held_s",
        "transactions",
        "longest_transaction_s",
        "resumed",
        "suppressed",
        "erasures_as_of",
        "partition_skew",
        "reconcile",
        "rate_series",
        "offsets",
        "partition_progress",
        "submitted_at",
        "started_at",
        "first_delivery_at",
        "last_delivery_at",
        "ended_at",
    }
)
COUNTERS = frozenset({"confirmed", "failed_tasks", "duplicates"})


def lock_run(session: Session, run_id: str) -> Run:
    """Load a run for writing, holding its row lock until the transaction ends."""
    stmt = select(Run).where(Run.id == run_id).with_for_update(key_share=True)
    run = session.scalars(stmt).one_or_none()
    if run is None:
        raise RunNotFound(run_id)
    return run


def check_version(entity_id: str, actual: int, expected: int | None) -> None:
    if expected is not None and actual != expected:
        raise StaleUpdate(entity_id, expected, actual)


def set_fields(run: Run, fields: Mapping[str, Any]) -> None:
    unknown = set(fields) - UPDATABLE_RUN_FIELDS
    if unknown:
        raise TypeError(f"cannot set {', '.join(sorted(unknown))} on run {run.id!r}")
    for name, value in fields.items():
        setattr(run, name, value)


def apply_transition(run: Run, to_state: str, fields: Mapping[str, Any], now: datetime) -> None:
    """Move ``run`` to ``to_state`` in memory, stamping the matching timestamp; refuses illegal moves."""
    current, target = RunState(run.state), RunState(to_state)
    if target not in RUN_TRANSITIONS[current]:
        reason = "it has finished" if current.terminal else ""
        raise InvalidTransition(run.id, current, target, reason)
    set_fields(run, fields)
    run.state = target
    if target is RunState.SUBMITTED and run.submitted_at is None:
        run.submitted_at = now
    if target is RunState.RUNNING and run.started_at is None:
        run.started_at = now
    if target.terminal:
        run.ended_at = run.ended_at or now
        run.lease_owner = None
        run.lease_expires_at = None
    touch(run, now)


def touch(row: Run | Pipeline, now: datetime) -> None:
    """Every write bumps the version, which is what ``expected_version`` checks against."""
    row.version += 1
    row.updated_at = now

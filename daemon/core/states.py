"""Run and pipeline kinds and states, the one set of terminal run states, and the state machines.

The values are plain strings in the database (``StrEnum`` compares equal to them), so other
components can read the tables without importing this module.
"""

from __future__ import annotations

from enum import StrEnum


class RunKind(StrEnum):
    REPLAY = "replay"
    PIPELINE = "pipeline"
    RECONCILE = "reconcile"  # an on-demand check of another run's event ids: publishes nothing


class RunState(StrEnum):
    QUEUED = "queued"
    SUBMITTED = "submitted"
    RUNNING = "running"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # a pipeline run that found no new data

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES


class FailureKind(StrEnum):
    """Why a failed run failed, as a fact (metrics count it, messages explain it), not a reason's prefix."""

    LAUNCH = "launch"  # the job could not be launched
    LOST = "lost"  # the job's process or EMR job went away without a result
    JOB = "job"  # the job ran and reported failure
    PLAN = "plan"  # a pipeline slot that could not even be planned


class PipelineState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    ARCHIVED = "archived"


class Outcome(StrEnum):
    """Usual audit outcomes; the column is free text so new ones need no migration."""

    ACCEPTED = "accepted"
    REFUSED = "refused"
    FAILED = "failed"


TERMINAL_RUN_STATES: frozenset[RunState] = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED}
)

_FINISH = {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED}

# Allowed moves. Submission can be skipped (a local launcher starts running at once), a
# fast job can finish between two polls, and a cancel request can lose the race to the end.
RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.SUBMITTED, RunState.RUNNING, RunState.CANCELLING, *_FINISH}),
    RunState.SUBMITTED: frozenset({RunState.RUNNING, RunState.CANCELLING, *_FINISH}),
    RunState.RUNNING: frozenset({RunState.CANCELLING, *_FINISH}),
    RunState.CANCELLING: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED}),
    **{state: frozenset() for state in TERMINAL_RUN_STATES},
}

# Archived pipelines are final; active and paused flip freely.
PIPELINE_TRANSITIONS: dict[PipelineState, frozenset[PipelineState]] = {
    PipelineState.ACTIVE: frozenset({PipelineState.PAUSED, PipelineState.ARCHIVED}),
    PipelineState.PAUSED: frozenset({PipelineState.ACTIVE, PipelineState.ARCHIVED}),
    PipelineState.ARCHIVED: frozenset(),
}

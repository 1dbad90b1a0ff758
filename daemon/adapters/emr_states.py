"""EMR Serverless states as explicit, total tables: no I/O, so every row is tested directly.

A job run state maps to our `JobState`; an application state maps to the next teardown step.
A state missing from a table is an error (`UnknownEmrState`), never "keep waiting": a new
AWS state must be read and placed in a table by a person, not polled forever.

UnknownEmrState (ReplayError, ValueError)   AWS reported a state this module does not know
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from daemon.core.errors import ReplayError
from daemon.usecases.ports import JobOutcome, JobState


class UnknownEmrState(ReplayError, ValueError):
    def __init__(self, kind: str, state: object, known: list[str]) -> None:
        super().__init__(
            f"EMR Serverless reported {kind} state {state!r}, which this launcher does not know "
            f"(known: {', '.join(known)}); it must be mapped before runs can be followed"
        )
        self.kind, self.state = kind, state


class EmrJobRunState(enum.StrEnum):
    """Every job run state in the EMR Serverless API (`JobRunState`)."""

    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    QUEUED = "QUEUED"  # waiting for a concurrency slot on the application
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"


JOB_RUN_STATES: Mapping[EmrJobRunState, JobState] = MappingProxyType(
    {
        EmrJobRunState.SUBMITTED: JobState.PENDING,
        EmrJobRunState.PENDING: JobState.PENDING,
        EmrJobRunState.SCHEDULED: JobState.PENDING,
        EmrJobRunState.QUEUED: JobState.PENDING,
        EmrJobRunState.RUNNING: JobState.RUNNING,
        EmrJobRunState.CANCELLING: JobState.RUNNING,  # the driver may still be publishing
        EmrJobRunState.SUCCESS: JobState.EXITED,
        EmrJobRunState.FAILED: JobState.EXITED,
        EmrJobRunState.CANCELLED: JobState.EXITED,
    }
)

TERMINAL_JOB_RUN_STATES = frozenset(
    state for state, ours in JOB_RUN_STATES.items() if ours is JobState.EXITED
)

# Why a run ended when the job printed no result line of its own.
_NO_LINE_REASONS: Mapping[EmrJobRunState, str] = MappingProxyType(
    {
        EmrJobRunState.FAILED: "EMR Serverless job run failed",
        EmrJobRunState.CANCELLED: "EMR Serverless job run cancelled",
    }
)


def job_run_state(raw: object) -> EmrJobRunState:
    try:
        return EmrJobRunState(str(raw))  # a StrEnum: str() of a member is its value
    except ValueError:
        raise UnknownEmrState("job run", raw, [s.value for s in EmrJobRunState]) from None


def job_state(raw: object) -> JobState:
    """Our `JobState` for an EMR Serverless job run state."""
    return JOB_RUN_STATES[job_run_state(raw)]


def is_terminal(raw: object) -> bool:
    return job_state(raw) is JobState.EXITED


def exit_outcome(raw: object, state_details: str | None) -> JobOutcome | None:
    """The outcome of a run that ended without a result line: `stateDetails` is the reason.

    None while the run is not over, and for SUCCESS: a successful job always prints its line, so a
    missing line there is a missing log, not a verdict.
    """
    default = _NO_LINE_REASONS.get(job_run_state(raw))
    if default is None:
        return None
    return JobOutcome(succeeded=False, payload={"reason": (state_details or "").strip() or default})


class EmrApplicationState(enum.StrEnum):
    """Every application state in the EMR Serverless API (`ApplicationState`)."""

    CREATING = "CREATING"
    CREATED = "CREATED"
    STARTING = "STARTING"
    STARTED = "STARTED"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    TERMINATED = "TERMINATED"


class Teardown(enum.Enum):
    """The next step in deleting an application (only CREATED or STOPPED ones can be deleted)."""

    WAIT = "wait"  # in transition: look again after the poll interval
    STOP = "stop"
    DELETE = "delete"
    GONE = "gone"


TEARDOWN: Mapping[EmrApplicationState, Teardown] = MappingProxyType(
    {
        EmrApplicationState.CREATING: Teardown.WAIT,
        EmrApplicationState.CREATED: Teardown.DELETE,
        EmrApplicationState.STARTING: Teardown.WAIT,
        EmrApplicationState.STARTED: Teardown.STOP,
        EmrApplicationState.STOPPING: Teardown.WAIT,
        EmrApplicationState.STOPPED: Teardown.DELETE,
        EmrApplicationState.TERMINATED: Teardown.GONE,
    }
)

# States a job can be submitted in: autoStart starts a CREATED or STOPPED application.
SUBMITTABLE = frozenset(
    {
        EmrApplicationState.CREATING,
        EmrApplicationState.CREATED,
        EmrApplicationState.STARTING,
        EmrApplicationState.STARTED,
        EmrApplicationState.STOPPED,
    }
)


def application_state(raw: object) -> EmrApplicationState:
    try:
        return EmrApplicationState(str(raw))
    except ValueError:
        raise UnknownEmrState("application", raw, [s.value for s in EmrApplicationState]) from None


def teardown_step(raw: object) -> Teardown:
    return TEARDOWN[application_state(raw)]

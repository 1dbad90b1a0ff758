"""Live control of a running replay, as pure rules: what a rate change, a pause or a resume does to a
run's list of changes, and what rate a run has at a given time.

A run keeps its launch rate (``tps``) and a list of ``RateChange``s in time order: from ``at`` on the
rate is ``tps``, or nothing while ``paused`` (``tps`` is then the rate it resumes at). A new change
takes effect ``lead_s`` after it was asked for, so every task has read it before that instant; the
job (``spark_job.control``) reads the same list with the same meaning.

Decisions look at the newest change, not at the rate in force now: a pause asked for a second ago
and not yet in effect can already be resumed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from daemon.core.errors import BadRequest, Conflict
from daemon.core.states import RunKind, RunState

# A run can be changed until it ends: a queued or submitted run starts with its changes in its spec.
CONTROLLABLE_STATES = frozenset({RunState.QUEUED, RunState.SUBMITTED, RunState.RUNNING})
# Every control message carries the whole list, so it is bounded (and stays far below Kafka's 1 MB).
MAX_CHANGES = 500


@dataclass(frozen=True)
class RateChange:
    """From ``at`` (epoch seconds) on, the rate is ``tps``; none while ``paused``. The job's
    ``spark_job.spec.model.RateChange`` has the same fields and meaning (the core imports no job)."""

    at: float
    tps: int
    paused: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "tps": self.tps, "paused": self.paused}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RateChange:
        return cls(at=float(data["at"]), tps=int(data["tps"]), paused=bool(data.get("paused", False)))


@dataclass(frozen=True)
class Rate:
    """A run's rate at one time: ``tps`` events per second, or none while ``paused`` (then ``tps`` is
    the rate it resumes at)."""

    tps: int
    paused: bool = False


@dataclass(frozen=True)
class SetRate:
    tps: int


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


Action: TypeAlias = SetRate | Pause | Resume


@dataclass(frozen=True)
class ControlledRun:
    """What the rules need to know of a run."""

    run_id: str
    kind: RunKind
    state: RunState
    tps: int  # the launch rate; 0: unthrottled
    changes: tuple[RateChange, ...] = ()


def changes_from(stored: Sequence[Mapping[str, Any]] | None) -> tuple[RateChange, ...]:
    """The changes as the store keeps them (a JSON list of dicts; None for none)."""
    return tuple(RateChange.from_dict(item) for item in stored or ())


def rate_at(tps: int, changes: Sequence[RateChange], at: float) -> Rate:
    """The rate in force at ``at``: the newest change at or before it, else the launch rate."""
    rate = Rate(tps)
    for change in changes:
        if change.at > at:
            break
        rate = Rate(change.tps, change.paused)
    return rate


def latest_rate(tps: int, changes: Sequence[RateChange]) -> Rate:
    """The rate as last set (in force at most ``lead_s`` after the newest change was asked for)."""
    return rate_at(tps, changes, math.inf)


def paused_since(changes: Sequence[RateChange], at: float) -> float | None:
    """When the pause in force at ``at`` began (epoch seconds); None when the run is not paused then."""
    since: float | None = None
    for change in changes:
        if change.at > at:
            break
        if not change.paused:
            since = None
        elif since is None:
            since = change.at
    return since


def controllable(run: ControlledRun) -> None:
    """Refuse a run whose rate cannot be changed: not a throttled replay, or no longer going."""
    if run.kind is RunKind.RECONCILE:
        raise BadRequest(f"run {run.run_id} is a reconcile run: it publishes nothing, so it has no rate")
    if run.tps <= 0:
        raise BadRequest(f"run {run.run_id} is unthrottled (tps=0): there is no rate to change")
    if run.state not in CONTROLLABLE_STATES:
        raise Conflict(
            f"run {run.run_id} is {run.state}: only a queued, submitted or running run can be changed"
        )


def apply(run: ControlledRun, action: Action, *, now: float, lead_s: float, max_tps: int) -> RateChange:
    """The change ``action`` appends to ``run.changes``, or a refusal (``BadRequest``, ``Conflict``).

    It takes effect ``lead_s`` after ``now``, and never before the newest change (time order).
    """
    controllable(run)
    if len(run.changes) >= MAX_CHANGES:
        raise Conflict(f"run {run.run_id} has had {MAX_CHANGES} rate changes already; no more are taken")
    current = latest_rate(run.tps, run.changes)
    at = max(now + lead_s, run.changes[-1].at if run.changes else -math.inf)
    if isinstance(action, Pause):
        if current.paused:
            raise Conflict(f"run {run.run_id} is already paused")
        return RateChange(at=at, tps=current.tps, paused=True)
    if isinstance(action, Resume):
        if not current.paused:
            raise Conflict(f"run {run.run_id} is not paused")
        return RateChange(at=at, tps=current.tps, paused=False)
    if action.tps < 1:
        raise BadRequest(f"tps must be at least 1, got {action.tps}")
    if action.tps > max_tps:
        raise BadRequest(f"tps={action.tps} is above this platform's maximum of {max_tps}")
    if action.tps == current.tps:
        raise BadRequest(f"run {run.run_id} is already set to {current.tps}/s")
    return RateChange(at=at, tps=action.tps, paused=current.paused)

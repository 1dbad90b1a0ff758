"""`EmrWarmPool`: applications kept started, their capacity pre-initialized, for one-time runs.

A one-time run's own application is created for it and deleted after it, so it always starts cold:
EMR Serverless creates the application, then provisions its driver and executors, before the job's
first line. With `emr.warm_applications = N` the launcher keeps N applications, `replay-warm-0` to
`replay-warm-<N-1>`, sized like a run's own (initial == maximum capacity: one driver and
`executors_default` executors) and started, so their workers wait ready. A run of that size takes
one that is started and has no job run; the application outlives the run and serves the next.

One job per application still holds: a warm application's maximum capacity is one job's, and a run
that finds an older job run on the application it took (another daemon took it at the same moment)
cancels its own there and starts cold instead (`contested`).

The keeper (`tick`, every poll interval) creates missing applications, starts the stopped ones
(EMR's idle timeout stops them when no daemon keeps them), never while every launcher slot is held,
and deletes those beyond N once idle. An application that fails to start its initial capacity
(refused at once, say over the account's vCPU quota, or back to STOPPED after STARTING) is logged
with EMR's reason and tried again after a wait that doubles, from `RETRY_S` up to `MAX_RETRY_S`;
runs meanwhile start cold. Decision record: docs/decisions/0050.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from daemon.adapters.emr_applications import EmrApplications
from daemon.adapters.emr_states import EmrApplicationState, EmrJobRunState, application_state, job_run_state
from daemon.core.errors import ReplayError

log = structlog.get_logger(__name__)

WARM_PREFIX = "replay-warm-"
WARM_TAG = "replay:warm"
RETRY_S = 60.0
MAX_RETRY_S = 1800.0
_WARM_NAME = re.compile(rf"{re.escape(WARM_PREFIX)}(\d+)")


def warm_name(index: int) -> str:
    return f"{WARM_PREFIX}{index}"


@dataclass
class _Starting:
    """A start this keeper asked for and has not seen end yet, and the failures before it."""

    failures: int = 0
    requested: bool = False
    retry_at: float = 0.0


class EmrWarmPool:
    """Which warm application a run may take now; one keeper pass at a time (`tick`)."""

    def __init__(
        self,
        *,
        applications: EmrApplications,
        count: int,
        executors: int,
        idle_stop_minutes: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._applications = applications
        self.count = count  # 0: none kept; the keeper only retires those a larger setting left
        self.executors = executors
        self._idle_stop_minutes = idle_stop_minutes
        self._monotonic = monotonic
        self._lock = threading.Lock()  # a take and the start of its job run are one step in this daemon
        self._ready: set[str] = set()  # started and idle at the last pass
        self._starting: dict[str, _Starting] = {}  # by application name

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def ready(self) -> bool:
        """Some warm application was started and idle at the keeper's last pass (what `plan` says)."""
        return bool(self._ready)

    def applications(self) -> tuple[dict[int, str], list[str]]:
        """The warm applications that exist now, by index (beyond `count` too), and the younger
        twins a race of two daemons' creations left (never used)."""
        found: dict[int, str] = {}
        twins: list[str] = []
        for name, app_id in self._applications.all_named(WARM_PREFIX):
            match = _WARM_NAME.fullmatch(name)
            if match is None:
                continue
            if int(match.group(1)) in found:
                twins.append(app_id)
            else:
                found[int(match.group(1))] = app_id
        return found, twins

    def take(self) -> str | None:
        """A started, idle application of the pool, made under the current settings, for a run to
        start on now; None: none is. Call with `lock` held, and start the job run before letting go."""
        for index, app_id in sorted(self.applications()[0].items()):
            if index >= self.count:
                continue
            app = self._applications.describe(app_id)
            if application_state(app.get("state")) is not EmrApplicationState.STARTED:
                continue
            if not self._applications.matches(app, self.executors):
                continue
            if self._applications.job_runs(app_id, active=True):
                continue
            self._ready.discard(app_id)
            return app_id
        return None

    def contested(self, app_id: str, job_run_id: str) -> bool:
        """Our job run is not the application's oldest active one: another daemon took it in the same
        moment (or EMR gave back a job run of ours given up before), and ours must go elsewhere."""
        ids = [str(run.get("id")) for run in self._applications.job_runs(app_id, active=True)]
        return job_run_id not in ids or ids.index(job_run_id) > 0

    def find_run(self, job_name: str) -> tuple[str, str] | None:
        """The application and job run of a run already started on a warm application (a submit
        retried after a crash), skipping runs given up for a contested application."""
        given_up = (EmrJobRunState.CANCELLING, EmrJobRunState.CANCELLED)
        for app_id in self.applications()[0].values():
            for run in self._applications.job_runs(app_id):
                if run.get("name") == job_name and job_run_state(run.get("state")) not in given_up:
                    return app_id, str(run["id"])
        return None

    def tick(self, busy: bool) -> None:
        """One keeper pass: create, start, note failures, retire; every AWS error is logged, not raised."""
        try:
            existing, twins = self.applications()
            ready: set[str] = set()
            for index in range(self.count):
                app_id = existing.get(index) or self._create(index)
                if app_id is not None and self._look_after(warm_name(index), app_id, busy):
                    ready.add(app_id)
            self._ready = ready
            surplus = [app_id for index, app_id in existing.items() if index >= self.count]
            for app_id in surplus + twins:
                if not self._applications.job_runs(app_id, active=True):
                    self._applications.delete(app_id)
        except ReplayError as exc:
            log.warning("warm applications: could not look after them", error=str(exc))

    def _create(self, index: int) -> str | None:
        name = warm_name(index)
        if self._monotonic() < self._starting.get(name, _Starting()).retry_at:
            return None
        try:
            return self._applications.create(
                name, self.executors, tags={WARM_TAG: "true"}, idle_stop_minutes=self._idle_stop_minutes
            )
        except ReplayError as exc:
            self._failed(name, f"could not be created: {exc}")
            return None

    def _look_after(self, name: str, app_id: str, busy: bool) -> bool:
        """Start the application when it is stopped, replace one made under other settings; True when
        it is started and idle."""
        app = self._applications.describe(app_id)
        state = application_state(app.get("state"))
        starting = self._starting.setdefault(name, _Starting())
        if not self._applications.matches(app, self.executors):
            if not self._applications.job_runs(app_id, active=True):
                log.info(
                    f"warm application {name} was made under other settings: replacing it",
                    application_id=app_id,
                )
                self._applications.delete(app_id)  # a step per pass; created anew once it is gone
            return False
        if state is EmrApplicationState.STARTED:
            starting.requested, starting.failures = False, 0
            return not self._applications.job_runs(app_id, active=True)
        if state not in (EmrApplicationState.CREATED, EmrApplicationState.STOPPED):
            return False  # on its way somewhere: look again next pass
        if starting.requested:  # asked to start, and it stopped again: its capacity did not come up
            reason = str(app.get("stateDetails") or "").strip() or "no reason given"
            self._failed(name, f"did not start its initial capacity: {reason}", app_id=app_id)
            return False
        if busy or self._monotonic() < starting.retry_at:
            return False
        try:
            self._applications.start(app_id)
        except ReplayError as exc:
            self._failed(name, f"was refused a start: {exc}", app_id=app_id)
            return False
        starting.requested = True
        return False

    def _failed(self, name: str, reason: str, *, app_id: str | None = None) -> None:
        starting = self._starting.setdefault(name, _Starting())
        starting.requested = False
        starting.failures += 1
        wait = min(RETRY_S * 2 ** (starting.failures - 1), MAX_RETRY_S)
        starting.retry_at = self._monotonic() + wait
        log.warning(
            f"warm application {name} {reason}; runs start cold meanwhile",
            application_id=app_id,
            failures=starting.failures,
            retry_in_s=wait,
        )

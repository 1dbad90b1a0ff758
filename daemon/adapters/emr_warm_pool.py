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
from daemon.adapters.emr_states import EmrApplicationState, application_state
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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._applications = applications
        self._count = count
        self.executors = executors
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

    def applications(self) -> dict[int, str]:
        """The warm applications that exist now, by index (beyond `count` too)."""
        found: dict[int, str] = {}
        for name, app_id in self._applications.named(WARM_PREFIX).items():
            match = _WARM_NAME.fullmatch(name)
            if match:
                found[int(match.group(1))] = app_id
        return found

    def take(self) -> tuple[str, bool] | None:
        """An application of the pool a run may start on now, and whether it is started (warm); None:
        none is idle. Call with `lock` held, and start the job run before letting go of it."""
        for index, app_id in sorted(self.applications().items()):
            if index >= self._count:
                continue
            state = application_state(self._applications.describe(app_id).get("state"))
            if state is not EmrApplicationState.STARTED:
                continue
            if self._applications.active_job_runs(app_id):
                continue
            self._ready.discard(app_id)
            return app_id, True
        return None

    def contested(self, app_id: str, job_run_id: str) -> bool:
        """Another job run is older than ours on the application: we took it in the same moment as
        another daemon, and ours must go elsewhere."""
        active = self._applications.active_job_runs(app_id)
        ids = [str(run.get("id")) for run in active]
        return job_run_id in ids and ids.index(job_run_id) > 0

    def find_run(self, job_name: str) -> tuple[str, str] | None:
        """The application and job run of a run already started on a warm application (a submit
        retried after a crash), skipping runs given up for a contested application."""
        for app_id in self.applications().values():
            for run in self._applications.job_runs(app_id):
                if run.get("name") == job_name and run.get("state") not in ("CANCELLING", "CANCELLED"):
                    return app_id, str(run["id"])
        return None

    def tick(self, busy: bool) -> None:
        """One keeper pass: create, start, note failures, retire; every AWS error is logged, not raised."""
        try:
            existing = self.applications()
            ready: set[str] = set()
            for index in range(self._count):
                app_id = existing.get(index) or self._create(index)
                if app_id is not None and self._look_after(warm_name(index), app_id, busy):
                    ready.add(app_id)
            self._ready = ready
            for index, app_id in existing.items():
                if index >= self._count and not self._applications.active_job_runs(app_id):
                    self._applications.delete(app_id)
        except ReplayError as exc:
            log.warning("warm applications: could not look after them", error=str(exc))

    def _create(self, index: int) -> str | None:
        name = warm_name(index)
        if self._monotonic() < self._starting.get(name, _Starting()).retry_at:
            return None
        try:
            return self._applications.create(name, self.executors, tags={WARM_TAG: "true"})
        except ReplayError as exc:
            self._failed(name, f"could not be created: {exc}")
            return None

    def _look_after(self, name: str, app_id: str, busy: bool) -> bool:
        """Start the application when it is stopped; True when it is started and idle."""
        app = self._applications.describe(app_id)
        state = application_state(app.get("state"))
        starting = self._starting.setdefault(name, _Starting())
        if state is EmrApplicationState.STARTED:
            starting.requested, starting.failures = False, 0
            return not self._applications.active_job_runs(app_id)
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

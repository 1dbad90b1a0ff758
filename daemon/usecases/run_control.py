"""Live control of a running replay: change its rate, pause it, resume it (``daemon.core.run_control``).

Order of a change: authorize, decide (the pure rules), commit the run's new list of changes to the
store, then send the whole list on the control channel the tasks read. The store is the truth: a job
launched later gets every change in its spec. A send that fails keeps the stored change and answers
``Unavailable``; the daemon re-sends the run's list at its next watcher tick (and once at start-up
for every going run with changes), and a job ignores a version it has already seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

import structlog

from daemon.config.settings import Settings
from daemon.core.authz import may_control_run
from daemon.core.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    ReplayError,
    StaleUpdate,
    Unavailable,
    UnknownCluster,
)
from daemon.core.run_control import (
    CONTROLLABLE_STATES,
    Action,
    ControlledRun,
    Pause,
    RateChange,
    Resume,
    SetRate,
    apply,
    changes_from,
    latest_rate,
)
from daemon.core.states import RunKind, RunState
from daemon.usecases.audit import Audit
from daemon.usecases.catalog import Catalog
from daemon.usecases.ports import Clusters, Notifier, RunControlChannel
from daemon.usecases.wire import run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

AUTO_ACTOR = "auto"  # who the audit log and the thread name for a tps=auto decision
ATTEMPTS = 5  # a running run's row moves with every progress sample: read, decide and write again


def controlled_run(run: Run) -> ControlledRun:
    return ControlledRun(
        run_id=run.id,
        kind=RunKind(run.kind),
        state=RunState(run.state),
        tps=run.tps,
        changes=changes_from(run.control),
    )


def _verb(action: Action) -> str:
    return "tps" if isinstance(action, SetRate) else "pause" if isinstance(action, Pause) else "resume"


def _label(tps: int, paused: bool) -> str:
    return f"paused (resumes at {tps}/s)" if paused else f"{tps}/s"


class RunControlService:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        channel: Clusters[RunControlChannel],
        notifier: Notifier,
        clock: Callable[[], datetime],
    ) -> None:
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._channel = channel
        self._notifier = notifier
        self._clock = clock
        self._audit = Audit(store)
        self._lock = threading.Lock()
        self._unsent: set[str] | None = None  # None: not looked yet (start-up): every going run

    def set_tps(self, actor: str, run_id: str, tps: int) -> Run:
        return self.change(actor, run_id, SetRate(tps))

    def pause(self, actor: str, run_id: str) -> Run:
        return self.change(actor, run_id, Pause())

    def resume(self, actor: str, run_id: str) -> Run:
        return self.change(actor, run_id, Resume())

    def _authorize(self, actor: str, run: Run) -> None:
        source = self._catalog.sources.get(run.source)
        owners = source.owners if source is not None else ()
        if not may_control_run(
            actor, requester=run.requester, source_owners=owners, admins=self._settings.admins
        ):
            raise Forbidden("only the requester, the source's owners or an admin may change this run's rate")

    def _record(
        self, actor: str, run_id: str, action: Action, *, authorize: bool = True
    ) -> tuple[Run, ControlledRun, RateChange]:
        for _ in range(ATTEMPTS):
            run = self._store.runs.get(run_id)
            if authorize:
                self._authorize(actor, run)
            before = controlled_run(run)
            change = apply(
                before,
                action,
                now=self._clock().timestamp(),
                lead_s=self._settings.control_lead_s,
                max_tps=self._settings.max_tps,
            )
            changes = [c.to_dict() for c in (*before.changes, change)]
            try:
                return (
                    self._store.runs.set_control(run_id, changes, expected_version=run.version),
                    before,
                    change,
                )
            except StaleUpdate:
                continue
        raise Conflict(f"run {run_id} kept changing while its rate was being set; try again")

    def change(self, actor: str, run_id: str, action: Action) -> Run:
        """Record the change, send it to the run's tasks, tell the run's thread; refusals change nothing."""
        verb = _verb(action)
        run, before, change = self._audit.refusing(
            actor, verb, run_id, lambda: self._record(actor, run_id, action)
        )
        previous = latest_rate(before.tps, before.changes)
        detail = {
            "before": _label(previous.tps, previous.paused),
            "after": _label(change.tps, change.paused),
            "at": change.at,
        }
        try:
            self._send(run)
        except Unavailable as exc:
            self._audit.accepted(actor, verb, run_id, sent=False, **detail)
            raise Unavailable(
                f"the change to run {run_id} is recorded but its tasks were not told yet: {exc}; "
                "the daemon re-sends it as soon as Kafka answers"
            ) from exc
        self._audit.accepted(actor, verb, run_id, sent=True, **detail)
        self._tell_thread(run, actor)
        return run

    def steer(self, run_id: str, tps: int, *, reason: str) -> Run | None:
        """``tps=auto``: the daemon's own decision (the requester asked for it at launch), audited as
        ``auto`` with its reason and told in the thread. None when the run can no longer be changed
        (it ended, is paused or cancelling meanwhile): steering simply stops."""
        try:
            run, before, change = self._record(AUTO_ACTOR, run_id, SetRate(tps), authorize=False)
        except (Conflict, BadRequest) as exc:
            log.info("auto rate not applied", run_id=run_id, tps=tps, reason=str(exc))
            return None
        previous = latest_rate(before.tps, before.changes)
        detail = {"before": _label(previous.tps, previous.paused), "after": _label(change.tps, change.paused)}
        try:
            self._send(run)
        except Unavailable as exc:
            log.warning("auto rate recorded, not sent yet", run_id=run_id, error=str(exc))
        self._audit.accepted(AUTO_ACTOR, "tps", run_id, why=reason, at=change.at, **detail)
        self._tell_thread(run, AUTO_ACTOR, reason=reason)
        return run

    def _send(self, run: Run) -> None:
        changes = changes_from(run.control)
        if run.control_key is None:  # a run finished before keys were kept: no job is left to tell
            log.warning("no control key: the change is recorded, not sent", run_id=run.id)
            return
        try:
            self._channel[run.options.cluster].publish(run.id, changes, key=run.control_key)
        except Unavailable:
            with self._lock:
                if self._unsent is not None:
                    self._unsent.add(run.id)
            raise
        with self._lock:
            if self._unsent is not None:
                self._unsent.discard(run.id)

    def _tell_thread(self, run: Run, actor: str, *, reason: str | None = None) -> None:
        if run.kind != RunKind.REPLAY or run.slack_ts is None:
            return  # a pipeline run speaks once, in its pipeline's thread; a run not announced yet will be
        if not self._store.notifications.record_once(
            f"run:{run.id}:control:{len(run.control or ())}", run_id=run.id, kind="rate_changed"
        ):
            return
        wired = run_out(run)
        try:
            self._notifier.run_rate_changed(wired, actor=actor, reason=reason)
            if run.slack_progress_ts is not None:
                self._notifier.run_progress(wired, rate=None)
        except ReplayError as exc:
            log.warning("rate change not told in the thread", run_id=run.id, error=str(exc))

    def resend_unsent(self) -> None:
        """Send again what could not be sent (every going run's list, the first time: at start-up)."""
        with self._lock:
            pending, first = set(self._unsent or ()), self._unsent is None
        if first:
            runs, _ = self._store.runs.list(state=[str(s) for s in CONTROLLABLE_STATES], limit=200)
            pending = {run.id for run in runs if run.control}
            with self._lock:
                self._unsent = set(pending)
        for run_id in sorted(pending):
            run = self._store.runs.get(run_id)
            if RunState(run.state).terminal or not run.control:
                with self._lock:
                    assert self._unsent is not None
                    self._unsent.discard(run_id)
                continue
            try:
                self._send(run)
            except UnknownCluster as exc:  # its cluster left the settings: no job there to tell
                log.warning(
                    "rate change dropped: the run's cluster is not configured", run_id=run_id, error=str(exc)
                )
                with self._lock:
                    assert self._unsent is not None
                    self._unsent.discard(run_id)
                continue
            except Unavailable as exc:
                log.warning("rate change still not sent", run_id=run_id, error=str(exc))
                return
            log.info("rate change re-sent", run_id=run_id, version=len(run.control))

"""The watcher: drives every unfinished run from `queued` to its end, surviving restarts.

Each tick leases unfinished runs (so two daemons never drive one run), then moves each one step:
launch a queued run, follow a running one (progress, result line), stop a cancelling one. All state
lives in the store and in the launcher's handle, so a daemon killed at any point picks up where it
stopped. Every notification goes through a dedup key first: no restart ever sends one twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from daemon.core.errors import InvalidTransition, ReplayError
from daemon.core.states import RunKind, RunState
from daemon.usecases.ports import JobOutcome, JobState, Launcher, Notifier, ProgressSource
from daemon.usecases.replays import LAUNCH_FAILURE
from daemon.usecases.wire import run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

SpecBuilder = Callable[[Run], str]
T = TypeVar("T")


@dataclass(frozen=True)
class WatcherTiming:
    poll_s: float = 1.0
    lease_ttl_s: float = 15.0
    progress_every_s: float = 15.0  # at most one progress message per run this often


class Watcher:
    def __init__(
        self,
        *,
        store: Store,
        launcher: Launcher,
        notifier: Notifier,
        build_spec: SpecBuilder,
        progress: ProgressSource,
        owner: str,
        timing: WatcherTiming | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._launcher = launcher
        self._notifier = notifier
        self._build_spec = build_spec
        self._progress = progress
        self._owner = owner
        self._timing = timing or WatcherTiming()
        self._monotonic = monotonic
        self._last_sample: dict[str, tuple[float, int]] = {}  # (monotonic time, confirmed)
        self._last_note: dict[str, float] = {}
        self._wake = threading.Event()
        self._unreleased: dict[str, Run] = {}  # finished runs whose launcher resources are not freed yet

    def wake(self) -> None:
        """Look at the runs now rather than at the next poll (a run was just created or cancelled)."""
        self._wake.set()

    def run_forever(self, stop: threading.Event) -> None:
        log.info("watcher started", owner=self._owner)
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad tick (e.g. the database blinked) must not stop the watcher
                log.exception("watcher tick failed")
            self._wake.wait(self._timing.poll_s)
            self._wake.clear()
        log.info("watcher stopped", owner=self._owner)

    def tick(self) -> None:
        for run in list(self._unreleased.values()):
            self._release(run)
        for run in self._store.runs.lease_unfinished(self._owner, self._timing.lease_ttl_s, limit=50):
            bound = log.bind(run_id=run.id)
            try:
                self._step(run)
            except Exception as exc:
                bound.exception("run step failed", error=str(exc))

    def _step(self, run: Run) -> None:
        state = RunState(run.state)
        if state == RunState.QUEUED:
            self._launch(run)
        elif state == RunState.CANCELLING:
            self._cancel(run)
        elif state in (RunState.SUBMITTED, RunState.RUNNING):
            self._follow(run)

    # -- steps -------------------------------------------------------------------------------

    def _launch(self, run: Run) -> None:
        workers = int((run.options or {}).get("workers", 1))
        try:
            handle = self._launcher.submit(run.id, self._build_spec(run), workers=workers)
        except Exception as exc:
            self._finish(run, RunState.FAILED, failure_reason=f"{LAUNCH_FAILURE}: {exc}")
            return
        run = self._store.runs.transition(
            run.id,
            RunState.SUBMITTED,
            launcher_kind=self._launcher.kind,
            launcher_handle=handle,
            submitted_at=self._store.now(),
        )
        log.info("run submitted", run_id=run.id, launcher=self._launcher.kind)
        if run.kind == RunKind.PIPELINE:
            return  # a pipeline run speaks once, when it ends, in its pipeline's thread
        if self._store.notifications.record_once(f"run:{run.id}:started", run_id=run.id, kind="started"):
            thread = self._notify(run, lambda: self._notifier.run_started(run_out(run)))
            if thread is not None:
                self._store.runs.update(run.id, slack_ts=thread)

    def _follow(self, run: Run) -> None:
        handle = run.launcher_handle or {}
        outcome = self._launcher.outcome(handle)
        if outcome is not None:
            self._conclude(run, outcome)
            return
        job_state = self._launcher.state(handle)
        if job_state in (JobState.EXITED, JobState.LOST):
            outcome = self._launcher.outcome(handle)  # it may have printed its line just before exiting
            if outcome is not None:
                self._conclude(run, outcome)
                return
            tail = " | ".join(line for line in self._launcher.log_tail(handle, 5) if line.strip())
            reason = "job process lost" + (f" (last output: {tail[-400:]})" if tail else "")
            self._finish(run, RunState.FAILED, failure_reason=reason)
            return
        if job_state == JobState.RUNNING and run.state == RunState.SUBMITTED:
            run = self._store.runs.transition(run.id, RunState.RUNNING, started_at=self._store.now())
        self._record_progress(run)

    def _record_progress(self, run: Run) -> None:
        confirmed = self._progress.confirmed(run.id)
        if confirmed is None or confirmed == run.confirmed_count:
            return
        now = self._monotonic()
        last = self._last_sample.get(run.id)
        rate = (confirmed - last[1]) / (now - last[0]) if last is not None and now > last[0] else 0.0
        run = self._store.runs.update_progress(run.id, confirmed, rate)
        self._last_sample[run.id] = (now, confirmed)
        noted = self._last_note.get(run.id)
        if noted is not None and now - noted < self._timing.progress_every_s:
            return
        self._last_note[run.id] = now
        if run.kind == RunKind.PIPELINE:
            return
        if self._store.notifications.record_once(
            f"run:{run.id}:progress:{confirmed}", run_id=run.id, kind="progress"
        ):
            self._notify(run, lambda: self._notifier.run_progress(run_out(run), rate=rate))

    def _cancel(self, run: Run) -> None:
        if run.launcher_handle:
            self._launcher.cancel(run.launcher_handle)
        outcome = self._launcher.outcome(run.launcher_handle) if run.launcher_handle else None
        if outcome is not None and outcome.succeeded:  # it finished before the cancel landed
            self._conclude(run, outcome)
            return
        confirmed = self._progress.confirmed(run.id) if run.launcher_handle else None
        self._finish(
            run,
            RunState.CANCELLED,
            confirmed_count=max(confirmed or 0, run.confirmed_count),
            failure_reason="cancelled on request",
        )

    def _conclude(self, run: Run, outcome: JobOutcome) -> None:
        result = outcome.payload
        fields: dict[str, Any] = {
            "confirmed_count": int(result.get("confirmed", run.confirmed_count) or 0),
            "failed_tasks": int(result.get("failed_tasks", 0) or 0),
            "duplicates_reported": int(result.get("duplicates_possible", 0) or 0),
        }
        if result.get("rows_selected") is not None:
            fields["rows_selected"] = int(result["rows_selected"])
        if result.get("achieved_tps") is not None:
            fields["achieved_tps"] = float(result["achieved_tps"])
        if result.get("dead_lettered") is not None:
            fields["dead_lettered"] = int(result["dead_lettered"])
        if outcome.succeeded:
            self._finish(run, RunState.SUCCEEDED, **fields)
        else:
            self._finish(run, RunState.FAILED, failure_reason=outcome.reason or "the job failed", **fields)

    def _finish(self, run: Run, state: RunState, **fields: Any) -> None:
        now = self._store.now()
        fields.setdefault("ended_at", now)
        if run.started_at is None:
            fields.setdefault("started_at", run.submitted_at or now)
        try:
            if run.kind == RunKind.PIPELINE and run.pipeline_id and state == RunState.SUCCEEDED:
                # publish, then commit: the watermark moves with the run's success, in one transaction
                _, run = self._store.pipelines.commit_watermark(
                    run.pipeline_id, run.id, run.watermark_high, {**fields, "state": state}
                )
            else:
                run = self._store.runs.transition(run.id, state, **fields)
        except InvalidTransition:
            run = self._store.runs.get(run.id)  # someone else concluded it first
        self._last_sample.pop(run.id, None)
        self._last_note.pop(run.id, None)
        self._progress.forget(run.id)
        log.info("run concluded", run_id=run.id, state=str(run.state), confirmed=run.confirmed_count)
        quiet = run.kind == RunKind.PIPELINE and state == RunState.SUCCEEDED and run.confirmed_count == 0
        if not quiet and self._store.notifications.record_once(
            f"run:{run.id}:final", run_id=run.id, kind="final"
        ):
            self._notify(run, lambda: self._notifier.run_finished(run_out(run)))
        if run.launcher_handle:
            self._release(run)
        self._store.runs.release_lease(run.id, self._owner)

    @staticmethod
    def _notify(run: Run, send: Callable[[], T]) -> T | None:
        """Deliver one message; a Slack failure is logged, never allowed to stall the run itself."""
        try:
            return send()
        except ReplayError as exc:
            log.warning("notification not delivered", run_id=run.id, error=str(exc))
            return None

    def _release(self, run: Run) -> None:
        """Give back what the job held; a launcher that needs more time gets more ticks."""
        try:
            done = self._launcher.release(run.launcher_handle or {})
        except Exception as exc:  # freeing capacity must not undo a run's conclusion
            log.warning("could not release the job's resources yet", run_id=run.id, error=str(exc))
            done = False
        if done:
            self._unreleased.pop(run.id, None)
        else:
            self._unreleased[run.id] = run

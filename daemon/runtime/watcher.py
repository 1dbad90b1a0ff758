"""The watcher: drives every unfinished run from `queued` to its end, surviving restarts.

(Just over 400 lines: a run's life cycle reads best in one place; its helpers are separate modules.)

Each tick leases unfinished runs (so two daemons never drive one run), then moves each one step:
launch a queued run, follow a running one (progress, result line), stop a cancelling one. All state
lives in the store and in the launcher's handle, so a daemon killed at any point picks up where it
stopped. Every notification goes through a dedup key first: no restart ever sends one twice.

Every tick steps *all* unfinished runs, leased a page at a time and kept while it works
(`LeaseKeeper`); releases still to do are read from the store (`Releases`), so a restart finishes them.

A launch refused because a dependency is unavailable (Kafka electing leaders after a restart) is
tried again on later ticks for `launch_patience_s` before the run fails with that reason.

Admission: a queued run is launched only once it holds one of the launcher's `max_concurrent_runs`
slots, claimed in the store in one transaction for every daemon on it (`RunQueue.admit`); queued
runs are admitted oldest first and never overtake each other, whichever daemon leases them. A
replay that waits gets its thread at once, its card and progress message saying its place in line,
edited as the line moves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from daemon.core.errors import InvalidTransition, ReplayError, Unavailable
from daemon.core.partitions import PartitionProgress, Partitions
from daemon.core.queue_wait import places_in_line
from daemon.core.reconcile import Listed, listed_ids
from daemon.core.run_control import changes_from, paused_since
from daemon.core.run_options import WindowKind
from daemon.core.states import FailureKind, RunKind, RunState
from daemon.runtime.final_messages import FinalMessages
from daemon.runtime.lease_keeper import LeaseKeeper
from daemon.runtime.releases import Releases
from daemon.usecases.ports import (
    Clusters,
    Handle,
    JobOutcome,
    JobState,
    Launcher,
    Notifier,
    ProgressSample,
    ProgressSource,
    RunThread,
)
from daemon.usecases.run_reports import reconcile_document, report_fields
from daemon.usecases.wire import run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

LAUNCH_FAILURE = "could not launch the job"

SpecBuilder = Callable[[Run], str]
T = TypeVar("T")


@dataclass(frozen=True)
class WatcherTiming:
    poll_s: float = 1.0
    lease_ttl_s: float = 15.0
    progress_every_s: float = 10.0  # the progress message is edited at most this often
    max_pause_s: float | None = None  # a run paused longer is cancelled (None: no limit)
    page_size: int = 50  # runs leased per claim; a tick claims pages until none is left
    max_hold_s: float = 300.0  # a tick stuck this long stops renewing its leases (see LeaseKeeper)
    final_retry_s: float = 5.0  # an undelivered final message is sent again after this long
    launch_patience_s: float = 60.0  # a launch refused as Unavailable is tried again for this long


class Watcher:
    def __init__(
        self,
        *,
        store: Store,
        launcher: Launcher,
        notifier: Notifier,
        build_spec: SpecBuilder,
        progress: Clusters[ProgressSource],
        owner: str,
        timing: WatcherTiming | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_tick: Callable[[], None] | None = None,
        before_launch: Callable[[Run], None] | None = None,
    ) -> None:
        self._store = store
        self._launcher = launcher
        self._notifier = notifier
        self._build_spec = build_spec
        self._progress = progress
        self._owner = owner
        self._timing = timing or WatcherTiming()
        self._monotonic = monotonic
        self._on_tick = on_tick  # e.g. re-send rate changes the control channel did not take
        self._before_launch = before_launch  # e.g. the watched consumer groups' baseline lag
        self._last_sample: dict[str, ProgressSample] = {}
        self._partitions: dict[str, tuple[PartitionProgress, ...]] = {}  # the lines last stored, per run
        self._rate: dict[str, float] = {}  # each run's latest rate, from its beacons' own timestamps
        self._last_note: dict[str, float] = {}
        self._wake = threading.Event()
        self._releases = Releases(store, launcher, page_size=self._timing.page_size, monotonic=monotonic)
        self._launch_trouble: dict[str, float] = {}  # run id -> when a launch was first found unavailable
        self._finals = FinalMessages(store, notifier, retry_after_s=self._timing.final_retry_s)
        self._places: dict[str, int] = {}  # each waiting run's place in line, as last shown
        self._line: dict[str, int] | None = None  # this tick's places in line, read when a run has to wait
        self._admitting = True  # False once a queued run had to wait this tick: none may overtake it

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
        self._releases.finish_pending()
        self._finals.retry_undelivered()
        self._line, self._admitting = None, True
        if self._on_tick is not None:
            try:
                self._on_tick()
            except Exception:
                log.exception("watcher tick hook failed")
        timing = self._timing
        keeper = LeaseKeeper(self._store, self._owner, ttl_s=timing.lease_ttl_s, max_hold_s=timing.max_hold_s)
        stepped: set[str] = set()
        with keeper:
            for run in keeper.unfinished(page_size=timing.page_size):
                bound = log.bind(run_id=run.id)
                if not keeper.still_held(run.id):
                    bound.info("run taken over by another daemon: not stepped")
                    continue
                stepped.add(run.id)
                try:
                    self._step(run)
                except Exception as exc:
                    bound.exception("run step failed", error=str(exc))
        # Every unfinished run this daemon may step was seen: what is kept for any other run (cancelled
        # while queued, concluded by another daemon) would only pile up.
        self._forget({run_id for kept in self._per_run() for run_id in kept} - stepped)
        for source in self._progress.made():  # a cluster no run has used has no reader to drop
            source.forget_all_but(stepped)

    def _per_run(self) -> tuple[dict[str, Any], ...]:
        """What this watcher keeps per run between ticks (beacon readers aside: `ProgressSource`)."""
        return (
            self._last_sample,
            self._partitions,
            self._rate,
            self._last_note,
            self._places,
            self._launch_trouble,
        )

    def _forget(self, run_ids: Collection[str]) -> None:
        for kept in self._per_run():
            for run_id in run_ids:
                kept.pop(run_id, None)

    def _step(self, run: Run) -> None:
        state = RunState(run.state)
        if state == RunState.QUEUED:
            if self._admit(run):
                self._launch(run)
            else:
                self._wait(run)
        elif state == RunState.CANCELLING:
            self._cancel(run)
        elif state in (RunState.SUBMITTED, RunState.RUNNING):
            self._follow(run)

    # -- admission ---------------------------------------------------------------------------

    def _admit(self, run: Run) -> bool:
        """The run holds a launcher slot, claimed in the store for every daemon at once (and no older
        queued run had to wait this tick)."""
        if self._admitting:
            self._admitting = self._store.runs.admit(run.id, cap=self._launcher.max_concurrent_runs)
        return self._admitting

    def _wait(self, run: Run) -> None:
        """Keep the run queued; its thread (opened now if need be) shows its place in line."""
        if self._line is None:  # the places the API gives (ReplayService.queue_positions)
            holding, in_line = self._store.runs.line()
            slots = self._launcher.max_concurrent_runs
            self._line = places_in_line([queued.id for queued in in_line], len(holding), slots)
        place = self._line.get(run.id)
        if place is None or self._places.get(run.id) == place:
            return
        self._places[run.id] = place
        log.info("run waits for a launcher slot", run_id=run.id, place=place)
        if run.kind != RunKind.REPLAY:
            return
        waiting = run_out(run, queue_position=place)
        if self._store.notifications.record_once(f"run:{run.id}:started", run_id=run.id, kind="started"):
            self._open_thread(run, lambda: self._notifier.run_started(waiting))
        elif run.slack_ts is not None:
            self._notify(run, lambda: self._notifier.run_state_changed(waiting))
            self._notify(run, lambda: self._notifier.run_progress(waiting, rate=None))

    def _open_thread(self, run: Run, post: Callable[[], RunThread | None]) -> None:
        thread = self._notify(run, post)
        if thread is not None:
            self._store.runs.update(
                run.id, slack_channel=thread.channel, slack_ts=thread.ts, slack_progress_ts=thread.progress_ts
            )

    # -- steps -------------------------------------------------------------------------------

    def _launch(self, run: Run) -> None:
        workers = run.options.workers
        if self._before_launch is not None:
            try:
                self._before_launch(run)
            except Exception:  # what it prepares is extra: the run starts anyway
                log.exception("before-launch hook failed", run_id=run.id)
        try:
            application_id = self._pipeline_application(run, workers)
            handle = self._launcher.submit(
                run.id, self._build_spec(run), workers=workers, application_id=application_id
            )
        except Unavailable as exc:  # e.g. a broker still electing leaders after a restart: wait and see
            first = self._launch_trouble.setdefault(run.id, self._monotonic())
            if self._monotonic() - first < self._timing.launch_patience_s:
                log.warning(
                    "run not launched yet: a dependency is unavailable", run_id=run.id, error=str(exc)
                )
                return
            self._launch_trouble.pop(run.id, None)
            self._launch_failed(run, exc)
            return
        except Exception as exc:
            self._launch_failed(run, exc)
            return
        self._launch_trouble.pop(run.id, None)
        try:
            run = self._store.runs.transition(
                run.id,
                RunState.SUBMITTED,
                launcher_kind=self._launcher.kind,
                launcher_handle=handle,
                submitted_at=self._store.now(),
            )
        except InvalidTransition:  # cancelled while the launcher submitted (an EMR submit takes seconds)
            self._cancel_launched(run.id, handle)
            return
        log.info("run submitted", run_id=run.id, launcher=self._launcher.kind)
        self._places.pop(run.id, None)
        if run.kind != RunKind.REPLAY:
            return  # a pipeline run speaks once, in its pipeline's thread; a reconcile in its subject's
        submitted = run
        if self._store.notifications.record_once(f"run:{run.id}:started", run_id=run.id, kind="started"):
            self._open_thread(run, lambda: self._notifier.run_started(run_out(submitted)))
        elif run.slack_ts is not None:  # it waited, its thread showing its place in line: now it starts
            self._notify(run, lambda: self._notifier.run_state_changed(run_out(submitted)))
            self._notify(run, lambda: self._notifier.run_progress(run_out(submitted), rate=None))

    def _pipeline_application(self, run: Run, workers: int) -> str | None:
        """A pipeline's runs share its own application (made on its first run, deleted only by
        de-provisioning); it is recorded before the job starts, so nothing made goes untracked."""
        if run.pipeline_id is None:
            return None  # a one-off: the launcher gives it its own, released with the run
        application_id = self._launcher.pipeline_application(run.pipeline_id, workers)
        if application_id is not None:
            self._store.pipelines.record_application(run.pipeline_id, application_id)
        return application_id

    def _cancel_launched(self, run_id: str, handle: Handle) -> None:
        """A job started for a run that was cancelled meanwhile: record its handle first (so a crash
        from here on still knows what to stop), then stop it like any cancelled run."""
        run = self._store.runs.update(
            run_id, launcher_kind=self._launcher.kind, launcher_handle=handle, submitted_at=self._store.now()
        )
        log.info("run cancelled while it was being submitted: stopping its job", run_id=run_id)
        if RunState(run.state) == RunState.CANCELLING:
            self._cancel(run)
        else:  # it ended otherwise meanwhile: its job must not run on, untracked
            self._launcher.cancel(handle)

    def _launch_failed(self, run: Run, exc: Exception) -> None:
        self._finish(
            run, RunState.FAILED, failure_reason=f"{LAUNCH_FAILURE}: {exc}", failure_kind=FailureKind.LAUNCH
        )

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
            self._finish(run, RunState.FAILED, failure_reason=reason, failure_kind=FailureKind.LOST)
            return
        if job_state == JobState.RUNNING and run.state == RunState.SUBMITTED:
            run = self._store.runs.transition(run.id, RunState.RUNNING, started_at=self._store.now())
            if run.kind == RunKind.REPLAY and run.slack_ts is not None:
                running = run
                self._notify(running, lambda: self._notifier.run_state_changed(run_out(running)))
        if run.kind != RunKind.RECONCILE:  # a reconcile publishes nothing: no beacons to follow
            self._record_progress(run)
        self._limit_pause(run)

    def _limit_pause(self, run: Run) -> None:
        """A pause holds the job's compute (and EMR's timeout runs on): past the limit, cancel the run."""
        limit = self._timing.max_pause_s
        if limit is None or not run.control:
            return
        now = self._store.now().timestamp()
        since = paused_since(changes_from(run.control), now)
        if since is None or now - since <= limit:
            return
        reason = f"paused for more than {limit:g}s (REPLAY_MAX_PAUSE_S): cancelled"
        log.info("run paused too long", run_id=run.id, since=since)
        run = self._store.runs.transition(run.id, RunState.CANCELLING)
        self._cancel(run, reason=reason)

    def _record_progress(self, run: Run) -> None:
        sample = self._progress[run.options.cluster].sample(run.id, _beacons_since(run))
        if sample is None:
            return
        partitions = None
        if sample.partitions and self._partitions.get(run.id) != sample.partitions:
            partitions = Partitions(self._store.now(), sample.partitions).document()
        if sample.confirmed == run.confirmed:
            if partitions is not None:  # a partition ended (or failed) without a record more
                self._store.runs.update_progress(run.id, None, None, partitions=partitions)
                self._partitions[run.id] = sample.partitions  # stored: not written again until it moves
            return
        last = self._last_sample.get(run.id)
        self._last_sample[run.id] = sample
        rate = self._rate.get(run.id)
        if last is not None and sample.at is not None and last.at is not None and sample.at > last.at:
            rate = (sample.confirmed - last.confirmed) / (sample.at - last.at)  # the job's own clock
            self._rate[run.id] = rate
        run = self._store.runs.update_progress(run.id, sample.confirmed, rate or 0.0, partitions=partitions)
        if partitions is not None:
            self._partitions[run.id] = sample.partitions
        now = self._monotonic()
        noted = self._last_note.get(run.id)
        if noted is not None and now - noted < self._timing.progress_every_s:
            return
        self._last_note[run.id] = now
        if run.kind == RunKind.REPLAY and run.slack_progress_ts is not None:
            progressed = run
            self._notify(progressed, lambda: self._notifier.run_progress(run_out(progressed), rate=rate))

    def _cancel(self, run: Run, reason: str = "cancelled on request") -> None:
        if run.launcher_handle:
            self._launcher.cancel(run.launcher_handle)
        outcome = self._launcher.outcome(run.launcher_handle) if run.launcher_handle else None
        if outcome is not None and outcome.succeeded:  # it finished before the cancel landed
            self._conclude(run, outcome)
            return
        if not run.launcher_handle:  # never launched: nothing was sent, and that is known
            self._finish(run, RunState.CANCELLED, failure_reason=reason)
            return
        confirmed = (  # a cluster no longer configured has no beacons to read: unknown
            self._progress[run.options.cluster].confirmed(run.id, _beacons_since(run))
            if run.options.cluster in self._progress.names
            else None
        )
        if confirmed is None:  # the beacons cannot be read: unknown, at least what progress saw
            self._finish(
                run,
                RunState.CANCELLED,
                confirmed=None,
                on_topic_at_least=run.confirmed or None,  # 0 seen is no bound worth stating
                failure_reason=reason,
            )
            return
        self._finish(
            run, RunState.CANCELLED, confirmed=max(confirmed, run.confirmed or 0), failure_reason=reason
        )

    def _conclude(self, run: Run, outcome: JobOutcome) -> None:
        if run.kind == RunKind.RECONCILE:
            self._conclude_reconcile(run, outcome)
            return
        fields = report_fields(outcome.payload, confirmed_so_far=run.confirmed, now=self._store.now())
        if fields.get("suppressed") is not None:  # which erasure list, at which version, it honoured
            as_of = fields.get("erasures_as_of")
            detail = {
                "list": run.options.erasures,
                "as_of": as_of.isoformat() if as_of is not None else None,
                "suppressed": fields["suppressed"],
            }
            self._store.audit.append("watcher", "erasures", run.id, "accepted", detail)
        verdict = outcome.payload.get("reconcile")
        if isinstance(verdict, dict):  # its lists first: a page never shows a verdict without them
            self._keep_lists(run.id, listed_ids(verdict))
        if outcome.succeeded:
            self._finish(run, RunState.SUCCEEDED, **fields)
        else:
            self._finish(run, RunState.FAILED, failure_reason=outcome.reason or "the job failed", **fields)
        if run.options.repair_of is not None and isinstance(fields.get("reconcile"), dict):
            self._repaired(run, run.options.repair_of, fields["reconcile"], listed_ids(verdict or {}))

    def _repaired(self, repair: Run, parent_id: str, verdict: dict[str, Any], lists: Listed) -> None:
        """A repair's verdict is its parent's now (the parent's whole selection against every record of
        both): it goes onto the parent with its lists, and into the parent's thread."""
        self._keep_lists(parent_id, lists)
        parent = self._store.runs.update(
            parent_id, reconcile={**verdict, "on_demand": True, "repaired_by": repair.id}
        )
        if self._store.notifications.record_once(
            f"run:{repair.id}:repaired", run_id=parent.id, kind="reconciled"
        ):
            self._notify(parent, lambda: self._notifier.run_reconciled(run_out(parent)))

    def _keep_lists(self, run_id: str, lists: Listed) -> None:
        """Store a verdict's lists. They are its detail, not its outcome: if the store refuses them,
        the run still concludes with its counts, and the log says why its page lists nothing."""
        try:
            self._store.verdict_ids.replace(run_id, lists)
        except Exception:
            log.exception("the verdict's id lists were not stored", run_id=run_id)

    def _conclude_reconcile(self, run: Run, outcome: JobOutcome) -> None:
        """An on-demand reconcile: its document goes onto the run it checked, and into that run's thread."""
        document = outcome.payload.get("reconcile") if outcome.succeeded else None
        if not isinstance(document, dict):
            document = {"error": outcome.reason or "the reconcile job reported nothing"}
        subject_id = run.reconciles
        if subject_id is not None:
            reconciled = reconcile_document(document, now=self._store.now(), on_demand=True)
            self._keep_lists(subject_id, listed_ids(document))
            subject = self._store.runs.update(subject_id, reconcile=reconciled)
            if self._store.notifications.record_once(
                f"run:{run.id}:reconciled", run_id=subject.id, kind="reconciled"
            ):
                self._notify(subject, lambda: self._notifier.run_reconciled(run_out(subject)))
        state = RunState.SUCCEEDED if outcome.succeeded else RunState.FAILED
        self._finish(run, state, failure_reason=None if outcome.succeeded else outcome.reason)

    def _finish(self, run: Run, state: RunState, **fields: Any) -> None:
        now = self._store.now()
        fields.setdefault("ended_at", now)
        if state == RunState.FAILED:
            fields.setdefault("failure_kind", FailureKind.JOB)
        if run.started_at is None:
            fields.setdefault("started_at", run.submitted_at or now)
        try:
            if run.kind == RunKind.PIPELINE and run.pipeline_id and state == RunState.SUCCEEDED:
                # publish, then commit: the watermark moves with the run's success, in one transaction;
                # a run that selected nothing leaves it where it was (the rows it did not see may come),
                # unless it read commits: those are fixed, and nothing more can come in them
                selected = fields.get("rows_selected", run.rows_selected)
                fixed = run.options.window == WindowKind.COMMITS
                high = run.watermark_high if selected != 0 or fixed else None
                _, run = self._store.pipelines.commit_watermark(
                    run.pipeline_id, run.id, high, {**fields, "state": state}
                )
            else:
                run = self._store.runs.transition(run.id, state, **fields)
        except InvalidTransition:
            run = self._store.runs.get(run.id)  # someone else concluded it first
        self._forget([run.id])
        if run.options.cluster in self._progress.names:
            self._progress[run.options.cluster].forget(run.id)
        log.info("run concluded", run_id=run.id, state=str(run.state), confirmed=run.confirmed)
        quiet = run.kind == RunKind.RECONCILE or (
            run.kind == RunKind.PIPELINE and state == RunState.SUCCEEDED and run.confirmed == 0
        )
        if not quiet:
            self._finals.send(run)
        if run.launcher_handle:
            self._releases.release(run)
        self._store.runs.release_lease(run.id, self._owner)
        try:
            self._store.runs.compact_progress(run.id)
        except Exception:  # its samples stay: harmless, only a store's size
            log.exception("progress samples not compacted", run_id=run.id)

    @staticmethod
    def _notify(run: Run, send: Callable[[], T]) -> T | None:
        """Deliver one message; a Slack failure is logged, never allowed to stall the run itself."""
        try:
            return send()
        except ReplayError as exc:
            log.warning("notification not delivered", run_id=run.id, error=str(exc))
            return None


def _beacons_since(run: Run) -> float:
    """No beacon of the run predates its submission (its creation, before that was recorded)."""
    return (run.submitted_at or run.created_at).timestamp()

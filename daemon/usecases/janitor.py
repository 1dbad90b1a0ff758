"""The janitor: asks owners about idle pipelines, then de-provisions the ones nobody kept.

A pipeline is idle once no run has published for `idle_after` days (counted from its last publish or
its creation), or when a snooze it was given ends. Each idle period gets one prompt per owner
(Keep / Delete now); the grace period starts once every prompt was delivered, and with no answer by
then the pipeline is de-provisioned: paused, its in-flight run cancelled and stopped, its own topic
and EMR application deleted (a live topic never is), owners told, and the row archived so its history
stays. "Delete now" is for a pipeline in its idle period only.

An owner's answer wins over a running pass: de-provisioning begins with an optimistic check of the
row the pass read (`begin_deprovision`), and a Keep after that point is refused, never ignored.
Every step is safe to repeat: prompts and farewells are recorded, sent, then marked delivered (one
never delivered is sent again), topic and application deletion accept "already gone", an application
still to delete stays recorded until it is gone, and archiving comes last, so a crash anywhere is
finished by the next pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

import structlog

from daemon.contract.models import IdlePrompt
from daemon.core.authz import may_manage_pipeline
from daemon.core.errors import Conflict, Forbidden, InvalidTransition, StaleUpdate
from daemon.core.retry import Clock, Sleep, poll
from daemon.core.states import TERMINAL_RUN_STATES, PipelineState, RunState
from daemon.usecases.catalog import Catalog
from daemon.usecases.ports import ApplicationDeleter, Clusters, Notifier, TopicAdmin
from daemon.usecases.wire import pipeline_out
from store import Store
from store.models import Pipeline

log = structlog.get_logger(__name__)

Assessment = Literal["active", "new-idle-period", "unprompted", "waiting", "due"]
UNFINISHED_RUN_STATES = [state for state in RunState if state not in TERMINAL_RUN_STATES]
UNDELIVERED_RETRY_AFTER = timedelta(minutes=10)  # a younger undelivered record may still be in flight


@dataclass(frozen=True)
class IdlePolicy:
    idle_after_days: int = 30
    grace_days: int = 7
    keep_days: int = 30


@dataclass(frozen=True)
class IdleClock:
    """``idle``: its owners are being asked and it is removed at ``at``; else it turns idle at ``at``
    unless a run publishes first."""

    idle: bool
    at: datetime


def idle_period_start(pipeline: Pipeline, policy: IdlePolicy) -> datetime:
    """When the pipeline became (or becomes) idle: `idle_after` days after its last publish or its
    creation, or the end of a snooze ("Keep for N more days" asks again when the N days are over)."""
    last = pipeline.last_published_at or pipeline.created_at
    start = last + timedelta(days=pipeline.idle_after_days or policy.idle_after_days)
    if pipeline.snoozed_until is not None and pipeline.snoozed_until > start:
        start = pipeline.snoozed_until
    return start


def assess(pipeline: Pipeline, now: datetime, policy: IdlePolicy) -> Assessment:
    """Pure: where the pipeline stands in the idle clean-up (`unprompted`: its idle period began but
    not every owner has received the question yet, so no grace period runs)."""
    start = idle_period_start(pipeline, policy)
    if now < start:
        return "active"
    if pipeline.idle_since != start:
        return "new-idle-period"
    if pipeline.delete_after is None:
        return "unprompted"
    return "due" if now >= pipeline.delete_after else "waiting"


def in_idle_period(pipeline: Pipeline, now: datetime, policy: IdlePolicy) -> bool:
    """The janitor opened the pipeline's current idle period (its owners are being asked)."""
    return assess(pipeline, now, policy) in ("unprompted", "waiting", "due")


class Janitor:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        topics: Clusters[TopicAdmin],
        notifier: Notifier,
        clock: Callable[[], datetime],
        policy: IdlePolicy | None = None,
        admins: list[str] | None = None,
        applications: ApplicationDeleter | None = None,
        wake_watcher: Callable[[], None] = lambda: None,
        stop_timeout_s: float = 120.0,
        release_timeout_s: float = 300.0,
        monotonic: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        self._monotonic, self._sleep = monotonic, sleep
        """`stop_timeout_s`: how long de-provisioning waits for a cancelled run's job to stop before
        leaving the rest to the next pass; `release_timeout_s`: the same for deleting an application."""
        self._store = store
        self._catalog = catalog
        self._topics = topics
        self._notifier = notifier
        self._clock = clock
        self._policy = policy or IdlePolicy()
        self._admins = set(admins or [])
        self._applications = applications
        self._wake_watcher = wake_watcher
        self._stop_timeout_s = stop_timeout_s
        self._release_timeout_s = release_timeout_s

    # -- the daily pass -----------------------------------------------------------------------

    def run_once(self) -> None:
        for pipeline in self._store.pipelines.awaiting_release():  # e.g. left by a restarted daemon
            self._release(pipeline, timeout_s=self._release_timeout_s)
        now = self._clock()
        for pipeline in self._store.pipelines.list():
            if pipeline.state == PipelineState.ARCHIVED:
                continue
            try:
                self.tend(pipeline, now)
            except Exception:  # one pipeline's trouble must not stop the others' clean-up
                log.exception("janitor could not tend a pipeline", pipeline_id=pipeline.id)

    def tend(self, pipeline: Pipeline, now: datetime) -> None:
        """One pipeline, as the pass read it at `now`: an answer given since then wins."""
        if pipeline.deprovision_reason is not None:  # begun by an earlier pass or click: finish it
            self._finish_deprovision(pipeline, release_timeout_s=self._release_timeout_s)
            return
        status = assess(pipeline, now, self._policy)
        if status == "active":
            if pipeline.idle_since is not None or pipeline.delete_after is not None:  # it published again
                self._store.pipelines.update(pipeline.id, idle_since=None, delete_after=None)
            return
        if status == "due":
            reason = f"no answer within {self._policy.grace_days} days"
            try:
                self.deprovision(pipeline, reason=reason)
            except StaleUpdate:
                log.info("pipeline kept while the janitor looked at it: not removed", pipeline_id=pipeline.id)
            return
        if status == "new-idle-period":
            try:  # only as read: a Keep landing meanwhile is not asked about at once
                pipeline = self._store.pipelines.update(
                    pipeline.id,
                    expected_version=pipeline.version,
                    idle_since=idle_period_start(pipeline, self._policy),
                    delete_after=None,
                )
            except StaleUpdate:
                return  # changed since the pass read it: the next pass looks again
            log.info("pipeline idle: asking its owners", pipeline_id=pipeline.id)
        if status in ("new-idle-period", "unprompted") and self._prompt_owners(pipeline, now):
            assert pipeline.idle_since is not None
            deadline = self._clock() + timedelta(days=self._policy.grace_days)
            if self._store.pipelines.set_deadline(
                pipeline.id, idle_since=pipeline.idle_since, delete_after=deadline
            ):
                log.info("idle prompts delivered", pipeline_id=pipeline.id, delete_after=str(deadline))

    def _prompt_owners(self, pipeline: Pipeline, now: datetime) -> bool:
        """Ask every owner; True once all of them have received the question (now or before)."""
        assert pipeline.idle_since is not None
        prompt = IdlePrompt(
            pipeline=pipeline_out(pipeline),
            idle_since=pipeline.idle_since,
            deadline=now + timedelta(days=self._policy.grace_days),  # the grace runs from delivery
            keep_days=self._policy.keep_days,
        )
        delivered = True
        for owner in self._owners(pipeline):
            key = f"idle:{pipeline.id}:{pipeline.idle_since.isoformat()}:{owner}"
            send = partial(self._notifier.idle_prompt, prompt, owner)
            delivered = self._deliver(key, pipeline.id, "idle-prompt", send) and delivered
        return delivered

    def _deliver(self, key: str, pipeline_id: str, kind: str, send: Callable[[], str]) -> bool:
        """Send once per key, and know it arrived: record, send, mark delivered. True once delivered.

        A record never marked delivered (its sender crashed) is taken over and sent again once old; a
        send that raised is forgotten, so the next pass tries again.
        """
        notifications = self._store.notifications
        if not notifications.record_once(key, pipeline_id=pipeline_id, kind=kind):
            found = notifications.get(key)
            if found is not None and found.delivered_at is not None:
                return True
            if not notifications.reclaim(key, recorded_before=self._store.now() - UNDELIVERED_RETRY_AFTER):
                return False  # another pass is sending it right now
        try:
            channel = send()
        except Exception:
            notifications.forget(key)
            raise
        notifications.mark_delivered(key, channel)
        return True

    # -- answers from the owners --------------------------------------------------------------

    def _owners(self, pipeline: Pipeline) -> tuple[str, ...]:
        """Who answers for the pipeline now: its source's owners as the catalog says today. A source
        gone from the catalog leaves the owners recorded at creation to be told (nobody else is)."""
        return self._catalog.owners_of(pipeline.source) or tuple(pipeline.owners or ())

    def _owned(self, actor: str, pipeline_id: str, action: str) -> Pipeline:
        pipeline = self._store.pipelines.get(pipeline_id)
        owners = self._catalog.owners_of(pipeline.source)
        if not may_manage_pipeline(actor, owners=owners, admins=self._admins):
            self._store.audit.append(actor, action, pipeline_id, "refused", {"reason": "not an owner"})
            raise Forbidden(f"only the owners of pipeline {pipeline_id} or an admin may {action} it")
        if pipeline.state == PipelineState.ARCHIVED:
            raise Conflict(f"pipeline {pipeline_id} is already de-provisioned")
        return pipeline

    def keep(self, actor: str, pipeline_id: str, days: int | None = None) -> Pipeline:
        """Snooze the question: no deletion before the snooze ends; then it is asked again. A pass
        that read the pipeline before sees the change and leaves it (`begin_deprovision`)."""
        self._owned(actor, pipeline_id, "keep")
        until = self._clock() + timedelta(days=days or self._policy.keep_days)
        try:
            pipeline = self._store.pipelines.snooze(pipeline_id, until=until, by=actor)
        except Conflict as exc:
            self._store.audit.append(actor, "keep", pipeline_id, "refused", {"reason": str(exc)})
            raise
        self._store.audit.append(actor, "keep", pipeline_id, "accepted", {"until": until.isoformat()})
        return pipeline

    def delete_now(self, actor: str, pipeline_id: str, *, confirm: bool) -> Pipeline:
        """De-provision an idle pipeline at once, on an explicit confirmation; a pipeline not in its
        idle period (never asked about, published or kept since) is refused: unschedule stops those."""
        pipeline = self._owned(actor, pipeline_id, "delete")
        refusal = None
        if not confirm:
            refusal = f"deleting pipeline {pipeline_id} needs an explicit confirmation (confirm=true)"
        elif pipeline.deprovision_reason is None and not in_idle_period(
            pipeline, self._clock(), self._policy
        ):
            refusal = (
                f"pipeline {pipeline_id} is not idle (it is not in an idle period its owners were asked "
                "about), so it is not deleted; to stop it for good, unschedule it"
            )
        if refusal is not None:
            self._store.audit.append(actor, "delete", pipeline_id, "refused", {"reason": refusal})
            raise Conflict(refusal)
        self._store.audit.append(actor, "delete", pipeline_id, "accepted", {})
        return self.deprovision(
            pipeline, reason=f"deleted by <@{actor}>", release_timeout_s=0.0, stop_timeout_s=0.0
        )

    # -- de-provisioning ----------------------------------------------------------------------

    def _live_topics(self, cluster: str) -> set[str]:
        """The live topics of the sources on ``cluster``: never deleted."""
        return {s.live_topic for s in self._catalog.sources.values() if s.live_topic and s.cluster == cluster}

    def deprovision(
        self,
        pipeline: Pipeline,
        *,
        reason: str,
        release_timeout_s: float | None = None,
        stop_timeout_s: float | None = None,
    ) -> Pipeline:
        """Pause, stop the in-flight run, delete topic and application, tell the owners, archive: each
        step repeatable. StaleUpdate when the pipeline changed since `pipeline` was read (kept).

        A request (unschedule, Delete now) passes zero timeouts: it begins the removal, does what can
        be done at once and answers; `finish_pending` takes up the rest within seconds.
        """
        begun = self._store.pipelines.begin_deprovision(pipeline.id, reason=reason, read=pipeline)
        self._store.audit.append("janitor", "pause", pipeline.id, "accepted", {"reason": reason})
        return self._finish_deprovision(
            begun,
            release_timeout_s=self._release_timeout_s if release_timeout_s is None else release_timeout_s,
            stop_timeout_s=stop_timeout_s,
        )

    def finish_pending(self) -> None:
        """Finish every de-provisioning begun and not yet done (a run still stopping, an owner not yet
        told, an application still being deleted, a daemon killed halfway): every few seconds, so an
        unschedule never waits for the daily pass. Nothing here waits: what is not done yet, the next
        call looks at again."""
        for pipeline in self._store.pipelines.being_deprovisioned():
            try:
                self._finish_deprovision(pipeline, release_timeout_s=0.0, stop_timeout_s=0.0)
            except Exception:  # one pipeline's trouble must not stop the others' removal
                log.exception("could not go on removing a pipeline", pipeline_id=pipeline.id)
        for pipeline in self._store.pipelines.awaiting_release():
            self._release(pipeline, timeout_s=0.0)

    def _finish_deprovision(
        self, pipeline: Pipeline, *, release_timeout_s: float, stop_timeout_s: float | None = None
    ) -> Pipeline:
        reason = pipeline.deprovision_reason or "de-provisioned"
        if not self._stop_runs(
            pipeline, timeout_s=self._stop_timeout_s if stop_timeout_s is None else stop_timeout_s
        ):
            log.info(
                "pipeline paused; its run is still stopping: the next pass goes on", pipeline_id=pipeline.id
            )
            return pipeline
        pipeline = self._store.pipelines.get(pipeline.id)  # its application may be recorded since
        removed = ["its schedule"]
        cluster = pipeline.options.cluster
        if pipeline.topic in self._live_topics(cluster):
            removed.append(f"not its topic {pipeline.topic} (a source's live topic is never deleted)")
        elif pipeline.topic_created and cluster not in self._topics.names:
            removed.append(
                f"not its topic {pipeline.topic} (its Kafka cluster {cluster} is no longer configured)"
            )
        elif pipeline.topic_created:
            self._topics[cluster].delete(pipeline.topic)
            removed.append(f"its topic {pipeline.topic}")
        if pipeline.application_release:
            gone = self._release(pipeline, timeout_s=release_timeout_s)
            removed.append(
                f"its EMR application {pipeline.application_release}" + ("" if gone else " (being deleted)")
            )
        delivered = True
        for owner in self._owners(pipeline):
            send = partial(self._notifier.pipeline_removed, pipeline_out(pipeline), owner, removed, reason)
            delivered = (
                self._deliver(f"deprovisioned:{pipeline.id}:{owner}", pipeline.id, "deprovisioned", send)
                and delivered
            )
        if not delivered:  # archived once every owner was told; the next pass sends what is missing
            return pipeline
        archived = self._store.pipelines.set_state(pipeline.id, PipelineState.ARCHIVED)
        self._store.audit.append(
            "janitor", "deprovision", pipeline.id, "accepted", {"removed": removed, "reason": reason}
        )
        log.info("pipeline de-provisioned", pipeline_id=pipeline.id, removed=removed, reason=reason)
        return archived

    def _stop_runs(self, pipeline: Pipeline, *, timeout_s: float) -> bool:
        """Cancel the pipeline's unfinished runs as a user's cancel does (CANCELLING; the watcher stops
        the job) and wait for them to end; False when one is still going after `timeout_s`."""

        def stopped() -> bool | None:
            going = self._store.runs.list(pipeline_id=pipeline.id, state=UNFINISHED_RUN_STATES, limit=50)[0]
            if not going:
                return True
            asked = False
            for run in going:
                if run.state == RunState.CANCELLING:
                    continue
                try:
                    self._store.runs.transition(run.id, RunState.CANCELLING)
                except InvalidTransition:  # it ended meanwhile
                    continue
                why = pipeline.deprovision_reason or "de-provisioned"
                self._store.audit.append("janitor", "cancel", run.id, "accepted", {"reason": why})
                asked = True
            if asked:
                self._wake_watcher()
            return None

        done = poll(stopped, every_s=0.2, timeout_s=timeout_s, clock=self._monotonic, sleep=self._sleep)
        return done is not None

    def _release(self, pipeline: Pipeline, *, timeout_s: float) -> bool:
        """Delete the pipeline's recorded EMR application; it stays recorded until it is gone."""
        app_id = pipeline.application_release
        if app_id is None:
            return True
        if self._applications is None:
            log.warning(
                "an EMR application awaits release but no launcher can delete it", application_id=app_id
            )
            return False
        try:
            gone = self._applications.delete_application(app_id, timeout_s=timeout_s)
        except Exception as exc:  # e.g. AWS unavailable: the record stays, the next pass tries again
            log.warning("could not delete the EMR application yet", application_id=app_id, error=str(exc))
            return False
        if gone:
            self._store.pipelines.released(pipeline.id, app_id)
            log.info("emr application released", pipeline_id=pipeline.id, application_id=app_id)
        return gone

    # -- reporting ----------------------------------------------------------------------------

    def countdown(self, pipeline: Pipeline) -> IdleClock | None:
        """Where the pipeline's idle clock stands, as the pages say it: when it turns idle if nothing
        publishes, or when it is removed; None once it is archived or being removed."""
        if pipeline.state == PipelineState.ARCHIVED or pipeline.deprovision_reason is not None:
            return None
        now = self._clock()
        status = assess(pipeline, now, self._policy)
        if status == "active":
            return IdleClock(idle=False, at=idle_period_start(pipeline, self._policy))
        deadline = pipeline.delete_after if status in ("waiting", "due") else None
        return IdleClock(idle=True, at=deadline or now + timedelta(days=self._policy.grace_days))

    def idle_pipelines(self) -> list[tuple[Pipeline, datetime]]:
        """Pipelines idle now or waiting for deletion, with their deadline (or when they become due)."""
        found = []
        for pipeline in self._store.pipelines.list():
            clock = self.countdown(pipeline)
            if clock is not None and clock.idle:
                found.append((pipeline, clock.at))
        return found

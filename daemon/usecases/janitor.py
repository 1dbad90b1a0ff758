"""The janitor: asks owners about idle pipelines, then de-provisions the ones nobody kept.

A pipeline is idle once no run has published for `idle_after` days (counted from its last publish or
its creation), or when a snooze it was given ends. Each idle period gets one prompt per owner
(Keep / Delete now); with no answer within the grace period it is de-provisioned: its own topic and
EMR application are deleted (a live topic never is), owners are told, and the row is archived so its
history stays.

Every step is safe to repeat: prompts and farewells go through dedup keys, topic and application
deletion accept "already gone", and archiving comes last, so a crash anywhere is finished by the
next run without errors or double messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

import structlog

from daemon.contract.models import IdlePrompt
from daemon.core.authz import may_manage_pipeline
from daemon.core.errors import Conflict, Forbidden
from daemon.core.states import PipelineState
from daemon.usecases.catalog import Catalog
from daemon.usecases.ports import ApplicationDeleter, Notifier, TopicAdmin
from daemon.usecases.wire import pipeline_out
from store import Store
from store.models import Pipeline

log = structlog.get_logger(__name__)

Assessment = Literal["active", "new-idle-period", "waiting", "due"]


@dataclass(frozen=True)
class IdlePolicy:
    idle_after_days: int = 30
    grace_days: int = 7
    keep_days: int = 30


def idle_period_start(pipeline: Pipeline, policy: IdlePolicy) -> datetime:
    """When the pipeline became (or becomes) idle: `idle_after` days after its last publish or its
    creation, or the end of a snooze ("Keep for N more days" asks again when the N days are over)."""
    last = pipeline.last_published_at or pipeline.created_at
    start = last + timedelta(days=pipeline.idle_after_days or policy.idle_after_days)
    if pipeline.snoozed_until is not None and pipeline.snoozed_until > start:
        start = pipeline.snoozed_until
    return start


def assess(pipeline: Pipeline, now: datetime, policy: IdlePolicy) -> Assessment:
    """Pure: where the pipeline stands in the idle clean-up."""
    start = idle_period_start(pipeline, policy)
    if now < start:
        return "active"
    if pipeline.idle_since != start or pipeline.delete_after is None:
        return "new-idle-period"
    return "due" if now >= pipeline.delete_after else "waiting"


class Janitor:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        topics: TopicAdmin,
        notifier: Notifier,
        clock: Callable[[], datetime],
        policy: IdlePolicy | None = None,
        admins: list[str] | None = None,
        applications: ApplicationDeleter | None = None,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._topics = topics
        self._notifier = notifier
        self._clock = clock
        self._policy = policy or IdlePolicy()
        self._admins = set(admins or [])
        self._applications = applications

    # -- the daily pass -----------------------------------------------------------------------

    def run_once(self) -> None:
        now = self._clock()
        for pipeline in self._store.pipelines.list():
            if pipeline.state == PipelineState.ARCHIVED:
                continue
            try:
                self._tend(pipeline, now)
            except Exception:  # one pipeline's trouble must not stop the others' clean-up
                log.exception("janitor could not tend a pipeline", pipeline_id=pipeline.id)

    def _tend(self, pipeline: Pipeline, now: datetime) -> None:
        status = assess(pipeline, now, self._policy)
        if status == "active":
            if pipeline.delete_after is not None:  # it published again: the question is moot
                self._store.pipelines.update(pipeline.id, idle_since=None, delete_after=None)
            return
        if status == "new-idle-period":
            pipeline = self._store.pipelines.update(
                pipeline.id,
                idle_since=idle_period_start(pipeline, self._policy),
                delete_after=now + timedelta(days=self._policy.grace_days),
            )
            log.info(
                "pipeline idle: asking its owners",
                pipeline_id=pipeline.id,
                delete_after=str(pipeline.delete_after),
            )
        if status == "due":
            self.deprovision(pipeline, reason=f"no answer within {self._policy.grace_days} days")
            return
        self._prompt_owners(pipeline)  # new period, or a crash left some owners unasked

    def _prompt_owners(self, pipeline: Pipeline) -> None:
        assert pipeline.idle_since is not None and pipeline.delete_after is not None
        prompt = IdlePrompt(
            pipeline=pipeline_out(pipeline),
            idle_since=pipeline.idle_since,
            deadline=pipeline.delete_after,
            keep_days=self._policy.keep_days,
        )
        for owner in pipeline.owners:
            key = f"idle:{pipeline.id}:{pipeline.idle_since.isoformat()}:{owner}"
            self._once(key, pipeline.id, "idle-prompt", partial(self._notifier.idle_prompt, prompt, owner))

    def _once(self, key: str, pipeline_id: str, kind: str, send: Callable[[], str]) -> None:
        """At most once per key: record, then send; a send that raised is forgotten and retried."""
        if not self._store.notifications.record_once(key, pipeline_id=pipeline_id, kind=kind):
            return
        try:
            channel = send()
        except Exception:
            self._store.notifications.forget(key)
            raise
        self._store.notifications.set_channel(key, channel)

    # -- answers from the owners --------------------------------------------------------------

    def _owned(self, actor: str, pipeline_id: str, action: str) -> Pipeline:
        pipeline = self._store.pipelines.get(pipeline_id)
        if not may_manage_pipeline(actor, owners=pipeline.owners, admins=self._admins):
            self._store.audit.append(actor, action, pipeline_id, "refused", {"reason": "not an owner"})
            raise Forbidden(f"only the owners of pipeline {pipeline_id} or an admin may {action} it")
        if pipeline.state == PipelineState.ARCHIVED:
            raise Conflict(f"pipeline {pipeline_id} is already de-provisioned")
        return pipeline

    def keep(self, actor: str, pipeline_id: str, days: int | None = None) -> Pipeline:
        """Snooze the question: no deletion before the snooze ends; then it is asked again."""
        self._owned(actor, pipeline_id, "keep")
        until = self._clock() + timedelta(days=days or self._policy.keep_days)
        pipeline = self._store.pipelines.update(
            pipeline_id, snoozed_until=until, snoozed_by=actor, idle_since=None, delete_after=None
        )
        self._store.audit.append(actor, "keep", pipeline_id, "accepted", {"until": until.isoformat()})
        return pipeline

    def delete_now(self, actor: str, pipeline_id: str) -> Pipeline:
        pipeline = self._owned(actor, pipeline_id, "delete")
        self._store.audit.append(actor, "delete", pipeline_id, "accepted", {})
        return self.deprovision(pipeline, reason=f"deleted by <@{actor}>")

    # -- de-provisioning ----------------------------------------------------------------------

    def _live_topics(self) -> set[str]:
        return {s.live_topic for s in self._catalog.sources.values() if s.live_topic}

    def deprovision(self, pipeline: Pipeline, *, reason: str) -> Pipeline:
        """Topic, EMR application, farewell messages, then archive: each step repeatable."""
        removed = ["its schedule"]
        if pipeline.topic_created and pipeline.topic not in self._live_topics():
            self._topics.delete(pipeline.topic)
            removed.append(f"its topic {pipeline.topic}")
        if pipeline.emr_application_id and self._applications is not None:
            self._applications.delete_application(pipeline.emr_application_id, timeout_s=300)
            removed.append(f"its EMR application {pipeline.emr_application_id}")
        for owner in pipeline.owners:
            key = f"deprovisioned:{pipeline.id}:{owner}"
            self._once(
                key,
                pipeline.id,
                "deprovisioned",
                partial(self._notifier.pipeline_removed, pipeline_out(pipeline), owner, removed, reason),
            )
        archived = self._store.pipelines.set_state(pipeline.id, PipelineState.ARCHIVED)
        self._store.audit.append(
            "janitor", "deprovision", pipeline.id, "accepted", {"removed": removed, "reason": reason}
        )
        log.info("pipeline de-provisioned", pipeline_id=pipeline.id, removed=removed, reason=reason)
        return archived

    # -- reporting ----------------------------------------------------------------------------

    def idle_pipelines(self) -> list[tuple[Pipeline, datetime]]:
        """Pipelines idle now or waiting for deletion, with their deadline (or when they become due)."""
        now = self._clock()
        found = []
        for pipeline in self._store.pipelines.list():
            if pipeline.state == PipelineState.ARCHIVED:
                continue
            status = assess(pipeline, now, self._policy)
            if status == "active":
                continue
            deadline = (
                pipeline.delete_after
                if status in ("waiting", "due")
                else now + timedelta(days=self._policy.grace_days)
            )
            assert deadline is not None
            found.append((pipeline, deadline))
        return found

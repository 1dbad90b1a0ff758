"""The time to live of one-off replay topics: told first, then deleted.

A `topic=auto` replay publishes into a topic the platform created for it (`replay.<source>.<run id>`,
`runs.topic_created`). It holds the window's events, decrypted PII included, so it must not outlive
its use: `ttl` after the run ended the topic is deleted. The requester is told in the run's thread
`notice` ahead of that, and again once it is gone.

Every step is safe to repeat, so a pass interrupted anywhere is finished by the next one: each notice
is recorded, sent, then marked delivered (`notifications`, one dedup key per run and notice; a record
never marked delivered is sent again); deletion accepts "already gone"; the run records the deletion
(`runs.topic_deleted_at`) last. A late notice moves the deletion back, so the requester always gets
its full `notice` ahead; a notice Slack will not take is retried for one `notice` period, after which
the topic goes anyway: deleting the data is the promise, the message is a courtesy. Only topics the
platform created are candidates, and a live topic (a source's `live_topic`) or any name outside
`replay.` is never deleted.

A one-off topic is created before the row of the run or pipeline it is for, so a crash between the
two leaves a `replay.<source>.<id>` topic that nothing records. Each pass also looks for those
(`sweep_strays`): a topic named for an id the store does not know, seen so on passes at least
`stray_grace` apart, is deleted; a create still in flight records its row long before that.

A source's dead-letter topic (`replay.dlq.<source>`) is shared by its runs and keeps each record for
at most `ttl` (the job sets its retention, see `usecases.dead_letters`). Once the source has had no
run, unfinished or ended, for `ttl`, whatever the topic held has expired and it is deleted
(`sweep_dead_letters`) without a notice: nothing is left in it to tell anyone about.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

import structlog

from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.errors import PipelineNotFound, RunNotFound
from daemon.usecases.catalog import Catalog
from daemon.usecases.dead_letters import DEAD_LETTER_PREFIX
from daemon.usecases.janitor import UNDELIVERED_RETRY_AFTER
from daemon.usecases.ports import Clusters, Notifier, TopicAdmin
from daemon.usecases.wire import run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

ONE_OFF_PREFIX = "replay."
PASS_LIMIT = 100  # runs looked at per pass; the next pass takes the rest
STRAY_GRACE = timedelta(minutes=10)  # how long a topic may wait for its row before it is a stray
# what auto_topic_name and pipeline_topic make: replay.<source>.<run or pipeline id>
_ONE_OFF_NAME = re.compile(r"replay\.[^.]+\.(?P<owner>[rp]-[0-9a-f]{12})")


class TopicTtl:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        topics: Clusters[TopicAdmin],
        notifier: Notifier,
        clock: Callable[[], datetime],
        ttl: timedelta,
        notice: timedelta,
        stray_grace: timedelta = STRAY_GRACE,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._topics = topics
        self._notifier = notifier
        self._clock = clock
        self._ttl = ttl
        self._notice = notice
        self._stray_grace = stray_grace
        # (cluster, topic) -> when a pass first found it recorded nowhere
        self._strays: dict[tuple[str, str], datetime] = {}

    def run_once(self) -> None:
        """One pass over the finished runs whose topic is still kept and whose notice is due."""
        now = self._clock()
        for run in self._store.runs.kept_topics(
            ended_before=now - self._ttl + self._notice, limit=PASS_LIMIT
        ):
            try:
                self.tend(run, now)
            except Exception:  # one topic's trouble must not keep the others
                log.exception("replay topic ttl: could not tend the run's topic", run_id=run.id)
        for cluster in self._topics.names:  # one cluster away does not keep the others untended
            try:
                self.sweep_strays(now, cluster)
            except Exception:
                log.exception("replay topic ttl: could not look for stray topics", cluster=cluster)
            try:
                self.sweep_dead_letters(now, cluster)
            except Exception:
                log.exception("replay topic ttl: could not look at the dead-letter topics", cluster=cluster)

    def sweep_dead_letters(self, now: datetime, cluster: str = DEFAULT_CLUSTER) -> list[str]:
        """Delete the dead-letter topics on ``cluster`` of sources that have had no run for ``ttl``."""
        deleted = []
        topics = self._topics[cluster]
        for topic in topics.names(DEAD_LETTER_PREFIX):
            source = topic.removeprefix(DEAD_LETTER_PREFIX)
            if self._protected(topic, cluster) or self._store.runs.source_busy_since(source, now - self._ttl):
                continue
            topics.delete(topic)
            log.info(
                "dead-letter topic deleted: its source had no run for the ttl", topic=topic, cluster=cluster
            )
            deleted.append(topic)
        return deleted

    def sweep_strays(self, now: datetime, cluster: str = DEFAULT_CLUSTER) -> list[str]:
        """Delete the one-off topics on ``cluster`` no run or pipeline records, once found so for
        ``stray_grace``."""
        topics = self._topics[cluster]
        found: dict[tuple[str, str], datetime] = {}
        for topic in topics.names(ONE_OFF_PREFIX):
            named = _ONE_OFF_NAME.fullmatch(topic)
            if named is None or self._protected(topic, cluster) or self._recorded(named["owner"]):
                continue
            found[(cluster, topic)] = self._strays.get((cluster, topic), now)
        deleted = []
        for (_, topic), since in found.items():
            if now - since >= self._stray_grace:
                topics.delete(topic)
                log.warning(
                    "replay topic deleted: no run or pipeline records it",
                    topic=topic,
                    cluster=cluster,
                    since=since,
                )
                deleted.append(topic)
        kept = {key: since for key, since in self._strays.items() if key[0] != cluster}
        self._strays = kept | {key: since for key, since in found.items() if key[1] not in deleted}
        return deleted

    def _recorded(self, owner: str) -> bool:
        try:
            if owner.startswith("r-"):
                self._store.runs.get(owner)
            else:
                self._store.pipelines.get(owner)
        except (RunNotFound, PipelineNotFound):
            return False
        return True

    def _protected(self, topic: str, cluster: str) -> bool:
        live = {
            source.live_topic
            for source in self._catalog.sources.values()
            if source.live_topic and source.cluster == cluster
        }
        return topic in live or not topic.startswith(ONE_OFF_PREFIX)

    def tend(self, run: Run, now: datetime) -> None:
        topic = run.topic
        if run.options.cluster not in self._topics.names:  # nothing to tell before a delete we cannot do
            log.warning(
                "replay topic ttl: the run's Kafka cluster is not configured, its topic is left as it is",
                run_id=run.id,
                topic=topic,
                cluster=run.options.cluster,
            )
            self._store.runs.topic_deleted(run.id)  # out of the queue: it would hold every later pass
            return
        if run.ended_at is None or self._protected(topic, run.options.cluster):
            log.warning(
                "replay topic ttl: not a one-off replay topic, never deleted", run_id=run.id, topic=topic
            )
            return
        due = run.ended_at + self._ttl
        wire = run_out(run)
        warned_at = self._deliver(
            f"topic-ttl:{run.id}:notice", run.id, partial(self._notifier.topic_expiry, wire, deletes_at=due)
        )
        # A late notice still gives its full notice; one not delivered is retried for one notice period.
        late = warned_at + self._notice if warned_at is not None else due + self._notice
        deletes_at = max(due, late)
        if now < deletes_at:
            return
        gone = self._topics[run.options.cluster].delete(topic)
        log.info("replay topic deleted: its ttl ran out", run_id=run.id, topic=topic, existed=gone)
        told = self._deliver(
            f"topic-ttl:{run.id}:deleted", run.id, partial(self._notifier.topic_expiry, wire, deletes_at=None)
        )
        if told is not None or now >= deletes_at + self._notice:
            self._store.runs.topic_deleted(run.id)

    def _deliver(self, key: str, run_id: str, send: Callable[[], str]) -> datetime | None:
        """Send once per key and know it arrived: record, send, mark delivered. When it was delivered,
        or None (not yet: a failed send is forgotten, so the next pass tries again)."""
        notifications = self._store.notifications
        if not notifications.record_once(key, run_id=run_id, kind="topic-ttl"):
            found = notifications.get(key)
            if found is not None and found.delivered_at is not None:
                return found.delivered_at
            if not notifications.reclaim(key, recorded_before=self._store.now() - UNDELIVERED_RETRY_AFTER):
                return None  # another pass is sending it right now
        try:
            channel = send()
        except Exception as exc:
            notifications.forget(key)
            log.warning("replay topic ttl: notice not delivered yet", run_id=run_id, key=key, error=str(exc))
            return None
        notifications.mark_delivered(key, channel)
        found = notifications.get(key)
        return found.delivered_at if found is not None else None

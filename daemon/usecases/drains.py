"""Watching consumer groups drain after a run (``watch=``): baseline at launch, samples after the end.

The watcher calls ``baseline`` just before it submits a run's job (the run's topic is known, none of
its records is there yet) and ``tick`` at every poll. A tick leases the finished runs whose watch is
unfinished (``store.run_drains``) and samples each group due (every ``interval_s``) on the run's
topic, judging it with ``daemon.core.drain``; every state is written back to the run, so a restarted
daemon resumes where the last one stopped. The run's thread gets one dedicated message, edited at
most every ``notify_every_s``, and one line per group when it caught up or timed out (each at most
once, through the notification dedup keys). A pipeline run says only those lines, in its
pipeline's thread; a run that published nothing ends its watch quietly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from daemon.core.drain import DrainStage, GroupDrain, advance, baseline_of, groups_from, skipped
from daemon.core.errors import ReplayError
from daemon.core.lag import OffsetSample, PartitionOffsets
from daemon.core.states import RunKind
from daemon.usecases.ports import Clusters, ConsumerGroupAdmin, Notifier
from daemon.usecases.wire import run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DrainTiming:
    interval_s: float = 5.0  # between two samples of a group
    timeout_s: float = 1800.0  # after the run's end, an unfinished watch gives up
    notify_every_s: float = 10.0  # the watch message is edited at most this often
    lease_ttl_s: float = 15.0


class DrainFollower:
    def __init__(
        self,
        *,
        store: Store,
        groups: Clusters[ConsumerGroupAdmin],
        notifier: Notifier,
        owner: str,
        timing: DrainTiming | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._store = store
        self._groups = groups
        self._notifier = notifier
        self._owner = owner
        self._timing = timing or DrainTiming()
        self._clock = clock or (lambda: store.now().timestamp())

    # -- sampling ------------------------------------------------------------------------------

    def _sample(self, group: str, run: Run) -> tuple[OffsetSample | None, str | None]:
        """The group's offsets on every partition of the run's topic (on its cluster) now; (None, why)
        when Kafka did not say."""
        topic = run.topic
        try:
            at = self._clock()
            groups = self._groups[run.options.cluster]
            committed = groups.committed(group, topic)
            ends = groups.end_offsets(topic)
        except ReplayError as exc:
            log.warning("consumer group not sampled", group=group, topic=topic, error=str(exc))
            return None, f"Kafka did not answer: {exc}"
        partitions = tuple(
            PartitionOffsets(topic, partition, committed.get((topic, partition)), end)
            for partition, end in sorted(ends.items())
        )
        return OffsetSample(at=at, partitions=partitions), None

    def baseline(self, run: Run) -> None:
        """Each watched group's lag on the run's topic before its first record (once per run)."""
        wanted: Sequence[str] = run.options.watch
        if not wanted or run.watch:
            return
        watched = [baseline_of(group, *self._sample(group, run)) for group in wanted]
        stored = {"topic": run.topic, "groups": [g.to_dict() for g in watched]}
        self._store.runs.set_watch(run.id, stored, watching=True)
        log.info("watch baseline taken", run_id=run.id, baselines={g.group: g.baseline for g in watched})

    # -- after the run -------------------------------------------------------------------------

    def tick(self) -> None:
        """Drive every finished run's unfinished watch one step (those this daemon can lease)."""
        for run in self._store.runs.lease_watching(self._owner, self._timing.lease_ttl_s, limit=20):
            try:
                self.step(run)
            except Exception as exc:  # one run's trouble must not stop the others' watches
                log.exception("watch step failed", run_id=run.id, error=str(exc))

    def _due(self, watched: GroupDrain, now: float, ended_at: float) -> bool:
        if watched.state.concluded:
            return False
        return (
            watched.last_at is None
            or watched.last_at < ended_at
            or now - watched.last_at >= (self._timing.interval_s)
        )

    def step(self, run: Run) -> None:
        stored: dict[str, Any] = dict(run.watch or {})
        before = groups_from(stored)
        now = self._clock()
        ended_at = run.ended_at.timestamp() if run.ended_at is not None else now
        deadline = float(stored.get("deadline") or ended_at + self._timing.timeout_s)
        if run.confirmed == 0:
            after = skipped(before)
        else:
            after = tuple(
                self._advance(g, run, now=now, ended_at=ended_at, deadline=deadline)
                if self._due(g, now, ended_at)
                else g
                for g in before
            )
        watching = not all(g.state.concluded for g in after)
        stored.update(deadline=deadline, groups=[g.to_dict() for g in after])
        if after != before:
            self._store.runs.set_watch(run.id, stored, watching=watching)
            self._tell(self._store.runs.get(run.id), stored, before, after, now)
        if not watching:
            log.info("watch concluded", run_id=run.id, states={g.group: str(g.state) for g in after})
            self._store.runs.release_lease(run.id, self._owner)

    def _advance(
        self, watched: GroupDrain, run: Run, *, now: float, ended_at: float, deadline: float
    ) -> GroupDrain:
        sample, why = self._sample(watched.group, run)
        return advance(
            watched,
            sample,
            now=now,
            ended_at=ended_at,
            deadline=deadline,
            interval_s=self._timing.interval_s,
            note=why,
        )

    # -- telling -------------------------------------------------------------------------------

    def _tell(
        self,
        run: Run,
        stored: dict[str, Any],
        before: tuple[GroupDrain, ...],
        after: tuple[GroupDrain, ...],
        now: float,
    ) -> None:
        """The watch message (posted once, then edited at most every `notify_every_s`), then one line
        per group that concluded this step."""
        if all(g.state == DrainStage.SKIPPED for g in after):
            return  # nothing was published: nothing to say
        concluded = [
            g.group
            for g, was in zip(after, before, strict=True)
            if g.state in (DrainStage.CAUGHT_UP, DrainStage.TIMED_OUT) and not was.state.concluded
        ]
        if run.kind == RunKind.REPLAY and run.slack_ts is not None:
            self._message(run, stored, now, final=not run.watching)
        out = run_out(run)
        for group in concluded:
            key = f"run:{run.id}:watch:{group}"
            if self._store.notifications.record_once(key, run_id=run.id, kind="watch"):
                self._deliver(run, partial(self._notifier.watch_concluded, out, group))

    def _message(self, run: Run, stored: dict[str, Any], now: float, *, final: bool) -> None:
        message_ts = stored.get("message_ts")
        if message_ts is None:
            if not self._store.notifications.record_once(f"run:{run.id}:watch", run_id=run.id, kind="watch"):
                return  # posted before a restart that lost its ts: the lines still follow
            message_ts = self._deliver(run, lambda: self._notifier.watch_started(run_out(run)))
            stored.update(message_ts=message_ts, noted_at=now)
        else:
            noted = float(stored.get("noted_at") or 0.0)
            if not final and now - noted < self._timing.notify_every_s:
                return
            ts = str(message_ts)
            self._deliver(run, lambda: self._notifier.watch_progress(run_out(run), message_ts=ts))
            stored.update(noted_at=now)
        self._store.runs.set_watch(run.id, stored, watching=run.watching)

    @staticmethod
    def _deliver(run: Run, send: Callable[[], Any]) -> Any:
        """A Slack failure is logged; it never stops the watch itself."""
        try:
            return send()
        except ReplayError as exc:
            log.warning("watch notification not delivered", run_id=run.id, error=str(exc))
            return None

"""Consumer groups: their lag (anyone may look) and rewinding them (owners of the live topic, admins).

The daemon reads lag, not the job: a group's offsets live in Kafka, are wanted before, during and long
after any replay, and the daemon already holds the admin connection. ``lag`` samples the group twice,
``sample_s`` apart, for the drain. ``rewind`` previews (current -> new per partition, events consumed
again) and applies only when asked; it refuses while the group has members, before asking Kafka (which
refuses too: that answer is translated to the same error), and a retried apply (same actor and
Idempotency-Key) gets the first outcome back from the audit log instead of moving the offsets again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from daemon.core.authz import may_rewind_group
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.errors import (
    BadRequest,
    Forbidden,
    GroupHasMembers,
    GroupNotFound,
    ReplayError,
    UnknownCluster,
)
from daemon.core.grammar import RewindCommand
from daemon.core.lag import GroupState, LagReport, OffsetSample, PartitionOffsets, lag_report
from daemon.core.rewind import (
    OffsetMove,
    RewindPreview,
    parse_target,
    preview,
    refusal_with_members,
    target_label,
)
from daemon.core.windows import instant_label
from daemon.usecases.audit import Audit
from daemon.usecases.catalog import Catalog
from daemon.usecases.ports import Clusters, ConsumerGroupAdmin, GroupDescription
from store import Store

log = structlog.get_logger(__name__)

MAX_SAMPLE_S = 30.0
_REPEAT_LOOKBACK = 50  # audit entries of one actor on one group searched for a retried apply


@dataclass(frozen=True)
class GroupLag:
    description: GroupDescription
    topic: str | None
    report: LagReport
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True)
class LagSampling:
    """A lag call between its two samples: what the second needs, and how long to wait for it."""

    group: str
    description: GroupDescription
    topic: str | None
    topics: tuple[str, ...]
    cluster: str
    first: OffsetSample
    wait_s: float


@dataclass(frozen=True)
class RewindOutcome:
    description: GroupDescription
    preview: RewindPreview
    applied: bool  # the offsets were moved by this request
    repeated: bool = False  # a retried apply: the first one's outcome, nothing moved again
    blocked: str | None = None  # why it cannot be applied now (the group has members)
    cluster: str = DEFAULT_CLUSTER


class ConsumerGroups:
    def __init__(
        self,
        *,
        groups: Clusters[ConsumerGroupAdmin],
        catalog: Catalog,
        store: Store,
        admins: Collection[str],
        sample_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._groups = groups
        self._catalog = catalog
        self._admins = admins
        self._audit = Audit(store)
        self._store = store
        self._sample_s = sample_s
        self._monotonic = monotonic
        self._sleep = sleep

    # -- lag -------------------------------------------------------------------------------------

    def cluster_of(self, topic: str | None, cluster: str | None = None) -> str:
        """The cluster named (`cluster=`), else the one of the sources whose live topic this is, else
        the default one."""
        if cluster is not None:
            if cluster not in self._groups.names:
                raise UnknownCluster(cluster, self._groups.names)
            return cluster
        if topic is None:
            return DEFAULT_CLUSTER
        found = sorted({s.cluster for s in self._catalog.sources.values() if s.live_topic == topic})
        if len(found) > 1:
            raise BadRequest(
                f"'{topic}' is a live topic on the {' and '.join(found)} clusters: say which with cluster="
            )
        return found[0] if found else DEFAULT_CLUSTER

    def _known(self, groups: ConsumerGroupAdmin, group: str) -> GroupDescription:
        """The group, or GroupNotFound when Kafka has neither members nor offsets for it."""
        description = groups.describe_group(group)
        empty = description.state == GroupState.DEAD and not description.members
        if empty and not any(offset is not None for offset in groups.committed(group).values()):
            raise GroupNotFound(group)
        return description

    def _sample(
        self, groups: ConsumerGroupAdmin, group: str, topics: list[str], topic: str | None
    ) -> OffsetSample:
        before = self._monotonic()
        committed = groups.committed(group, topic)
        partitions = [
            PartitionOffsets(name, partition, committed.get((name, partition)), end)
            for name in topics
            for partition, end in sorted(groups.end_offsets(name).items())
        ]
        return OffsetSample(at=(before + self._monotonic()) / 2, partitions=tuple(partitions))

    def lag(
        self,
        group: str,
        topic: str | None = None,
        *,
        sample_s: float | None = None,
        cluster: str | None = None,
    ) -> GroupLag:
        """Per-partition lag of the group on `topic` (or on every topic it has offsets on or is assigned),
        and, unless `sample_s` is 0, the drain over a second sample `sample_s` later."""
        sampling = self.begin_lag(group, topic, sample_s=sample_s, cluster=cluster)
        if sampling.wait_s > 0:
            self._sleep(sampling.wait_s)
        return self.finish_lag(sampling)

    def begin_lag(
        self,
        group: str,
        topic: str | None = None,
        *,
        sample_s: float | None = None,
        cluster: str | None = None,
    ) -> LagSampling:
        """``lag``'s first sample; the caller waits ``wait_s`` (without holding a thread, in the API)
        and then calls ``finish_lag``. The group is read on ``cluster``, else the topic's (its
        source's), else the default one."""
        name = self.cluster_of(topic, cluster)
        groups = self._groups[name]
        description = self._known(groups, group)
        if topic is not None:
            groups.partitions(topic)  # NotFound for a topic that does not exist
            topics = [topic]
        else:
            committed = groups.committed(group)
            assigned = {name for member in description.members for name, _ in member.assignment}
            topics = sorted({name for name, _ in committed} | assigned)
        wait = self._sample_s if sample_s is None else min(max(sample_s, 0.0), MAX_SAMPLE_S)
        first = self._sample(groups, group, topics, topic)
        return LagSampling(group, description, topic, tuple(topics), name, first, wait)

    def finish_lag(self, sampling: LagSampling) -> GroupLag:
        """The report: of the first sample alone when there is no wait, else over the two samples."""
        if sampling.wait_s <= 0:
            return GroupLag(
                sampling.description, sampling.topic, lag_report(sampling.first), sampling.cluster
            )
        groups = self._groups[sampling.cluster]
        second = self._sample(groups, sampling.group, list(sampling.topics), sampling.topic)
        return GroupLag(
            sampling.description, sampling.topic, lag_report(second, sampling.first), sampling.cluster
        )

    # -- rewind ----------------------------------------------------------------------------------

    def _authorize(self, actor: str, topic: str, cluster: str) -> None:
        owners = sorted(
            {
                owner
                for s in self._catalog.sources.values()
                if s.live_topic == topic and s.cluster == cluster
                for owner in s.owners
            }
        )
        if not may_rewind_group(actor, topic_owners=owners, admins=self._admins):
            who = f"the owners of the sources whose live topic it is ({', '.join(f'<@{o}>' for o in owners)})"
            if not owners:
                who = "no catalog source has it as its live topic, so only"
            raise Forbidden(f"rewinding a consumer group on '{topic}': {who} a platform admin may")

    def _preview(self, groups: ConsumerGroupAdmin, command: RewindCommand) -> RewindPreview:
        topic = command.topic
        end = groups.end_offsets(topic)
        earliest = groups.earliest_offsets(topic)
        for_time: dict[int, int | None] = {}
        if isinstance(command.to, datetime):
            for_time = groups.offsets_for_time(topic, command.to)
        current = {p: offset for (t, p), offset in groups.committed(command.group, topic).items()}
        return preview(
            command.group, topic, command.to, current=current, earliest=earliest, end=end, for_time=for_time
        )

    def rewind(
        self, actor: str, command: RewindCommand, *, apply: bool, idempotency_key: str | None = None
    ) -> RewindOutcome:
        """The preview; with `apply`, the offsets moved (audited with the offsets before and after)."""
        detail = {"topic": command.topic, "to": target_label(command.to)}
        action = "rewind" if apply else "rewind-preview"
        try:
            cluster = self.cluster_of(command.topic, command.cluster)
        except ReplayError as exc:  # an unknown or ambiguous cluster: refused, and audited like any refusal
            named = {"cluster": command.cluster} if command.cluster is not None else {}
            self._audit.refuse(actor, action, command.group, exc, **detail, **named)
        if cluster != DEFAULT_CLUSTER:
            detail["cluster"] = cluster
        groups = self._groups[cluster]

        def work() -> RewindOutcome:
            self._authorize(actor, command.topic, cluster)
            description = self._known(groups, command.group)
            if apply and idempotency_key is not None:
                earlier = self._earlier_apply(actor, command, idempotency_key)
                if earlier is not None:
                    return RewindOutcome(description, earlier, applied=False, repeated=True, cluster=cluster)
            blocked = None
            if description.members or not description.state.may_reset:
                blocked = refusal_with_members(command.group, description.state, len(description.members))
            planned = self._preview(groups, command)
            if not apply:
                return RewindOutcome(description, planned, applied=False, blocked=blocked, cluster=cluster)
            if blocked is not None:
                raise GroupHasMembers(command.group, blocked)
            groups.alter_offsets(command.group, command.topic, {m.partition: m.new for m in planned.moves})
            return RewindOutcome(description, planned, applied=True, cluster=cluster)

        outcome = self._audit.refusing(actor, action, command.group, work, **detail)
        if outcome.applied:
            after = groups.committed(command.group, command.topic)
            self._audit.accepted(
                actor,
                "rewind",
                command.group,
                **detail,
                before={str(m.partition): m.current for m in outcome.preview.moves},
                after={str(p): offset for (_, p), offset in sorted(after.items())},
                re_consumed=outcome.preview.re_consumed,
                idempotency_key=idempotency_key,
            )
        return outcome

    def _earlier_apply(self, actor: str, command: RewindCommand, key: str) -> RewindPreview | None:
        """What an earlier apply with this Idempotency-Key did, rebuilt from its audit entry."""
        for entry in self._store.audit.list(_REPEAT_LOOKBACK, actor=actor, target=command.group):
            found: dict[str, Any] = entry.detail or {}
            if entry.action != "rewind" or entry.outcome != "accepted" or found.get("idempotency_key") != key:
                continue
            before, after = found.get("before") or {}, found.get("after") or {}
            moves = tuple(OffsetMove(int(p), before.get(p), int(after[p])) for p in sorted(after, key=int))
            return RewindPreview(command.group, str(found["topic"]), parse_target(str(found["to"])), moves)
        return None

    # -- the plan's hint ----------------------------------------------------------------------

    def rewind_instead(self, topic: str, start: datetime, cluster: str = DEFAULT_CLUSTER) -> str | None:
        """The rewind command that re-delivers a window still retained on the live topic (on
        ``cluster``), else None.

        Retained means every non-empty partition's oldest record is at or before the window's start;
        a topic that cannot be read gives no hint (unknown is not "retained")."""
        try:
            oldest = self._groups[cluster].earliest_timestamps(topic)
        except ReplayError as exc:
            log.info("no retention hint", topic=topic, reason=str(exc))
            return None
        stamps = [stamp for stamp in oldest.values() if stamp is not None]
        if not stamps or max(stamps) > start:
            return None
        named = "" if cluster == DEFAULT_CLUSTER else f" cluster={cluster}"
        return f"rewind <group> {topic} to={instant_label(start)}{named}"

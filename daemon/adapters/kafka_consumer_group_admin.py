"""`KafkaConsumerGroupAdmin`: consumer groups' members and offsets, through Kafka's admin API.

The companion of `KafkaTopicAdmin` (topics): together they are the daemon's only use of the admin API.
`KafkaException`, and the per-partition errors Kafka answers inside a result, are translated once,
in `_translate`: an unreachable broker is `Unavailable`, an unknown topic `NotFound`, a refusal
because the group has members `GroupHasMembers`, anything else Kafka refused `BadRequest`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from daemon.core.errors import BadRequest, GroupHasMembers, NotFound, ReplayError, Unavailable
from daemon.core.lag import GroupState
from daemon.core.retry import RetryPolicy, Sleep
from daemon.usecases.ports import ConsumerGroupAdmin, GroupDescription, GroupMember

log = structlog.get_logger(__name__)

# Every state librdkafka reports, mapped; a state missing here (a newer library) is an error, not a guess.
STATES: dict[ConsumerGroupState, GroupState] = {
    ConsumerGroupState.STABLE: GroupState.STABLE,
    ConsumerGroupState.PREPARING_REBALANCING: GroupState.REBALANCING,
    ConsumerGroupState.COMPLETING_REBALANCING: GroupState.REBALANCING,
    ConsumerGroupState.EMPTY: GroupState.EMPTY,
    ConsumerGroupState.DEAD: GroupState.DEAD,
    ConsumerGroupState.UNKNOWN: GroupState.UNKNOWN,
}
_UNREACHABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
T = TypeVar("T")
_COORDINATOR_STARTING = frozenset(
    {
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
    }
)
COORDINATOR_SETTLE_S = 5.0


def _coordinator_starting(exc: BaseException) -> bool:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error is not None and error.code() in _COORDINATOR_STARTING


# A broker's first group request creates `__consumer_offsets`, and a moved coordinator answers "not
# coordinator" once: those codes (only those) are asked again, for about COORDINATOR_SETTLE_S.
COORDINATOR_RETRY = RetryPolicy(
    attempts=int(COORDINATOR_SETTLE_S / 0.25) + 1,
    pause_s=0.25,
    transient=(KafkaException,),
    when=_coordinator_starting,
)
_NO_TOPIC = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._NOENT})
# What Kafka answers an offset commit for a group with members (it does not know our admin "member").
_HAS_MEMBERS = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION}
)
_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # confluent-kafka leaves it unannotated
_EARLIEST = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # (same)


def state_of(state: ConsumerGroupState) -> GroupState:
    found = STATES.get(state)
    if found is None:
        raise Unavailable(f"Kafka reported consumer group state {state!r}, which this version does not know")
    return found


def _translate(error: KafkaError, what: str, *, group: str | None, where: str) -> ReplayError:
    code = error.code()
    if code in _UNREACHABLE:
        return Unavailable(f"{what}: Kafka at {where} is unreachable or busy ({error.str()})")
    if code in _NO_TOPIC:
        return NotFound(f"{what}: no such topic or partition on the cluster ({error.str()})")
    if code in _HAS_MEMBERS and group is not None:
        return GroupHasMembers(
            group,
            f"{what}: Kafka refused because consumer group '{group}' has active members ({error.str()}); "
            "stop its consumers first, then rewind",
        )
    if code == KafkaError.GROUP_ID_NOT_FOUND and group is not None:
        return NotFound(f"{what}: no consumer group '{group}' on the cluster")
    return BadRequest(f"{what}: Kafka refused ({error.str()})")


class KafkaConsumerGroupAdmin(ConsumerGroupAdmin):
    """Describe groups, read and move their committed offsets; every call has a timeout."""

    def __init__(
        self, *, config: Mapping[str, str], timeout_s: float = 10.0, sleep: Sleep = time.sleep
    ) -> None:
        self._sleep = sleep
        self._where = config.get("bootstrap.servers", "?")
        self._timeout_s = timeout_s
        self._client = AdminClient({**dict(config), "socket.timeout.ms": int(timeout_s * 1000)})

    @contextmanager
    def _errors(self, what: str, group: str | None = None) -> Iterator[None]:
        try:
            yield
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None:
                raise Unavailable(f"{what}: Kafka at {self._where} failed ({exc})") from exc
            raise _translate(error, what, group=group, where=self._where) from exc

    def _check(self, partitions: list[TopicPartition], what: str, group: str | None = None) -> None:
        """Kafka answers some refusals per partition, inside a successful result."""
        for tp in partitions:
            if tp.error is not None:
                raise _translate(tp.error, what, group=group, where=self._where)

    def _settled(self, call: Callable[[], T]) -> T:
        """``call()``, by ``COORDINATOR_RETRY`` while the group coordinator is still starting; a
        broker that stays busy is reported (``_translate``)."""
        return COORDINATOR_RETRY.call(call, sleep=self._sleep)

    def describe_group(self, group: str) -> GroupDescription:
        what = f"describing consumer group '{group}'"
        with self._errors(what, group):
            description = self._settled(
                lambda: self._client.describe_consumer_groups([group], request_timeout=self._timeout_s)[
                    group
                ].result(timeout=self._timeout_s)
            )
        members = tuple(
            GroupMember(
                member_id=member.member_id,
                client_id=member.client_id,
                host=member.host.lstrip("/"),
                assignment=tuple(
                    sorted((tp.topic, tp.partition) for tp in (member.assignment.topic_partitions or []))
                )
                if member.assignment is not None
                else (),
            )
            for member in description.members
        )
        return GroupDescription(group=group, state=state_of(description.state), members=members)

    def committed(self, group: str, topic: str | None = None) -> dict[tuple[str, int], int | None]:
        what = f"reading the committed offsets of '{group}'"
        wanted = [TopicPartition(topic, p) for p in self.partitions(topic)] if topic is not None else None
        request = ConsumerGroupTopicPartitions(group, wanted)
        with self._errors(what, group):
            answer = self._settled(
                lambda: self._client.list_consumer_group_offsets([request], request_timeout=self._timeout_s)[
                    group
                ].result(timeout=self._timeout_s)
            )
        found: list[TopicPartition] = list(answer.topic_partitions or [])
        self._check(found, what, group)
        return {(tp.topic, tp.partition): (None if tp.offset < 0 else tp.offset) for tp in found}

    def partitions(self, topic: str) -> list[int]:
        with self._errors(f"describing topic '{topic}'"):
            metadata = self._client.list_topics(topic=topic, timeout=self._timeout_s)
        found = metadata.topics.get(topic)
        if found is None or (found.error is not None and found.error.code() in _NO_TOPIC):
            raise NotFound(f"no topic '{topic}' on the cluster")
        if found.error is not None:
            raise _translate(found.error, f"describing topic '{topic}'", group=None, where=self._where)
        return sorted(found.partitions)

    def _list_offsets(self, topic: str, spec: Any, what: str) -> dict[int, tuple[int, int]]:
        """partition -> (offset, timestamp ms) as Kafka answers `spec` for every partition."""
        request = {TopicPartition(topic, p): spec for p in self.partitions(topic)}
        answers: dict[int, tuple[int, int]] = {}
        with self._errors(what):
            futures = self._client.list_offsets(request, request_timeout=self._timeout_s)
            for tp, future in futures.items():
                info = future.result(timeout=self._timeout_s)
                answers[tp.partition] = (info.offset, info.timestamp)
        return answers

    def end_offsets(self, topic: str) -> dict[int, int]:
        found = self._list_offsets(topic, _LATEST, f"reading the end offsets of '{topic}'")
        return {p: offset for p, (offset, _) in found.items()}

    def earliest_offsets(self, topic: str) -> dict[int, int]:
        found = self._list_offsets(topic, _EARLIEST, f"reading the earliest offsets of '{topic}'")
        return {p: offset for p, (offset, _) in found.items()}

    def offsets_for_time(self, topic: str, at: datetime) -> dict[int, int | None]:
        ms = int(at.timestamp() * 1000)
        what = f"finding the offsets of '{topic}' at {at.isoformat()}"
        found = self._list_offsets(topic, OffsetSpec.for_timestamp(ms), what)
        return {p: (offset if offset >= 0 else None) for p, (offset, _) in found.items()}

    def earliest_timestamps(self, topic: str) -> dict[int, datetime | None]:
        # The first record at or after the epoch is the oldest retained one: its offset and timestamp.
        what = f"reading the oldest records of '{topic}'"
        found = self._list_offsets(topic, OffsetSpec.for_timestamp(0), what)
        return {
            p: (datetime.fromtimestamp(ms / 1000, UTC) if offset >= 0 and ms >= 0 else None)
            for p, (offset, ms) in found.items()
        }

    def alter_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        what = f"moving the offsets of '{group}' on '{topic}'"
        wanted = [TopicPartition(topic, p, offset) for p, offset in sorted(offsets.items())]
        request = ConsumerGroupTopicPartitions(group, wanted)
        with self._errors(what, group):
            future = self._client.alter_consumer_group_offsets([request], request_timeout=self._timeout_s)
            answer = future[group].result(timeout=self._timeout_s)
        self._check(list(answer.topic_partitions or []), what, group)
        log.info("consumer group offsets moved", group=group, topic=topic, offsets=dict(offsets))

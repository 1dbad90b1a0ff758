"""The wire contract of the consumer-group calls: `lag` and `rewind` (see `daemon.contract.models`).

    GET  /v1/groups/{group}/lag?topic=&sample_s=      -> LagOut
    POST /v1/groups/{group}/rewind  RewindBody         -> RewindOut (a preview unless preview=false)

Unknown is not zero here either: a partition without a committed offset has `committed` and `lag`
null, and is counted in `unknown_partitions`, never in `total_lag`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.grammar import USAGE, GrammarError, RewindCommand
from daemon.core.quantities import InvalidValue
from daemon.core.rewind import parse_target, target_label

GroupStateOut = Literal["stable", "rebalancing", "empty", "dead", "unknown"]


class TopicPartitionOut(BaseModel):
    topic: str
    partition: int


class GroupMemberOut(BaseModel):
    member_id: str
    client_id: str
    host: str
    assignment: list[TopicPartitionOut] = Field(default_factory=list)


class PartitionLagOut(BaseModel):
    topic: str
    partition: int
    committed: int | None = Field(description="the group's committed offset; null: never committed")
    end: int = Field(description="the log-end offset")
    lag: int | None = Field(description="end - committed; null when committed is unknown")


class DrainOut(BaseModel):
    seconds: float = Field(description="time between the two samples")
    consumed_per_s: float | None
    produced_per_s: float | None
    seconds_to_zero: float | None = Field(description="lag / (consumed - produced), when positive")
    state: Literal["caught_up", "draining", "not_draining", "unknown"]


class LagOut(BaseModel):
    group: str
    topic: str | None = Field(description="the topic asked about; null: every topic of the group")
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster the group was read on")
    state: GroupStateOut
    members: list[GroupMemberOut]
    partitions: list[PartitionLagOut] = Field(description="hottest first; unknown lag last")
    total_lag: int | None = Field(description="sum over the partitions with a committed offset")
    unknown_partitions: int
    hottest: PartitionLagOut | None
    drain: DrainOut | None = Field(description="from a second sample; null when only one was taken")


class RewindBody(BaseModel):
    """`/replay rewind <group> <topic> to=…`; `preview` (the default) moves nothing."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1, max_length=249)
    to: str = Field(min_length=1, max_length=64, examples=["2024-01-01T10:00", "earliest", "latest"])
    cluster: str | None = Field(
        default=None,
        max_length=32,
        description="the Kafka cluster; null: the topic's source's, else the default",
    )
    preview: bool = True

    @classmethod
    def of(cls, command: RewindCommand, *, preview: bool) -> RewindBody:
        return cls(topic=command.topic, to=target_label(command.to), cluster=command.cluster, preview=preview)

    def command(self, group: str) -> RewindCommand:
        """The command this body asks for, held to the grammar's rules (a bad field is a 400)."""
        try:
            to = parse_target(self.to)
        except InvalidValue as exc:
            raise GrammarError(exc.reason, token=f"to={self.to}", usage=USAGE["rewind"]) from None
        return RewindCommand(group=group, topic=self.topic, to=to, cluster=self.cluster)


class OffsetMoveOut(BaseModel):
    partition: int
    current: int | None = Field(description="committed now; null: never committed")
    new: int
    re_consumed: int | None = Field(description="current - new; negative: a move forward skips events")


class RewindOut(BaseModel):
    group: str
    topic: str
    cluster: str = Field(default=DEFAULT_CLUSTER, description="the Kafka cluster the offsets are on")
    to: str
    state: GroupStateOut
    active_members: int
    moves: list[OffsetMoveOut]
    re_consumed: int | None = Field(description="events consumed again, over partitions with an offset")
    unknown_partitions: int
    applied: bool = Field(description="this request moved the offsets")
    repeated: bool = Field(
        default=False, description="a retried apply: the first one's moves, nothing redone"
    )
    blocked: str | None = Field(default=None, description="why it cannot be applied now")

"""Consumer-group answers as wire models (`daemon.contract.groups`), built in one place."""

from __future__ import annotations

from daemon.contract.groups import (
    DrainOut,
    GroupMemberOut,
    LagOut,
    OffsetMoveOut,
    PartitionLagOut,
    RewindOut,
    TopicPartitionOut,
)
from daemon.core.lag import PartitionOffsets
from daemon.core.rewind import target_label
from daemon.usecases.consumer_groups import GroupLag, RewindOutcome
from daemon.usecases.ports import GroupDescription


def _partition(p: PartitionOffsets) -> PartitionLagOut:
    return PartitionLagOut(topic=p.topic, partition=p.partition, committed=p.committed, end=p.end, lag=p.lag)


def _members(description: GroupDescription) -> list[GroupMemberOut]:
    return [
        GroupMemberOut(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.host,
            assignment=[TopicPartitionOut(topic=t, partition=p) for t, p in m.assignment],
        )
        for m in description.members
    ]


def lag_out(found: GroupLag) -> LagOut:
    report, drain = found.report, found.report.drain
    return LagOut(
        group=found.description.group,
        topic=found.topic,
        cluster=found.cluster,
        state=found.description.state.value,
        members=_members(found.description),
        partitions=[_partition(p) for p in report.partitions],
        total_lag=report.total,
        unknown_partitions=report.unknown,
        hottest=_partition(report.hottest) if report.hottest is not None else None,
        drain=DrainOut(
            seconds=drain.seconds,
            consumed_per_s=drain.consumed_per_s,
            produced_per_s=drain.produced_per_s,
            seconds_to_zero=drain.seconds_to_zero,
            state=drain.state.value,
        )
        if drain is not None
        else None,
    )


def rewind_out(outcome: RewindOutcome) -> RewindOut:
    planned = outcome.preview
    return RewindOut(
        group=planned.group,
        topic=planned.topic,
        cluster=outcome.cluster,
        to=target_label(planned.to),
        state=outcome.description.state.value,
        active_members=len(outcome.description.members),
        moves=[
            OffsetMoveOut(partition=m.partition, current=m.current, new=m.new, re_consumed=m.re_consumed)
            for m in planned.moves
        ],
        re_consumed=planned.re_consumed,
        unknown_partitions=planned.unknown,
        applied=outcome.applied,
        repeated=outcome.repeated,
        blocked=outcome.blocked,
    )

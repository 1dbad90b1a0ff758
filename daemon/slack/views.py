"""What a message shows about a pipeline, built from the wire contract and nothing else.

A run needs no view: its messages read the wire's `RunOut` itself (`rows`, `duration_s` and
`duration_estimate_s` are its derived facts), so each fact of a run has one name from the store to
Slack. `PipelineView.of(PipelineOut)` is the one way from a pipeline's contract to a display.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from daemon.contract.models import PipelineOut
from daemon.core.clusters import DEFAULT_CLUSTER


@dataclass(frozen=True)
class PipelineView:
    """A pipeline as messages show it."""

    pipeline_id: str
    source: str
    schedule: str
    state: str
    watermark_column: str | None  # None: it follows the table's commits (incremental=snapshot)
    watermark: str | None
    tps: int
    topic: str
    owners: tuple[str, ...]
    next_run_at: datetime | None = None
    last_published_at: datetime | None = None
    created_at: datetime | None = None
    deprovision_reason: str | None = None
    cluster: str = DEFAULT_CLUSTER  # its topics' Kafka cluster

    @classmethod
    def of(cls, pipeline: PipelineOut) -> PipelineView:
        return cls(
            pipeline_id=pipeline.id,
            source=pipeline.source,
            schedule=pipeline.schedule,
            state=str(pipeline.state),
            watermark_column=pipeline.watermark_column,
            watermark=pipeline.watermark,
            tps=pipeline.tps,
            topic=pipeline.topic,
            owners=tuple(pipeline.owners),
            next_run_at=pipeline.next_run_at,
            last_published_at=pipeline.last_published_at,
            created_at=pipeline.created_at,
            deprovision_reason=pipeline.deprovision_reason,
            cluster=pipeline.cluster,
        )

"""A run's consumer-group watch (``daemon.core.drain``, stored on the run) as the wire contract."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.contract.models import GroupDrainOut
from daemon.core.drain import groups_from
from store.models import Run


def _moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def drain_out(run: Run) -> list[GroupDrainOut]:
    """Each watched group; `caught_up_after_s` counts from the run's last event (its end without one)."""
    last_event = run.last_delivery_at or run.ended_at
    out = []
    for watched in groups_from(run.watch):
        after = None
        if watched.caught_up_at is not None and last_event is not None:
            after = max(0.0, watched.caught_up_at - last_event.timestamp())
        out.append(
            GroupDrainOut(
                group=watched.group,
                state=watched.state,
                baseline=watched.baseline,
                lag=watched.lag,
                last_at=_moment(watched.last_at),
                drain_per_s=watched.drain_per_s,
                seconds_to_baseline=watched.seconds_to_baseline,
                caught_up_at=_moment(watched.caught_up_at),
                caught_up_after_s=after,
                note=watched.note,
            )
        )
    return out


def drain_deadline(run: Run) -> datetime | None:
    deadline = (run.watch or {}).get("deadline")
    return _moment(float(deadline)) if deadline is not None else None

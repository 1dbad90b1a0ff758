"""When a stored schedule fires: APScheduler's triggers, so every daemon agrees on the slots.

The core validates schedules (``daemon.core.schedules.check_schedule``) without any library; the
times themselves come from the same triggers the scheduler loop fires on, so the `next_run_at` a
pipeline row records is always a slot that loop will hit. Intervals are anchored at the epoch (UTC),
so they do not drift with restarts.
"""

from __future__ import annotations

from datetime import UTC, datetime

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from daemon.core.errors import BadRequest
from daemon.core.quantities import MINUTE, parse_duration
from daemon.core.schedules import check_schedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trigger_for(schedule: str) -> BaseTrigger:
    """The APScheduler trigger of a stored schedule (refused with the core's reason if invalid)."""
    check_schedule(schedule)
    kind, _, value = schedule.partition("=")
    if kind == "every":
        return IntervalTrigger(seconds=parse_duration(value, minimum=MINUTE), start_date=EPOCH, timezone=UTC)
    try:
        return CronTrigger.from_crontab(value, timezone=UTC)
    except ValueError as exc:  # the core's check and APScheduler agree (tested); kept as a safety net
        raise BadRequest(f'cron="{value}" is not a valid schedule: {exc}') from None


def next_fire(schedule: str, after: datetime) -> datetime:
    """The first fire time strictly after `after`: missed slots collapse into the next one."""
    trigger = trigger_for(schedule)
    fire: datetime | None = trigger.get_next_fire_time(None, after)
    while fire is not None and fire <= after:
        fire = trigger.get_next_fire_time(fire, fire)
    if fire is None:
        raise BadRequest(f"schedule '{schedule}' never fires again")
    return fire.astimezone(UTC)

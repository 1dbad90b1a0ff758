"""Schedules as text (`every=15m`, `cron=*/15 * * * *`) and their next fire times.

The text form is what the pipeline row stores and what `/replay pipeline` shows; APScheduler's
triggers compute the times, so every daemon, after any restart, agrees on when a slot is due.
"""

from __future__ import annotations

from datetime import UTC, datetime

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from daemon.core.errors import BadRequest
from daemon.core.quantities import parse_duration, render_duration

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def schedule_text(*, every_seconds: int | None, cron: str | None) -> str:
    if (every_seconds is None) == (cron is None):
        raise BadRequest('give exactly one of every=<duration> or cron="<5 fields>"')
    if every_seconds is not None:
        if every_seconds < 60:
            raise BadRequest(f"every={every_seconds}s is too often; the shortest schedule is every=1m")
        return f"every={render_duration(every_seconds)}"
    return f"cron={cron}"


def trigger_for(schedule: str) -> BaseTrigger:
    """The APScheduler trigger of a stored schedule; intervals are anchored at the epoch (UTC)."""
    kind, _, value = schedule.partition("=")
    if kind == "every":
        return IntervalTrigger(seconds=parse_duration(value, minimum=60), start_date=EPOCH, timezone=UTC)
    if kind == "cron":
        try:
            return CronTrigger.from_crontab(value, timezone=UTC)
        except ValueError as exc:
            raise BadRequest(f'cron="{value}" is not a valid schedule: {exc}') from None
    raise BadRequest(f"unknown schedule '{schedule}'")


def next_fire(schedule: str, after: datetime) -> datetime:
    """The first fire time strictly after `after`: missed slots collapse into the next one."""
    trigger = trigger_for(schedule)
    fire = trigger.get_next_fire_time(None, after)
    while fire is not None and fire <= after:
        fire = trigger.get_next_fire_time(fire, fire)
    if fire is None:
        raise BadRequest(f"schedule '{schedule}' never fires again")
    return fire.astimezone(UTC)

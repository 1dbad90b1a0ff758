"""Schedules as text (`every=15m`, `cron=*/15 * * * *`): what a pipeline row stores and shows.

The text form is what the pipeline row stores and what `/replay pipeline` shows. The core only
builds and validates it; the fire times are computed outside the core, by the scheduler library
(see ``daemon.usecases.fire_times``), which accepts every schedule ``check_schedule`` lets through.
"""

from __future__ import annotations

from daemon.core.cron import check_cron
from daemon.core.errors import BadRequest
from daemon.core.quantities import MINUTE, InvalidValue, parse_duration, render_duration


def schedule_text(*, every_seconds: int | None, cron: str | None) -> str:
    if (every_seconds is None) == (cron is None):
        raise BadRequest('give exactly one of every=<duration> or cron="<5 fields>"')
    if every_seconds is not None:
        if every_seconds < MINUTE:
            raise BadRequest(f"every={every_seconds}s is too often; the shortest schedule is every=1m")
        return f"every={render_duration(every_seconds)}"
    return f"cron={cron}"


def check_schedule(schedule: str) -> None:
    """Refuse a stored schedule the daemon could not fire, with a reason a person can act on."""
    kind, _, value = schedule.partition("=")
    if kind == "every":
        parse_duration(value, minimum=MINUTE)
    elif kind == "cron":
        try:
            check_cron(value)
        except InvalidValue as exc:
            raise BadRequest(f'cron="{value}" is not a valid schedule: {exc.reason}') from None
    else:
        raise BadRequest(f"unknown schedule '{schedule}'")

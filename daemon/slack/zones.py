"""Times in the reader's zone with UTC beside them: `10:00 CET (09:00 UTC)`.

People at 3 a.m. think in their own clock; schedules, windows and logs are UTC. Showing both avoids a
conversion in a tired head and keeps the UTC figure to paste. A zone nobody knows (users.info gave
none, or a CLI user) shows UTC only, as does a zone at UTC+0 (the second figure would repeat the first).
Windows are never shown here: they stay UTC, as typed. Pure: a datetime and a zone in, text out.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone_named(name: object) -> tzinfo | None:
    """The IANA zone Slack reports as a user's `tz` (`Europe/Paris`); None when absent or unknown."""
    if not isinstance(name, str) or not name.strip():
        return None
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: a malformed key such as "../x"
        return None


def _local(moment: datetime, zone: tzinfo | None) -> datetime | None:
    """`moment` in `zone`, or None when that would only repeat UTC."""
    if zone is None:
        return None
    local = moment.astimezone(zone)
    offset = local.utcoffset()
    return None if offset is None or not offset else local


def clock_time(moment: datetime, zone: tzinfo | None, *, seconds: bool = False) -> str:
    """`10:00 CET (09:00 UTC)`, or `09:00 UTC` when the zone is unknown; to the second if asked."""
    pattern = "%H:%M:%S" if seconds else "%H:%M"
    utc = moment.astimezone(UTC)
    local = _local(moment, zone)
    if local is None:
        return f"{utc:{pattern}} UTC"
    day = "" if local.date() == utc.date() else f"{local:%a} "  # past midnight in one of the two
    return f"{day}{local:{pattern}} {local:%Z} ({utc:{pattern}} UTC)"


def date_time(moment: datetime, zone: tzinfo | None) -> str:
    """`2024-05-01 11:00 CEST (09:00 UTC)`: a day and a time, the UTC date added when it differs."""
    utc = moment.astimezone(UTC)
    local = _local(moment, zone)
    if local is None:
        return f"{utc:%Y-%m-%d %H:%M} UTC"
    utc_shown = f"{utc:%H:%M}" if local.date() == utc.date() else f"{utc:%Y-%m-%d %H:%M}"
    return f"{local:%Y-%m-%d %H:%M} {local:%Z} ({utc_shown} UTC)"

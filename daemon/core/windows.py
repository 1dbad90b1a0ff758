"""Replay windows: which slice of event time a replay reads, in UTC unless a zone is written.

Users write four shapes (inclusive days, half-open timestamps, ``last=6h``, ``today``/``yesterday``),
so there are four types; ``resolve`` pins the relative ones to a ``now`` the caller passes in, keeping
this module pure. A zone (``tz=Europe/Paris``) only changes how days and naive times are read: days
stay dates until ``resolve`` turns them into that zone's midnights, times are converted to UTC when
parsed. Every window validates itself on construction, so a window that exists is one the daemon can run.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from functools import cache
from typing import TypeAlias
from zoneinfo import ZoneInfo, available_timezones

from daemon.core.quantities import DAY, InvalidValue, parse_duration, render_duration

EPOCH = date(1970, 1, 1)
MAX_DAYS = 3_660
# bounds() needs the midnight after the last day to exist in datetime's range.
LAST_DAY = date(9999, 12, 30)
_EPOCH_START = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_SPAN = timedelta(days=MAX_DAYS)
_SHAPES = "2024-01-01..2024-01-07, 2024-01-01T10:00..2024-01-01T12:30, last=6h, today or yesterday"
DAY_WORDS = {"today": 0, "yesterday": 1}  # word -> days before the day the run is created

_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_STAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?"
    r"(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2}))?"
)


@dataclass(frozen=True)
class DayWindow:
    """Whole UTC days, both ends inclusive: what a person means by ``2024-01-01..2024-01-07``."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if isinstance(self.start, datetime) or isinstance(self.end, datetime):
            raise TypeError("DayWindow takes dates, not datetimes (use TimeWindow)")
        if self.end < self.start:
            raise InvalidValue(None, "window ends before it starts")
        if self.start < EPOCH:
            raise InvalidValue(None, "window starts before 1970")
        if self.end > LAST_DAY:
            raise InvalidValue(None, f"window ends after {LAST_DAY.isoformat()}")
        if (self.end - self.start).days + 1 > MAX_DAYS:
            raise InvalidValue(None, f"window is longer than {MAX_DAYS} days")


@dataclass(frozen=True)
class TimeWindow:
    """A half-open UTC interval ``[start, end)``; aware datetimes in any zone are converted to UTC."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise TypeError(f"TimeWindow.{name} must be a timezone-aware datetime")
            try:
                object.__setattr__(self, name, value.astimezone(UTC))
            except OverflowError:
                raise InvalidValue(None, "time is out of range") from None
        if self.end <= self.start:
            raise InvalidValue(None, "window ends before it starts")
        if self.start < _EPOCH_START:
            raise InvalidValue(None, "window starts before 1970")
        if self.end - self.start > _MAX_SPAN:
            raise InvalidValue(None, f"window is longer than {MAX_DAYS} days")


@dataclass(frozen=True)
class RelativeWindow:
    """The last ``seconds`` before the moment the run is created (``last=6h``)."""

    seconds: int

    def __post_init__(self) -> None:
        if not 1 <= self.seconds <= MAX_DAYS * DAY:
            raise InvalidValue(None, f"a relative window is between 1s and {MAX_DAYS}d")


@dataclass(frozen=True)
class RecentDayWindow:
    """``today`` (0) or ``yesterday`` (1): a whole day, counted back from when the run is created."""

    days_ago: int

    def __post_init__(self) -> None:
        if self.days_ago not in DAY_WORDS.values():
            raise InvalidValue(None, f"days_ago must be one of {sorted(DAY_WORDS.values())}")


Window: TypeAlias = DayWindow | TimeWindow | RelativeWindow | RecentDayWindow
FixedWindow: TypeAlias = DayWindow | TimeWindow


@cache
def _zone_names() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()} | {"utc": "UTC"}


def parse_zone(name: str) -> str:
    """The IANA name of a zone as the tz database spells it (``europe/paris`` -> ``Europe/Paris``)."""
    known = _zone_names()
    if (key := known.get(name.lower())) is not None:
        return key
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.8)
    hint = f"; did you mean {known[close[0]]}?" if close else ""
    raise InvalidValue(name, f"unknown time zone '{name}' (an IANA name such as Europe/Paris or UTC{hint})")


def zone_of(tz: str | None) -> tzinfo:
    """The zone a window is read in: UTC unless one is written."""
    return UTC if tz is None else ZoneInfo(parse_zone(tz))


def is_point(text: str) -> bool:
    """Whether ``text`` is written like one end of a window (a day or a time), real or not."""
    return bool(_DAY.fullmatch(text) or _STAMP.fullmatch(text))


def _point(part: str, zone: tzinfo = UTC) -> date | datetime:
    """One end of a window: a day, or an instant converted to UTC (naive means ``zone``)."""
    if day := _DAY.fullmatch(part):
        try:
            return date(int(day[1]), int(day[2]), int(day[3]))
        except ValueError as exc:
            raise InvalidValue(None, f"'{part}' is not a real date ({exc})") from None
    stamp = _STAMP.fullmatch(part)
    if stamp is None:
        raise InvalidValue(None, f"'{part}' is not a date (YYYY-MM-DD) or a time (YYYY-MM-DDTHH:MM)")
    if stamp[8]:
        zone = UTC
    if stamp[9]:
        hours, minutes = int(stamp[10]), int(stamp[11])
        if hours > 23 or minutes > 59:
            raise InvalidValue(None, f"'{part}' has an impossible UTC offset")
        sign = -1 if stamp[9] == "-" else 1
        zone = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        day_part = date(int(stamp[1]), int(stamp[2]), int(stamp[3]))
        time_part = time(
            int(stamp[4]), int(stamp[5]), int(stamp[6] or 0), int((stamp[7] or "").ljust(6, "0"))
        )
    except ValueError as exc:
        raise InvalidValue(None, f"'{part}' is not a real date and time ({exc})") from None
    try:
        return datetime.combine(day_part, time_part, zone).astimezone(UTC)
    except OverflowError:
        raise InvalidValue(None, f"'{part}' is out of range") from None


def _parse_window(text: str, zone: tzinfo) -> Window:
    if text == "":
        raise InvalidValue(None, f"no window given (use {_SHAPES})")
    if text[:5].lower() == "last=":
        return RelativeWindow(parse_duration(text[5:], minimum=1, maximum=MAX_DAYS * DAY))
    if text.lower() in DAY_WORDS:
        return RecentDayWindow(DAY_WORDS[text.lower()])
    if ".." not in text:
        if not is_point(text):
            raise InvalidValue(None, f"not a window (use {_SHAPES})")
        point = _point(text, zone)
        if isinstance(point, datetime):
            raise InvalidValue(None, "a single time is not a window; give an end too (start..end)")
        return DayWindow(point, point)
    left, _, right = text.partition("..")
    if not left or not right:
        raise InvalidValue(None, "give both ends of the window (start..end)")
    start, end = _point(left, zone), _point(right, zone)
    if isinstance(start, datetime) and isinstance(end, datetime):
        return TimeWindow(start, end)
    if isinstance(start, datetime) or isinstance(end, datetime):
        raise InvalidValue(None, "mixes a day and a time; give both ends as days or both as times")
    return DayWindow(start, end)


def parse_window(text: str, tz: str | None = None) -> Window:
    """Parse one window token, naive times read in ``tz`` (UTC when None); errors carry the token."""
    try:
        return _parse_window(text, zone_of(tz))
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None


def parse_instant(text: str) -> datetime:
    """One instant, as a window end is written: a day means its midnight UTC; a naive time is UTC."""
    try:
        point = _point(text)
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None
    moment = point if isinstance(point, datetime) else datetime.combine(point, time(), UTC)
    if moment < _EPOCH_START:
        raise InvalidValue(text, f"'{text}' is before 1970")
    return moment


def instant_label(moment: datetime) -> str:
    """Canonical text of an instant (UTC, no suffix); ``parse_instant(instant_label(m)) == m``."""
    return _stamp(moment.astimezone(UTC))


def in_zone(window: DayWindow, tz: str | None) -> FixedWindow:
    """Days read in a zone: from its midnight before the first day to its midnight after the last."""
    if tz is None:
        return window
    zone = zone_of(tz)
    try:
        start = datetime.combine(window.start, time(), zone)
        end = datetime.combine(window.end + timedelta(days=1), time(), zone)
    except OverflowError:
        raise InvalidValue(None, "window is out of range") from None
    return TimeWindow(start, end)


def resolve(window: Window, now: datetime, tz: str | None = None) -> FixedWindow:
    """Pin a relative window to ``now`` (aware; the caller owns the clock) and read days in ``tz``."""
    if now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
    if isinstance(window, RelativeWindow):
        end = now.astimezone(UTC)
        return TimeWindow(end - timedelta(seconds=window.seconds), end)
    if isinstance(window, RecentDayWindow):
        day = now.astimezone(zone_of(tz)).date() - timedelta(days=window.days_ago)
        return in_zone(DayWindow(day, day), tz)
    if isinstance(window, DayWindow):
        return in_zone(window, tz)
    return window


def bounds(window: FixedWindow) -> tuple[datetime, datetime]:
    """``[start, end)`` in UTC: the event-time filter the replay applies."""
    if isinstance(window, DayWindow):
        start = datetime.combine(window.start, time(), UTC)
        return start, datetime.combine(window.end + timedelta(days=1), time(), UTC)
    if isinstance(window, TimeWindow):
        return window.start, window.end
    raise TypeError("resolve() a RelativeWindow before asking for its bounds")


def days(window: FixedWindow) -> list[date]:
    """Every UTC day the window touches: the partitions to read (and to show in a plan)."""
    if isinstance(window, DayWindow):
        first, last = window.start, window.end
    elif isinstance(window, TimeWindow):
        first, last = window.start.date(), (window.end - timedelta(microseconds=1)).date()
    else:
        raise TypeError("resolve() a RelativeWindow before asking for its days")
    return [first + timedelta(days=offset) for offset in range((last - first).days + 1)]


def _stamp(moment: datetime) -> str:
    text = f"{moment.date().isoformat()}T{moment.hour:02d}:{moment.minute:02d}"
    if moment.second or moment.microsecond:
        text += f":{moment.second:02d}"
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text


def _local_stamp(moment: datetime, tz: str | None) -> str:
    """An instant as the zone's wall clock, or in UTC with ``Z`` where that clock is ambiguous."""
    if tz is None:
        return _stamp(moment)
    zone = zone_of(tz)
    try:
        shown = _stamp(moment.astimezone(zone))
        if _point(shown, zone) == moment:
            return shown
    except (OverflowError, InvalidValue):  # past the calendar's end in that zone
        pass
    return _stamp(moment.astimezone(UTC)) + "Z"


def label(window: Window, tz: str | None = None) -> str:
    """Canonical text of a window, times in ``tz`` (else UTC): ``parse_window(label(w, tz), tz) == w``."""
    if isinstance(window, DayWindow):
        if window.start == window.end:
            return window.start.isoformat()
        return f"{window.start.isoformat()}..{window.end.isoformat()}"
    if isinstance(window, TimeWindow):
        return f"{_local_stamp(window.start, tz)}..{_local_stamp(window.end, tz)}"
    if isinstance(window, RecentDayWindow):
        return next(word for word, ago in DAY_WORDS.items() if ago == window.days_ago)
    return f"last={render_duration(window.seconds)}"


def overlaps(first: tuple[datetime, datetime], second: tuple[datetime, datetime]) -> bool:
    """Whether two half-open ``[start, end)`` intervals share an instant (touching ends do not)."""
    return first[0] < second[1] and second[0] < first[1]

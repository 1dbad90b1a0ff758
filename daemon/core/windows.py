"""Replay windows: which slice of event time a replay reads, always in UTC.

Users write three shapes (inclusive days, half-open timestamps, ``last=6h``), so there are three
types; ``resolve`` pins the relative one to a ``now`` the caller passes in, keeping this module pure.
Every window validates itself on construction, so a window that exists is one the daemon can run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import TypeAlias

from daemon.core.quantities import DAY, InvalidValue, parse_duration, render_duration

EPOCH = date(1970, 1, 1)
MAX_DAYS = 3_660
# bounds() needs the midnight after the last day to exist in datetime's range.
LAST_DAY = date(9999, 12, 30)
_EPOCH_START = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_SPAN = timedelta(days=MAX_DAYS)
_SHAPES = "2024-01-01..2024-01-07, 2024-01-01T10:00..2024-01-01T12:30 or last=6h"

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


Window: TypeAlias = DayWindow | TimeWindow | RelativeWindow
FixedWindow: TypeAlias = DayWindow | TimeWindow


def _point(part: str) -> date | datetime:
    """One end of a window: a day, or an instant converted to UTC (naive means UTC)."""
    if day := _DAY.fullmatch(part):
        try:
            return date(int(day[1]), int(day[2]), int(day[3]))
        except ValueError as exc:
            raise InvalidValue(None, f"'{part}' is not a real date ({exc})") from None
    stamp = _STAMP.fullmatch(part)
    if stamp is None:
        raise InvalidValue(None, f"'{part}' is not a date (YYYY-MM-DD) or a time (YYYY-MM-DDTHH:MM)")
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


def _parse_window(text: str) -> Window:
    if text == "":
        raise InvalidValue(None, f"no window given (use {_SHAPES})")
    if text[:5].lower() == "last=":
        return RelativeWindow(parse_duration(text[5:], minimum=1, maximum=MAX_DAYS * DAY))
    if ".." not in text:
        if not (_DAY.fullmatch(text) or _STAMP.fullmatch(text)):
            raise InvalidValue(None, f"not a window (use {_SHAPES})")
        point = _point(text)
        if isinstance(point, datetime):
            raise InvalidValue(None, "a single time is not a window; give an end too (start..end)")
        return DayWindow(point, point)
    left, _, right = text.partition("..")
    if not left or not right:
        raise InvalidValue(None, "give both ends of the window (start..end)")
    start, end = _point(left), _point(right)
    if isinstance(start, datetime) and isinstance(end, datetime):
        return TimeWindow(start, end)
    if isinstance(start, datetime) or isinstance(end, datetime):
        raise InvalidValue(None, "mixes a day and a time; give both ends as days or both as times")
    return DayWindow(start, end)


def parse_window(text: str) -> Window:
    """Parse one window token; errors carry the whole token so the user sees what was wrong."""
    try:
        return _parse_window(text)
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


def resolve(window: Window, now: datetime) -> FixedWindow:
    """Pin a relative window to ``now`` (aware; the caller owns the clock); fixed windows pass through."""
    if now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
    if isinstance(window, RelativeWindow):
        end = now.astimezone(UTC)
        return TimeWindow(end - timedelta(seconds=window.seconds), end)
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


def label(window: Window) -> str:
    """Canonical text of a window (times in UTC, no suffix); ``parse_window(label(w)) == w``."""
    if isinstance(window, DayWindow):
        if window.start == window.end:
            return window.start.isoformat()
        return f"{window.start.isoformat()}..{window.end.isoformat()}"
    if isinstance(window, TimeWindow):
        return f"{_stamp(window.start)}..{_stamp(window.end)}"
    return f"last={render_duration(window.seconds)}"


def overlaps(first: tuple[datetime, datetime], second: tuple[datetime, datetime]) -> bool:
    """Whether two half-open ``[start, end)`` intervals share an instant (touching ends do not)."""
    return first[0] < second[1] and second[0] < first[1]

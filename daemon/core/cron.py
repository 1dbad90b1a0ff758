"""Cron expressions (``*/15 * * * *``): the five-field language pipelines are scheduled with.

Two checks in one place. ``parse_cron`` is the grammar's light, lexical check (five fields of
digits, ``* / , -`` and names) that the bot and CLI run before anything is sent. ``check_cron`` is
the full check the daemon runs before a pipeline exists: every field, range, step and name. It
accepts exactly what the scheduler that computes fire times (APScheduler 3's
``CronTrigger.from_crontab``) accepts, so a pipeline the core lets through always gets a trigger.
That includes APScheduler's readings: weekdays are 0-6 from Monday, and in the month and weekday
fields a name is read up to its last letter (``jan5`` is ``jan``), which the tests pin down.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from daemon.core.quantities import InvalidValue

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

_FIELD = re.compile(r"[0-9*/,A-Za-z-]+")
_NAME = re.compile(r"[A-Za-z]+")
_ALL = re.compile(r"\*(?:/([0-9]+))?")
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?(?:/([0-9]+))?")
# Anchored at the start only, as APScheduler matches it: what follows the names is ignored.
_NAMED_RANGE = re.compile(r"([A-Za-z]+)(?:-([A-Za-z]+))?")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names standing for low, low + 1, ...


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day", 1, 31),
    _Field("month", 1, 12, MONTHS),
    _Field("weekday", 0, 6, WEEKDAYS),
)


def parse_cron(text: str) -> str:
    """Light check (five fields of digits, ``* / , -`` and names); ``check_cron`` validates fully."""
    fields = [field for field in text.split(" ") if field]
    if len(fields) != len(_FIELDS):
        raise InvalidValue(
            text, f"a cron expression has 5 fields (minute hour day month weekday), got {len(fields)}"
        )
    known = {*MONTHS, *WEEKDAYS}
    for field in fields:
        if not _FIELD.fullmatch(field):
            raise InvalidValue(
                text, f"cron field '{field}' may only use digits, '*', '/', ',', '-' and names"
            )
        for name in _NAME.findall(field):
            if name.lower() not in known:
                raise InvalidValue(text, f"cron field '{field}' has an unknown name '{name}'")
    return " ".join(fields)


def check_cron(text: str) -> str:
    """The expression with single spaces if every field is valid; else ``InvalidValue`` saying why."""
    canonical = parse_cron(text)
    for field, value in zip(_FIELDS, canonical.split(" "), strict=True):
        for entry in value.split(","):
            reason = _entry_problem(field, entry)
            if reason is not None:
                raise InvalidValue(text, f"{field.name} field: {reason}")
    return canonical


def _number(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # more digits than Python converts: no field goes that high anyway
        return None


def _entry_problem(field: _Field, entry: str) -> str | None:
    """Why one comma-separated entry of a field is not valid, or None if it is."""
    if not entry:
        return "an empty entry (a stray comma?)"
    if (every := _ALL.fullmatch(entry)) is not None:
        return _step_problem(entry, every[1], field.high - field.low)
    if (numbers := _RANGE.fullmatch(entry)) is not None:
        return _range_problem(field, entry, *numbers.groups())
    if field.names and (named := _NAMED_RANGE.match(entry)) is not None:
        return _named_problem(field, entry, named[1], named[2])
    kinds = "a number, a range, a step or a name" if field.names else "a number, a range or a step"
    return f"'{entry}' is not {kinds} (e.g. *, */15, 5, 1-5, 0-30/10)"


def _step_problem(entry: str, step_digits: str | None, span: int) -> str | None:
    if step_digits is None:
        return None
    step = _number(step_digits)
    if step == 0:
        return f"'{entry}': a step must be at least 1"
    if step is None or step > span:
        return f"'{entry}': the step is larger than the span it steps through ({span})"
    return None


def _range_problem(
    field: _Field, entry: str, first_digits: str, last_digits: str | None, step_digits: str | None
) -> str | None:
    first = _number(first_digits)
    last = _number(last_digits) if last_digits is not None else (first if step_digits is None else None)
    if step_digits is not None and _number(step_digits) == 0:
        return f"'{entry}': a step must be at least 1"
    if first is None or (last_digits is not None and last is None):
        return f"'{entry}': {field.name} must be between {field.low} and {field.high}"
    if last is not None and first > last:
        return f"'{entry}': the range runs backwards"
    if first < field.low or (last is not None and last > field.high):
        return f"'{entry}': {field.name} must be between {field.low} and {field.high}"
    # APScheduler's reading: a range ending at 0 (``0-0/5``) spans up to the field's maximum.
    return _step_problem(entry, step_digits, (last or field.high) - first)


def _named_problem(field: _Field, entry: str, first: str, last: str | None) -> str | None:
    positions: list[int] = []
    for name in (first, last):
        if name is None:
            continue
        if name.lower() not in field.names:
            return f"'{name}' is not a {field.name} name ({', '.join(field.names)})"
        positions.append(field.names.index(name.lower()))
    if len(positions) == 2 and positions[0] > positions[1]:
        return f"'{entry}': the range runs backwards"
    return None

"""Counts and durations as people type them in Slack: ``10k``, ``1.5m``, ``1_000``, ``15m``, ``2d``.

Parsing uses integer arithmetic only (never floats), so ``1.2345k`` is refused instead of silently
rounded, and every refusal carries a reason a person can act on. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re

from daemon.core.errors import BadRequest

# Longer than any sensible number; also keeps int() far from Python's digit limit.
MAX_TEXT = 40
MINUTE, HOUR, DAY, WEEK = 60, 3_600, 86_400, 604_800
# A window or schedule period longer than ~10 years is a typo, not a request.
MAX_DURATION_SECONDS = 3_660 * DAY

_NUMBER = r"([0-9]+(?:_[0-9]+)*)(?:\.([0-9]+))?"
_COUNT = re.compile(_NUMBER + r"([kmb]?)", re.IGNORECASE)
_DURATION = re.compile(_NUMBER + r"([a-z]*)", re.IGNORECASE)
_COMPOUND = re.compile(r"(?:[0-9]+[wdhms])+", re.IGNORECASE)  # 1h30m, 2d12h: whole numbers, units
_COMPOUND_PART = re.compile(r"([0-9]+)([wdhms])", re.IGNORECASE)
_EXPONENT = re.compile(r"[0-9._]*[0-9][eE][+-]?[0-9]+")
_COUNT_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "b": 1_000_000_000}
_UNITS = {"s": 1, "m": MINUTE, "h": HOUR, "d": DAY, "w": WEEK}
_RENDER_UNITS = (("w", WEEK), ("d", DAY), ("h", HOUR), ("m", MINUTE))


class InvalidValue(BadRequest):
    """One value that cannot be used; the grammar re-raises it naming the whole option token."""

    def __init__(self, token: str | None, reason: str) -> None:
        super().__init__(f"`{token}`: {reason}" if token is not None else reason)
        self.token, self.reason = token, reason


def _exact(whole: str, fraction: str | None, scale: int) -> int | None:
    """``whole.fraction * scale`` if it is an integer, else None (no float rounding anywhere)."""
    digits = whole.replace("_", "") + (fraction or "")
    denominator = 10 ** len(fraction or "")
    numerator = int(digits) * scale
    return numerator // denominator if numerator % denominator == 0 else None


def parse_count(text: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """``10000``, ``10k``, ``1.5m``, ``2M``, ``1_000`` -> int; each kind of mistake gets its own reason."""
    if text == "":
        raise InvalidValue(text, "no value given")
    if len(text) > MAX_TEXT:
        raise InvalidValue(text, "too long to be a number")
    if text.startswith("-") and _COUNT.fullmatch(text[1:]):
        raise InvalidValue(text, "must not be negative")
    if _EXPONENT.fullmatch(text):
        raise InvalidValue(text, "scientific notation is not supported (write e.g. 10000 or 10k)")
    if "," in text and _COUNT.fullmatch(text.replace(",", "")):
        raise InvalidValue(text, "no thousands separators (write 10000, 10_000 or 10k)")
    match = _COUNT.fullmatch(text)
    if match is None:
        raise InvalidValue(text, f"'{text}' is not a number (e.g. 10000, 10k, 1.5m)")
    value = _exact(match[1], match[2], _COUNT_SCALE[match[3].lower()])
    if value is None:
        raise InvalidValue(text, f"'{text}' is not a whole number")
    if value < minimum:
        raise InvalidValue(text, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidValue(text, f"must be at most {maximum}")
    return value


def render_count(value: int) -> str:
    """Canonical form of a count: a plain integer, so logs and echoes never need decoding."""
    if value < 0:
        raise ValueError(f"counts are never negative, got {value}")
    return str(value)


def _compound(text: str) -> int | None:
    """``1h30m`` -> 5400 when units go from largest to smallest, each once; None when not compound."""
    parts = _COMPOUND_PART.findall(text) if _COMPOUND.fullmatch(text) else []
    if len(parts) < 2:
        return None
    sizes = [_UNITS[unit.lower()] for _, unit in parts]
    if sizes != sorted(set(sizes), reverse=True):
        raise InvalidValue(text, f"'{text}': give each unit once, largest first (e.g. 1h30m, 2d12h)")
    return sum(int(number) * size for (number, _), size in zip(parts, sizes, strict=True))


def parse_duration(text: str, *, minimum: int = 0, maximum: int = MAX_DURATION_SECONDS) -> int:
    """``90s``, ``15m``, ``1h``, ``2d``, ``1w``, ``1h30m`` (or a bare ``0``) -> whole seconds."""
    if text == "":
        raise InvalidValue(text, "no value given")
    if len(text) > MAX_TEXT:
        raise InvalidValue(text, "too long to be a duration")
    if (seconds := _compound(text)) is not None:
        return _bounded(text, seconds, minimum, maximum)
    if text.startswith("-") and _DURATION.fullmatch(text[1:]):
        raise InvalidValue(text, "durations cannot be negative")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidValue(text, f"'{text}' is not a duration (e.g. 90s, 15m, 1h, 2d, 1w)")
    unit = match[3].lower()
    if unit == "" and _exact(match[1], match[2], 1) != 0:
        raise InvalidValue(text, f"'{text}' needs a unit: s, m, h, d or w (e.g. 15m)")
    if unit not in _UNITS and unit != "":
        raise InvalidValue(text, f"unknown unit '{match[3]}' (use s, m, h, d or w)")
    exact = _exact(match[1], match[2], _UNITS.get(unit, 1))
    if exact is None:
        raise InvalidValue(text, f"'{text}' is not a whole number of seconds")
    return _bounded(text, exact, minimum, maximum)


def _bounded(text: str, seconds: int, minimum: int, maximum: int) -> int:
    if seconds < minimum:
        raise InvalidValue(text, f"must be at least {render_duration(minimum)}")
    if seconds > maximum:
        raise InvalidValue(text, f"must be at most {render_duration(maximum)}")
    return seconds


def render_duration(seconds: int) -> str:
    """Shortest exact spelling (``5400`` -> ``90m``) that ``parse_duration`` reads back unchanged."""
    if seconds < 0:
        raise ValueError(f"durations are never negative, got {seconds}")
    for unit, size in _RENDER_UNITS:
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render_place(position: int) -> str:
    """A place in the launch queue as people say it: ``1st in line``, ``2nd in line``, ``11th in line``."""
    if position < 1:
        raise ValueError(f"places in line start at 1, got {position}")
    suffix = "th" if position % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(position % 10, "th")
    return f"{position}{suffix} in line"


# Sizing a topic with no live twin: one partition per this many bytes/s of target throughput.
BYTES_PER_PARTITION_PER_S = 5 * 1024 * 1024
MAX_AUTO_PARTITIONS = 64


def partitions_for_rate(tps: int, record_bytes: int) -> int:
    """Partitions for a new topic with no live topic to copy: enough for the byte rate, at least 1."""
    if tps <= 0:
        return 1
    return max(1, min(MAX_AUTO_PARTITIONS, math.ceil(tps * max(record_bytes, 1) / BYTES_PER_PARTITION_PER_S)))

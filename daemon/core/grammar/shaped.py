"""``tps=original speed=10x max=5000``: a replay that keeps the original traffic's shape, faster.

Every event goes at its own event time, scaled by ``speed`` (``1x`` the real pace, ``10x`` ten times
faster, ``0.5x`` half); ``max=`` is a hard ceiling per second (the daemon's default rate when left
out), above which events slide later, first in first out (``spark_job.publish.time_shape``).
``speed=`` goes with ``tps=original`` only; ``lag<`` and ``group=`` belong to ``tps=auto``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.core.grammar.values import GrammarError, blaming
from daemon.core.quantities import InvalidValue, parse_count

MIN_SPEED = 0.01
MAX_SPEED = 100_000.0
_SPEED = re.compile(r"(\d+(?:\.\d{1,2})?)x?", re.IGNORECASE)


@dataclass(frozen=True)
class Original:
    speed: float
    ceiling: int | None  # max=; None: the daemon's default rate


def parse_speed(text: str) -> float:
    """``10x``, ``0.5x``, ``2.25`` -> the factor; at most two decimals, so it reads back unchanged."""
    match = _SPEED.fullmatch(text)
    if match is None:
        raise InvalidValue(text, f"'{text}' is not a speed (e.g. 10x, 1x, 0.5x; at most two decimals)")
    speed = float(match[1])
    check_speed(speed)
    return speed


def check_speed(speed: float) -> None:
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise InvalidValue(None, f"speed must be between {MIN_SPEED:g}x and {MAX_SPEED:g}x, got {speed:g}x")


def render_speed(speed: float) -> str:
    return f"{speed:.2f}".rstrip("0").rstrip(".") + "x"


def wants_original(options: Mapping[str, tuple[str, str]]) -> bool:
    return "tps" in options and options["tps"][1].lower() == "original"


def parse_original(options: Mapping[str, tuple[str, str]], usage: str, *, max_tps: int) -> Original | None:
    """The ``tps=original`` request in ``options`` ({name: (token, value)}), or None without it."""
    if not wants_original(options):
        if "speed" in options:
            raise GrammarError("speed= goes with tps=original", token=options["speed"][0], usage=usage)
        return None
    for name in ("lag", "group"):
        if name in options:
            reason = "lag< and group= go with tps=auto, not tps=original"
            raise GrammarError(reason, token=options[name][0], usage=usage)
    if "ramp" in options:
        reason = "ramp= is for a flat rate; tps=original keeps the traffic's own shape"
        raise GrammarError(reason, token=options["ramp"][0], usage=usage)
    speed = 1.0
    if "speed" in options:
        with blaming(options["speed"][0], usage):
            speed = parse_speed(options["speed"][1])
    ceiling = None
    if "max" in options:
        with blaming(options["max"][0], usage):
            ceiling = parse_count(options["max"][1], minimum=1)
            if ceiling > max_tps:
                raise InvalidValue(None, f"max={ceiling} is above this platform's maximum of {max_tps}")
    return Original(speed=speed, ceiling=ceiling)

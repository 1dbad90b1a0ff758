"""``tps=auto max=N lag<M group=G``: a replay whose rate the daemon steers from G's lag.

``max=`` (the ceiling, never exceeded), ``lag<`` (the lag to stay under) and ``group=`` (whose lag)
come together or not at all; ``lag<50k`` is written with ``<`` because it is a bound, not a value.
The controller itself is ``daemon.core.auto_rate``.
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.core.auto_rate import AutoRate
from daemon.core.grammar.values import MAX_TPS, GrammarError, blaming
from daemon.core.ids import GROUP_ID_PATTERN
from daemon.core.quantities import InvalidValue, parse_count

AUTO_OPTIONS = ("max", "lag", "group")
LAG_BOUND = "lag<"  # the one option written with '<' instead of '='
MAX_LAG = 1_000_000_000


def check_auto(auto: AutoRate) -> None:
    if not 1 <= auto.ceiling <= MAX_TPS:
        raise InvalidValue(None, f"max must be between 1 and {MAX_TPS:,}, got {auto.ceiling}")
    if not 1 <= auto.lag_limit <= MAX_LAG:
        raise InvalidValue(None, f"lag< must be between 1 and {MAX_LAG:,}, got {auto.lag_limit}")
    if not GROUP_ID_PATTERN.fullmatch(auto.group):
        raise InvalidValue(None, f"'{auto.group}' is not a consumer group id")


def parse_auto(
    tps_token: str, options: Mapping[str, tuple[str, str]], usage: str, *, max_tps: int = MAX_TPS
) -> AutoRate | None:
    """The ``tps=auto`` request in ``options`` ({name: (token, value)}), or None without ``tps=auto``.

    ``max``, ``lag`` and ``group`` are refused without ``tps=auto``, and each is required with it.
    """
    given = [name for name in AUTO_OPTIONS if name in options]
    wanted = "tps" in options and options["tps"][1].lower() == "auto"
    if not wanted:
        if given:
            token = options[given[0]][0]
            reason = "max=, lag< and group= go with tps=auto (max= also with tps=original)"
            raise GrammarError(reason, token=token, usage=usage)
        return None
    missing = [name for name in AUTO_OPTIONS if name not in options]
    if missing:
        shown = ", ".join("lag<M" if name == "lag" else f"{name}=…" for name in missing)
        raise GrammarError(f"tps=auto also needs {shown}", token=tps_token, usage=usage)
    with blaming(options["max"][0], usage):
        ceiling = parse_count(options["max"][1], minimum=1)
        if ceiling > max_tps:
            raise InvalidValue(None, f"max={ceiling} is above this platform's maximum of {max_tps}")
    with blaming(options["lag"][0], usage):
        limit = parse_count(options["lag"][1], minimum=1, maximum=MAX_LAG)
    group_token, group = options["group"]
    with blaming(group_token, usage):
        if not GROUP_ID_PATTERN.fullmatch(group):
            raise InvalidValue(group, "is not a consumer group id (letters, digits, '.', '_' or '-')")
    return AutoRate(ceiling=ceiling, lag_limit=limit, group=group)


def render_auto(auto: AutoRate) -> list[str]:
    return ["tps=auto", f"max={auto.ceiling}", f"{LAG_BOUND}{auto.lag_limit}", f"group={auto.group}"]

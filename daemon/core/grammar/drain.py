"""``watch=<group>[,<group>]``: the consumer groups a replay or a schedule watches drain afterwards.

Group ids are held to the same characters as ``lag`` and ``rewind`` (``GROUP_ID_PATTERN``); at most
``MAX_WATCHED_GROUPS``, each once. Rendered in the order given, so ``parse(render(c)) == c``.
"""

from __future__ import annotations

from daemon.core.drain import MAX_WATCHED_GROUPS
from daemon.core.ids import GROUP_ID_PATTERN
from daemon.core.quantities import InvalidValue


def check_drain_groups(groups: tuple[str, ...]) -> None:
    """Validate already-split groups (what ``parse_drain_groups`` returns, or a caller builds)."""
    if not isinstance(groups, tuple):
        raise InvalidValue(None, "watch must be a tuple of consumer group ids")
    if len(groups) > MAX_WATCHED_GROUPS:
        raise InvalidValue(None, f"too many groups to watch ({len(groups)}; at most {MAX_WATCHED_GROUPS})")
    seen: set[str] = set()
    for group in groups:
        if not isinstance(group, str) or not GROUP_ID_PATTERN.fullmatch(group):
            raise InvalidValue(
                None, f"'{group}' is not a consumer group id (letters, digits, '.', '_' or '-'; 249 at most)"
            )
        if group in seen:
            raise InvalidValue(None, f"group '{group}' given twice")
        seen.add(group)


def parse_drain_groups(text: str) -> tuple[str, ...]:
    """``g1,g2`` -> ("g1", "g2"), in the order given."""
    if not text:
        raise InvalidValue(text, "no group given (write watch=<group>[,<group>])")
    groups = tuple(part.strip(" ") for part in text.split(","))
    if "" in groups:
        raise InvalidValue(text, "empty group entry (a stray comma?)")
    try:
        check_drain_groups(groups)
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None
    return groups


def render_drain_groups(groups: tuple[str, ...]) -> str:
    return ",".join(groups)

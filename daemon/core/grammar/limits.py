"""The platform's limits on a replay's rate and workers: one value for the grammar and the service.

The service checks ``Settings.max_tps``/``max_workers`` (``REPLAY_MAX_TPS``/``REPLAY_MAX_WORKERS``),
whose defaults are the ones below; ``Settings.limits`` hands the same numbers to ``parse``, so a
command over the limit is refused where it is typed, naming the real maximum, instead of later.

The bot reads its own settings (the same model, from the same ``REPLAY_*`` variables) rather than
asking the daemon: Slack wants the ack within 3 s and a parse must not wait on the network. Deploy
the bot and the daemon with the same limits; if they drift, the daemon still refuses what is over
its own, so a drift costs a later refusal, never an over-limit run.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.core.grammar.values import MAX_TPS, MAX_WORKERS
from daemon.core.quantities import InvalidValue

DEFAULT_MAX_TPS = 200_000
DEFAULT_MAX_WORKERS = 64


@dataclass(frozen=True)
class Limits:
    """What this platform allows; each bound at most the grammar's ceiling (``MAX_TPS``, ``MAX_WORKERS``)."""

    max_tps: int = DEFAULT_MAX_TPS
    max_workers: int = DEFAULT_MAX_WORKERS

    def __post_init__(self) -> None:
        if not 1 <= self.max_tps <= MAX_TPS:
            raise InvalidValue(None, f"max_tps must be between 1 and {MAX_TPS:,}, got {self.max_tps}")
        if not 1 <= self.max_workers <= MAX_WORKERS:
            raise InvalidValue(
                None, f"max_workers must be between 1 and {MAX_WORKERS}, got {self.max_workers}"
            )


# The widest a platform may be configured: what a command built in code is held to.
CEILINGS = Limits(max_tps=MAX_TPS, max_workers=MAX_WORKERS)

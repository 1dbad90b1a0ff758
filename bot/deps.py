"""What listeners need from outside Bolt, passed to each `register(app, deps)` explicitly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.confirmation import CONFIRM_TTL_S
from daemon.contract.client import DaemonClient
from daemon.core.grammar import Limits

DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class BotDeps:
    daemon: DaemonClient
    clock: Callable[[], float] = time.time  # injected so tests can age a confirmation
    confirm_ttl_s: float = CONFIRM_TTL_S
    limits: Limits = DEFAULT_LIMITS  # the service's (`Settings.limits`): why the bot's own, see `Limits`

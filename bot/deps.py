"""What listeners need from outside Bolt, passed to each `register(app, deps)` explicitly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.confirmation import CONFIRM_TTL_S
from daemon.contract.client import DaemonClient


@dataclass(frozen=True)
class BotDeps:
    daemon: DaemonClient
    clock: Callable[[], float] = time.time  # injected so tests can age a confirmation
    confirm_ttl_s: float = CONFIRM_TTL_S

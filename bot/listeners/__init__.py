"""One module per feature, each with `register(app, deps)`; `register_all` wires them in order."""

from __future__ import annotations

from slack_bolt import App

from bot.deps import BotDeps
from bot.listeners import (
    commands,
    confirmations,
    consumer_groups,
    idle,
    pipeline_actions,
    pipeline_approvals,
)


def register_all(app: App, deps: BotDeps) -> None:
    commands.register(app, deps)
    confirmations.register(app, deps)
    pipeline_actions.register(app, deps)
    pipeline_approvals.register(app, deps)
    idle.register(app, deps)
    consumer_groups.register(app, deps)

"""`create_app(settings, daemon) -> App`: the Bolt app, built from settings, holding no state.

HTTP mode verifies every request's signature (Bolt refuses a bad one, or a timestamp more than five
minutes old, with 401). `process_before_response=True` runs the ack function in the request's own
thread, so an ack never queues behind slow lazy work; lazy listeners get their own executor.
The token is not checked at start-up (`auth.test` would need Slack at boot); Bolt calls it on the
first request instead, against `slack_api_url`, which tests point at a local stand-in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor

from slack_bolt import App
from slack_sdk import WebClient

from bot.confirmation import CONFIRM_TTL_S
from bot.deps import BotDeps
from bot.listeners import register_all
from daemon.config.settings import Settings
from daemon.contract.client import DaemonClient
from daemon.core.errors import ConfigError
from daemon.slack.web_client import make_web_client

LAZY_WORKERS = 32


def create_app(
    settings: Settings,
    daemon: DaemonClient,
    *,
    client: WebClient | None = None,
    clock: Callable[[], float] = time.time,
    confirm_ttl_s: float = CONFIRM_TTL_S,
    listener_executor: Executor | None = None,
) -> App:
    settings.require("slack_bot_token")
    socket_mode = settings.slack_app_token is not None
    if not socket_mode and settings.slack_signing_secret is None:
        raise ConfigError("REPLAY_SLACK_SIGNING_SECRET is required to serve Slack over HTTP")
    assert settings.slack_bot_token is not None
    secret = settings.slack_signing_secret
    app = App(
        name="replay-bot",
        logger=logging.getLogger("bot"),
        client=client or make_web_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url),
        signing_secret=secret.get_secret_value() if secret is not None else "unused-in-socket-mode",
        request_verification_enabled=secret is not None,
        token_verification_enabled=False,
        process_before_response=True,
        listener_executor=listener_executor
        or ThreadPoolExecutor(max_workers=LAZY_WORKERS, thread_name_prefix="replay-bot-lazy"),
    )
    deps = BotDeps(daemon=daemon, clock=clock, confirm_ttl_s=confirm_ttl_s, limits=settings.limits)
    register_all(app, deps)
    return app

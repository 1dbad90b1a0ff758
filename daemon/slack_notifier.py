"""`SlackNotifier`: a run's story as one Slack thread (announcement, progress, final word).

The parent message goes to the channel the command came from; progress and the final report are
replies in its thread, and the parent is edited to show the final state. Rendering is
`daemon.slack_blocks`; delivery is an injected `slack_sdk.WebClient`, given slack_sdk's retry handlers
so a 429 waits for `Retry-After` and the message arrives once. Every `SlackApiError` is translated to
`SlackDeliveryError` in `_call`, the one place this adapter touches the Web API.

ReplayError
└── SlackDeliveryError   Slack refused or could not take a message (method, Slack's error code)
"""

from __future__ import annotations

from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.web import SlackResponse

from daemon import slack_blocks
from daemon.errors import ReplayError
from daemon.notifier import Notifier, RunView
from daemon.settings import Settings

log = structlog.get_logger(__name__)

RATE_LIMIT_RETRIES = 3
CONNECTION_RETRIES = 2


class SlackDeliveryError(ReplayError):
    """A Web API call failed for good (after slack_sdk's retries)."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"Slack {method} failed: {error}")
        self.method, self.error = method, error


def with_retries(client: WebClient) -> WebClient:
    """Give `client` slack_sdk's 429 and connection-error retry handlers unless it has its own."""
    kinds = {type(handler) for handler in client.retry_handlers}
    if RateLimitErrorRetryHandler not in kinds:
        client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
    if ConnectionErrorRetryHandler not in kinds:
        client.retry_handlers.append(ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES))
    return client


def make_web_client(token: str, base_url: str, *, timeout_s: int = 15) -> WebClient:
    """A WebClient for `base_url` (Slack, or a local stand-in) with the retries above."""
    return with_retries(WebClient(token=token, base_url=base_url.rstrip("/") + "/", timeout=timeout_s))


class SlackNotifier(Notifier):
    def __init__(self, *, client: WebClient, default_channel: str | None = None) -> None:
        """`default_channel` takes runs that came without one (e.g. from the `replay` CLI)."""
        self._client = with_retries(client)
        self._default_channel = default_channel

    def _call(self, method: str, **params: Any) -> SlackResponse:
        try:
            return self._client.api_call(method, json=params)
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            status = exc.response.status_code if exc.response is not None else "?"
            raise SlackDeliveryError(method, str(error or f"HTTP {status}")) from exc
        except (SlackClientError, OSError) as exc:
            raise SlackDeliveryError(method, f"{type(exc).__name__}: {exc}") from exc

    def _channel(self, run: RunView) -> str | None:
        return run.channel or self._default_channel

    def _post(self, channel: str, message: slack_blocks.Message, thread_ts: str | None = None) -> str:
        extra = {"thread_ts": thread_ts} if thread_ts else {}
        response = self._call(
            "chat.postMessage", channel=channel, unfurl_links=False, **message.payload(**extra)
        )
        return str(response["ts"])

    def run_started(self, run: RunView) -> str | None:
        channel = self._channel(run)
        if channel is None:
            return None
        ts = self._post(channel, slack_blocks.run_parent(run))
        log.info("slack thread started", run_id=run.run_id, channel=channel, ts=ts)
        return ts

    def run_progress(self, run: RunView) -> None:
        channel = self._channel(run)
        if channel is None or run.thread_ts is None:
            return  # no thread to reply in: progress alone would be noise in the channel
        self._post(channel, slack_blocks.progress_reply(run), thread_ts=run.thread_ts)

    def run_finished(self, run: RunView) -> None:
        """Reply with the final report, then edit the parent; one failing does not stop the other."""
        channel = self._channel(run)
        if channel is None:
            return
        thread_ts = run.thread_ts
        if thread_ts is None:  # the announcement never went out: post the final card as the parent
            thread_ts = self._post(channel, slack_blocks.run_parent(run))
        failures: list[SlackDeliveryError] = []
        try:
            self._post(channel, slack_blocks.final_reply(run), thread_ts=thread_ts)
        except SlackDeliveryError as exc:
            failures.append(exc)
        if run.thread_ts is not None:
            try:
                self._call(
                    "chat.update", channel=channel, ts=thread_ts, **slack_blocks.run_parent(run).payload()
                )
            except SlackDeliveryError as exc:
                failures.append(exc)
        if failures:
            log.warning("slack final report incomplete", run_id=run.run_id, errors=[str(f) for f in failures])
            raise failures[0]


def slack_notifier_from_settings(settings: Settings) -> SlackNotifier | None:
    """The daemon's notifier when a bot token is configured; None means 'use the log notifier'."""
    if settings.slack_bot_token is None:
        return None
    client = make_web_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
    return SlackNotifier(client=client, default_channel=settings.slack_platform_channel)

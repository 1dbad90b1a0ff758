"""The Slack Web API client both senders use: the bot (Bolt's client) and the daemon's notifier.

slack_sdk's own retry handlers make a 429 wait for `Retry-After` and a dropped connection try again,
so a message arrives once. `base_url` is Slack, or a local stand-in in tests and the demo.
"""

from __future__ import annotations

from slack_sdk import WebClient
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

RATE_LIMIT_RETRIES = 3
CONNECTION_RETRIES = 2


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

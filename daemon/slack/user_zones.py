"""Whose clock to show: each Slack user's zone from `users.info` (`tz`), remembered for a while.

The bot and the daemon's notifier both ask; a progress message is edited every few seconds, so each
answer is kept for `ttl_s` (an hour: people rarely change zones mid-incident) and a failed lookup for
a few minutes, never retried on every edit. Anything that goes wrong (no scope, a user Slack does not
know, Slack away, a CLI user name) means "zone unknown", and the reader sees UTC only: a reply is
never held up or refused for want of a zone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import tzinfo

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from daemon.slack.blocks import is_user_id
from daemon.slack.zones import zone_named

log = structlog.get_logger(__name__)

ZONE_TTL_S = 3600.0
FAILURE_TTL_S = 300.0


class UserZones:
    """`zone(user)` -> the user's zone or None; one `users.info` per user per `ttl_s`."""

    def __init__(
        self,
        client: WebClient,
        *,
        ttl_s: float = ZONE_TTL_S,
        failure_ttl_s: float = FAILURE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._ttl_s, self._failure_ttl_s = ttl_s, failure_ttl_s
        self._clock = clock
        self._known: dict[str, tuple[tzinfo | None, float]] = {}  # user -> (zone, kept until)
        self._lock = threading.Lock()

    def zone(self, user: str | None) -> tzinfo | None:
        if user is None or not is_user_id(user):
            return None  # a CLI user name: no Slack profile to ask
        now = self._clock()
        with self._lock:
            kept = self._known.get(user)
        if kept is not None and kept[1] > now:
            return kept[0]
        zone, found = self._ask(user)
        with self._lock:
            self._known[user] = (zone, now + (self._ttl_s if found else self._failure_ttl_s))
        return zone

    def _ask(self, user: str) -> tuple[tzinfo | None, bool]:
        """The zone, and whether Slack answered (a profile without a zone is an answer too)."""
        try:
            response = self._client.users_info(user=user)
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("users.info failed: times shown in UTC", user=user, error=str(exc))
            return None, False
        profile = response.get("user")
        return zone_named(profile.get("tz") if isinstance(profile, dict) else None), True

"""Can the daemon post a run's thread where the command was typed? Asked before the acknowledgement.

With `chat:write.public` the bot posts in any public channel; it cannot post in a private channel it
was not invited to (Slack hides those: `channel_not_found`) or in an archived one. The daemon then
sends the thread to the requester's DM, and the acknowledgement says so up front.
"""

from __future__ import annotations

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

log = structlog.get_logger(__name__)


def channel_problem(client: WebClient, channel: str | None) -> str | None:
    """Slack's reason the bot cannot post in `channel` (`is_archived`, `not_in_channel`,
    `channel_not_found`), or None when it can, or when Slack could not say (the daemon falls back anyway)."""
    if not channel or channel.startswith("D"):
        return None  # a DM with the bot: always reachable
    try:
        info = client.conversations_info(channel=channel)["channel"]
    except SlackApiError as exc:
        error = str(exc.response.get("error") or "")
        return error if error == "channel_not_found" else None
    except (SlackClientError, OSError) as exc:
        log.warning("could not check the channel", channel=channel, error=str(exc))
        return None
    if info.get("is_archived"):
        return "is_archived"
    if info.get("is_private") and not info.get("is_member"):
        return "not_in_channel"
    return None

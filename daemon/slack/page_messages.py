"""`/replay open` and a run card's *Open its page* button: the asker's own link to the pages, shown
only to them (it signs them in)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from daemon.contract.models import PageLinkOut
from daemon.slack.blocks import Message, buttons, message, section

OPEN_ACTION = "page_open"  # the link's own button: it opens the URL, Slack only wants it acked
PAGE_LINK_ACTION = "page_link"  # a run card's button: the clicker gets a link of their own


def open_button(run_id: str) -> dict[str, Any]:
    """A run card's button. The card is in a channel, so it carries no link: each clicker is sent one
    that signs them in, shown to them alone."""
    return buttons("run_page", (PAGE_LINK_ACTION, "Open its page", run_id, None))


def page_link(link: PageLinkOut, what: str) -> Message:
    """An ephemeral answer: a button to `what` (a run's page, the console) and how long the link lasts.
    The link signs in whoever opens it: it is never posted where others can see it."""
    until = link.expires_at.astimezone(UTC).strftime("%H:%M UTC")
    text = f":globe_with_meridians: Your link to {what} (it signs you in; open it before {until}): {link.url}"
    button = {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": OPEN_ACTION,
                "text": {"type": "plain_text", "text": "Open"},
                "url": link.url,
            }
        ],
    }
    shown = section(
        f":globe_with_meridians: Your link to {what}. It signs you in: open it before {until}, "
        "and keep it to yourself."
    )
    return message(text, shown, button)

"""Block Kit primitives: `Message`, Slack's limits, escaping, and the few blocks every message is made of.

Everything a user or a job typed is escaped (`&`, `<`, `>`) and clipped to Slack's limits here, once,
so no message module can post something Slack would refuse or a reason that pings `<!channel>`.
Pure: values in, `Message` out, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from daemon.slack.zones import date_time

# Slack's documented limits (50 blocks a message, section text 3000, field 2000, header 150, button
# text 75 / value 2000).
MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_FIELD = 2000
MAX_HEADER = 150
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_TOKEN_SHOWN = 120
MAX_LINE = 400  # one line of a list: 5 of them fit a section without cutting a mention
MAX_OWNERS_SHOWN = 8

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")
_MENTION_ESCAPED = re.compile(r"&lt;@([UW][A-Z0-9]{2,20})&gt;")


@dataclass(frozen=True)
class Message:
    """A message body: `text` is the notification/fallback line, `blocks` what Slack draws."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def payload(self, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for `chat.postMessage`, `ack()` or `respond()`."""
        return {"text": self.text, "blocks": self.blocks, **extra}

    def ephemeral(self, **extra: Any) -> dict[str, Any]:
        return self.payload(response_type="ephemeral", **extra)


# --- text -----------------------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack's three control characters; the rest of mrkdwn is harmless in our fields."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_keeping_mentions(text: str) -> str:
    """Escape text we did not write, but let `<@U…>` (a janitor's "deleted by <@U…>") ping the user."""
    return _MENTION_ESCAPED.sub(r"<@\1>", escape(text))


def clip(text: str, limit: int) -> str:
    """Plain text (not yet escaped) cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe_cut(text: str, at: int) -> int:
    """The last index at or before `at` where escaped mrkdwn may be cut: never inside an entity
    (`&amp;`), a mention or a link (`<@U…>`, `<#C…>`, `<url|label>`)."""
    at = max(0, min(at, len(text)))
    entity = text.rfind("&", max(0, at - 5), at)
    if entity != -1 and ";" not in text[entity:at]:
        at = entity
    angle = text.rfind("<", 0, at)
    if angle != -1 and ">" not in text[angle:at]:
        at = angle
    return at


def _open_code(text: str) -> bool:
    """Whether a code span is open at the end of `text` (an odd number of backticks)."""
    return text.count("`") % 2 == 1


def fit(text: str, limit: int) -> str:
    """Escaped mrkdwn cut to `limit` characters: at a safe point, an open code span closed, an ellipsis
    marking the cut. Clip *after* escaping: escaping can make a text five times longer."""
    if len(text) <= limit:
        return text
    head = text[: safe_cut(text, limit - 2)]
    return head + ("`" if _open_code(head) else "") + "…"


def split_text(text: str, limit: int = MAX_SECTION) -> list[str]:
    """Escaped mrkdwn in pieces of at most `limit` characters, losing nothing: whole lines where they
    fit, a longer line cut at safe points, a code span cut in two closed and opened again."""
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) <= limit:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = line
        while len(current) > limit:
            cut = safe_cut(current, limit - 1) or limit - 1  # a token longer than a section: cut it anyway
            head, current = current[:cut], current[cut:]
            if _open_code(head):
                head, current = head + "`", "`" + current
            pieces.append(head)
    if current or not pieces:
        pieces.append(current)
    return pieces


def code(text: str, limit: int = MAX_TOKEN_SHOWN) -> str:
    """Inline code for a token as typed; a backtick inside would end the span, so quote instead."""
    shown = escape(clip(text, limit))
    return f"“{shown}”" if "`" in text or not text.strip() else f"`{shown}`"


def is_user_id(text: str) -> bool:
    """A Slack user id (`U…`/`W…`), as opposed to a CLI user name."""
    return _USER_ID.fullmatch(text) is not None


def mention(user_id: str) -> str:
    """`<@U…>` for a Slack user id; anything else (a CLI user name) as escaped text."""
    return f"<@{user_id}>" if is_user_id(user_id) else escape(user_id)


def owners_line(owners: Sequence[str]) -> str:
    """Mentions, capped so a long list never cuts one in half at Slack's field limit."""
    shown = [mention(clip(owner, 40)) for owner in owners[:MAX_OWNERS_SHOWN]]
    more = len(owners) - len(shown)
    return (", ".join(shown) or "nobody") + (f" and {more} more" if more > 0 else "")


def count(value: int | None) -> str:
    """A row or event count; a count nobody knows yet says so, it is never shown as 0."""
    return "unknown" if value is None else f"{value:,}"


def rate(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}/s" if value >= 100 else f"{value:,.1f}/s"


def human_duration(seconds: float | None) -> str:
    """`42s`, `3m 20s`, `2h 05m`, `1d 3h`: what a person reads at a glance."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    if seconds > 365 * 86_400:  # includes infinity: a rate too small to finish in any useful time
        return "over a year"
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def when(moment: datetime | None, missing: str = "n/a", *, zone: tzinfo | None = None) -> str:
    """A timestamp to the minute: UTC, what a person compares with a schedule, after the reader's own
    time when `zone` is known (`2024-05-01 11:00 CEST (09:00 UTC)`)."""
    if moment is None:
        return missing
    return date_time(moment, zone)


# --- blocks ---------------------------------------------------------------------------------------------


def section(text: str) -> dict[str, Any]:
    """One section; a text that may be longer than a section belongs in `sections`."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": fit(text, MAX_SECTION) or " "}}


def sections(text: str) -> list[dict[str, Any]]:
    """As many sections as the text needs: its tail is never cut off."""
    return [section(piece) for piece in split_text(text, MAX_SECTION)]


def fields(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    shown = [{"type": "mrkdwn", "text": fit(f"*{name}*\n{value}", MAX_FIELD)} for name, value in pairs]
    return {"type": "section", "fields": shown[:10]}


def context(*parts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": fit(p, MAX_FIELD)} for p in parts]}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, MAX_HEADER), "emoji": True}}


def buttons(block_id: str, *specs: tuple[str, str, str, str | None]) -> dict[str, Any]:
    """An actions block; each button is (action_id, label, value, style or None).

    A value over Slack's limit is refused here (ValueError) rather than by Slack after the fact.
    """
    elements = []
    for action_id, label, value, style in specs:
        if len(value) > MAX_BUTTON_VALUE:
            raise ValueError(f"button value is {len(value)} characters; Slack allows {MAX_BUTTON_VALUE}")
        button = {
            "type": "button",
            "action_id": action_id,
            "value": value,
            "text": {"type": "plain_text", "text": clip(label, MAX_BUTTON_TEXT)},
        }
        elements.append({**button, "style": style} if style else button)
    return {"type": "actions", "block_id": block_id, "elements": elements}


def message(text: str, *blocks: dict[str, Any]) -> Message:
    """A message within Slack's limits: the fallback text fitted, at most 50 blocks (the last one then
    says how many were left out)."""
    shown = list(blocks)
    if len(shown) > MAX_BLOCKS:
        left_out = len(shown) - (MAX_BLOCKS - 1)
        shown = [*shown[: MAX_BLOCKS - 1], context(f"…and {left_out} more blocks not shown")]
    return Message(text=fit(text, MAX_SECTION), blocks=shown)


# --- replies that are about no run or pipeline in particular ---------------------------------------------


def listing(kind: str, title: str, shown: Sequence[str], total: int) -> Message:
    """A titled list of the `shown` lines, saying how many of `total` were left out; "No <kind>" if none."""
    if total == 0:
        return notice(f"No {kind.lower()} ({escape(title)}).")
    more = total - len(shown)
    body = "\n".join(shown) + (f"\n…and {more} more" if more > 0 else "")
    text = f"*{kind} ({escape(title)})*\n{body}"
    return message(text, *sections(text))


def notice(text: str) -> Message:
    """A one-line ephemeral note (echo of the command, 'not available yet', ...)."""
    return message(text, *sections(text))


def input_error(token: str | None, reason: str, usage: str) -> Message:
    """Bad input: the token as typed, why it is wrong, and how the command is written."""
    where = f"{code(token)}: " if token is not None else ""
    text = f":warning: {where}{escape(reason)}\n*Usage:* `{escape(usage)}`"
    return message(text, *sections(text))


def refusal(reason: str, usage: str | None = None) -> Message:
    """The Replay Service said no (unknown source, not an owner, nothing to cancel...). Its words name
    people as `<@U…>`: those stay mentions, and a cut never falls inside one."""
    text = f":no_entry: {fit(escape_keeping_mentions(reason), 1500)}"
    if usage:
        text += f"\n*Usage:* `{escape(usage)}`"
    return message(text, *sections(text))


def unavailable(detail: str) -> Message:
    text = (
        f":electric_plug: The Replay Service did not answer, so I could not do that ({escape(detail)}).\n"
        "Check `/replay list mine` before trying again; the `replay` command line talks to the same service."
    )
    return message(text, *sections(text))


def help_message(text: str) -> Message:
    return message(text, section(f"```{escape(text)}```"))

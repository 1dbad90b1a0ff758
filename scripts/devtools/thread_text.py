"""A Slack thread as a person reads it in a terminal: what `make demo` prints, from Block Kit."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

_EMOJI = {
    ":white_check_mark:": "✅",
    ":x:": "❌",
    ":no_entry_sign:": "🚫",
    ":no_entry:": "⛔",
    ":hourglass_flowing_sand:": "⏳",
    ":hourglass:": "⌛",
    ":boom:": "💥",
    ":grey_question:": "❔",
    ":arrow_forward:": "▶",
    ":octagonal_sign:": "🛑",
    ":warning:": "⚠",
    ":rocket:": "🚀",
    ":repeat:": "🔁",
    ":electric_plug:": "🔌",
    ":fast_forward:": "⏩",
    ":calendar:": "📅",
    ":double_vertical_bar:": "⏸",
    ":file_cabinet:": "🗄",
    ":ok_hand:": "👌",
    ":pushpin:": "📌",
    ":wastebasket:": "🗑",
    ":zzz:": "💤",
    ":mag:": "🔍",
    ":information_source:": "ℹ️",  # noqa: RUF001 - the emoji, as Slack draws it
    ":bar_chart:": "📊",
    ":chart_with_upwards_trend:": "📈",
}


@dataclass
class Posted:
    """A message as the stand-in holds it: edits applied in place, counted in `edits`."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    edits: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)  # files shared with it: id, name, title, url


def _plain(mrkdwn: str) -> str:
    text = html.unescape(mrkdwn).replace("*", "")
    for code, glyph in _EMOJI.items():
        text = text.replace(code, glyph)
    return re.sub(r"<@([A-Z0-9]+)>", r"@\1", text)


def blocks_to_text(blocks: list[dict[str, Any]], fallback: str) -> list[str]:
    """Block Kit as lines of terminal text; the fallback text when there are no blocks."""
    if not blocks:
        return _plain(fallback).splitlines()
    lines: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            lines.append(_plain(block["text"]["text"]).upper())
        elif kind == "section":
            if "text" in block:
                lines.extend(_plain(block["text"]["text"]).splitlines())
            pairs = [_plain(f["text"]).split("\n", 1) for f in block.get("fields", [])]
            lines.extend(f"{p[0]}: {p[1] if len(p) > 1 else ''}" for p in pairs)
        elif kind == "context":
            lines.append(" · ".join(_plain(e.get("text", "")) for e in block.get("elements", [])))
        elif kind == "actions":
            lines.append("  ".join(f"[ {e['text']['text']} ]" for e in block.get("elements", [])))
        elif kind == "divider":
            lines.append("─" * 40)
    return lines


def files_to_text(files: list[dict[str, Any]]) -> list[str]:
    """A shared file as a person finds it: its title, its name, and where to open it."""
    return [
        f"📎 {f.get('title') or f.get('name')} ({f.get('name')}) {f.get('url_private', '')}".rstrip()
        for f in files
    ]


def _stamp(ts: str) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%H:%M:%S")


def render_thread(thread: list[Posted]) -> str:
    """A parent and its replies as a person reads them in a terminal."""
    if not thread:
        return "(no such thread)"
    parent, replies = thread[0], thread[1:]
    edited = " (edited)" if parent.edits else ""
    out = [f"#{parent.channel}  replay-bot  {_stamp(parent.ts)}{edited}"]
    out += [f"  {line}" for line in _lines(parent)]
    for reply in replies:
        edited = " (edited)" if reply.edits else ""
        out.append(f"  ↳ replay-bot  {_stamp(reply.ts)}{edited}")
        out += [f"      {line}" for line in _lines(reply)]
    return "\n".join(out)


def _lines(posted: Posted) -> list[str]:
    text = blocks_to_text(posted.blocks, posted.text) if posted.blocks or posted.text else []
    return text + files_to_text(posted.files)

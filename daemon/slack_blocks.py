"""Block Kit for every message the platform shows in Slack. Pure: values in, `Message` out, no I/O.

One module renders for both senders, the daemon's `SlackNotifier` (a run's thread) and the bot
(ephemeral replies), so a run looks the same in its thread, in `/replay status` and in `/replay list`.
Everything a user or a job typed is escaped (`&`, `<`, `>`) and clipped to Slack's limits here, once,
so no caller can post a message Slack would refuse or a reason that pings `<!channel>`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from daemon.notifier import RunView

# Slack's documented limits (section text 3000, field 2000, header 150, button text 75 / value 2000).
MAX_SECTION = 3000
MAX_FIELD = 2000
MAX_HEADER = 150
MAX_BUTTON_VALUE = 2000
MAX_TOKEN_SHOWN = 120
MAX_LISTED_RUNS = 15
CONFIRM_ACTION = "replay_live_confirm"
CANCEL_ACTION = "replay_live_cancel"

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "skipped"})
_STATE_ICON = {
    "queued": ":hourglass_flowing_sand:",
    "submitted": ":hourglass_flowing_sand:",
    "running": ":arrow_forward:",
    "cancelling": ":octagonal_sign:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "cancelled": ":no_entry_sign:",
    "skipped": ":fast_forward:",
}
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")


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


# --- text helpers -----------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack's three control characters; the rest of mrkdwn is harmless in our fields."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(text: str, limit: int = MAX_TOKEN_SHOWN) -> str:
    """Inline code for a token as typed; a backtick inside would end the span, so quote instead."""
    shown = escape(clip(text, limit))
    return f"“{shown}”" if "`" in text or not text.strip() else f"`{shown}`"


def mention(user_id: str) -> str:
    """`<@U…>` for a Slack user id; anything else (a CLI user name) as escaped text."""
    return f"<@{user_id}>" if _USER_ID.fullmatch(user_id) else escape(user_id)


def count(value: int | None) -> str:
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


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, MAX_SECTION)}}


def _fields(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    fields = [{"type": "mrkdwn", "text": clip(f"*{name}*\n{value}", MAX_FIELD)} for name, value in pairs]
    return {"type": "section", "fields": fields[:10]}


def _context(*parts: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(p, MAX_FIELD)} for p in parts]}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, MAX_HEADER), "emoji": True}}


def _message(text: str, *blocks: dict[str, Any]) -> Message:
    return Message(text=clip(text, MAX_SECTION), blocks=list(blocks))


# --- a run's thread -----------------------------------------------------------------------------------


def _icon(state: str) -> str:
    return _STATE_ICON.get(state, ":grey_question:")


def _rerun(run: RunView) -> str:
    live = "" if run.topic.startswith("replay.") else " topic=live"
    return f"/replay {run.source} {run.window} tps={run.tps}{live}"


def next_step(run: RunView) -> str:
    """A suggestion for a failed or cancelled run, from its reason; never empty."""
    reason = (run.reason or "").lower()
    if run.state == "cancelled":
        return f"run `{escape(_rerun(run))}` to start again (a new run publishes the whole window again)"
    if "launch" in reason or "spark" in reason:
        return (
            "the job never started: ask the platform team to check the launcher, then run the command again"
        )
    if "lost" in reason:
        return "the job process disappeared (host restart?); run the command again"
    if any(word in reason for word in ("broker", "kafka", "timed out", "timeout", "delivery")):
        return (
            "the broker refused or timed out: check the cluster, then re-run; duplicates of what was "
            "already confirmed carry the same event ids and are absorbable"
        )
    return f"see the job's output with `/replay status {run.run_id}`, then re-run `{escape(_rerun(run))}`"


def run_parent(run: RunView) -> Message:
    """The channel message of a run: what, how much, where, how fast; final counts once it ended."""
    icon, final = _icon(run.state), run.state in TERMINAL
    pairs = [
        ("Source", escape(run.source)),
        ("Window", f"`{escape(run.window)}` (UTC)"),
        ("Rows", count(run.rows)),
        ("Target topic", f"`{escape(run.topic)}`"),
        ("Rate", f"{run.tps:,}/s"),
        ("ETA", human_duration(run.eta_s) if run.eta_s is not None else "n/a"),
        ("Requested by", mention(run.requester)),
        ("State", f"{icon} {escape(run.state)}"),
    ]
    if final:
        pairs[5] = ("Took", human_duration(run.duration_s))
        pairs.append(("Confirmed by the broker", f"{count(run.confirmed)} of {count(run.rows)}"))
        pairs.append(("Achieved rate", rate(run.achieved_tps)))
        footer = "Final report in the thread."
    else:
        footer = f"Progress follows in the thread · `/replay cancel {escape(run.run_id)}` stops it."
    title = f"Replay {run.run_id} · {run.source} · {run.state}"
    text = (
        f"{icon} Replay {run.run_id}: {escape(run.source)} {escape(run.window)} → {escape(run.topic)} "
        f"at {run.tps:,}/s ({count(run.rows)} rows) — {run.state}"
    )
    return _message(text, _header(title), _fields(pairs), _context(footer))


def progress_reply(run: RunView) -> Message:
    """One line in the thread: confirmed so far, the current rate and the time left."""
    done = f"*{count(run.confirmed)}*"
    if run.rows:
        percent = min(100.0, 100.0 * run.confirmed / run.rows)
        done += f" of {count(run.rows)} confirmed ({percent:.0f}%)"
        left = max(run.rows - run.confirmed, 0)
        speed = run.rate if run.rate else run.tps
        tail = f" · about {human_duration(left / speed)} left" if speed and left else ""
    else:
        done += " confirmed"
        tail = ""
    speed_shown = rate(run.rate) if run.rate else f"target {run.tps:,}/s"  # no rate before a 2nd sample
    text = f":hourglass_flowing_sand: {done} · {speed_shown}{tail}"
    return _message(text, _section(text))


def final_reply(run: RunView) -> Message:
    """The last word in the thread: the broker-confirmed count, or why it stopped and what to do."""
    confirmed, rows = f"*{count(run.confirmed)}*", count(run.rows)
    if run.state == "succeeded":
        lines = [
            f":white_check_mark: *Done.* The broker confirmed {confirmed} events "
            f"(of {rows} selected) into `{escape(run.topic)}`.",
            f"Achieved {rate(run.achieved_tps)} (asked {run.tps:,}/s) in {human_duration(run.duration_s)}.",
        ]
    elif run.state == "cancelled":
        lines = [
            f":no_entry_sign: *Cancelled.* {confirmed} of {rows} events were confirmed before it stopped; "
            f"they stay in `{escape(run.topic)}`.",
            f"*Next step:* {next_step(run)}",
        ]
    else:
        reason = escape(clip(run.reason or "no reason was reported", 1500))
        lines = [
            f"{_icon(run.state)} *{escape(run.state.capitalize())}* after {confirmed} of {rows} events "
            "were confirmed.",
            f"*Reason:* {reason}",
            f"*Next step:* {next_step(run)}",
        ]
    text = "\n".join(lines)
    return _message(text, _section(text))


# --- bot replies ----------------------------------------------------------------------------------------


def input_error(token: str | None, reason: str, usage: str) -> Message:
    """Bad input: the token as typed, why it is wrong, and how the command is written."""
    where = f"{code(token)}: " if token is not None else ""
    text = f":warning: {where}{escape(reason)}\n*Usage:* `{escape(usage)}`"
    return _message(text, _section(text))


def refusal(message: str, usage: str | None = None) -> Message:
    """The Replay Service said no (unknown source, not an owner, nothing to cancel...)."""
    text = f":no_entry: {escape(clip(message, 1500))}"
    if usage:
        text += f"\n*Usage:* `{escape(usage)}`"
    return _message(text, _section(text))


def unavailable(detail: str) -> Message:
    text = (
        f":electric_plug: The Replay Service did not answer, so I could not do that ({escape(detail)}).\n"
        "Check `/replay list mine` before trying again; the `replay` command line talks to the same service."
    )
    return _message(text, _section(text))


def notice(text: str) -> Message:
    """A one-line ephemeral note (echo of the command, 'not available yet', ...)."""
    return _message(text, _section(text))


def help_message(text: str) -> Message:
    body = f"```{escape(text)}```"
    return _message(text, _section(body))


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def view_of(run: Mapping[str, Any]) -> RunView:
    """A run as the HTTP API returns it, seen like the watcher sees one."""
    started, ended = _parse_time(run.get("started_at")), _parse_time(run.get("ended_at"))
    rows, tps = run.get("rows"), int(run["tps"])
    return RunView(
        run_id=run["id"],
        source=run["source"],
        window=run.get("window") or "",
        topic=run["topic"],
        tps=tps,
        requester=run["requester"],
        state=run["state"],
        rows=rows,
        confirmed=int(run.get("confirmed") or 0),
        eta_s=rows / tps if rows and tps else None,
        achieved_tps=run.get("achieved_tps"),
        duration_s=(ended - started).total_seconds() if started and ended else None,
        reason=run.get("failure_reason"),
        channel=run.get("slack_channel"),
        thread_ts=run.get("slack_ts"),
    )


def accepted(run: Mapping[str, Any], *, created: bool) -> Message:
    view = view_of(run)
    if created:
        text = (
            f":rocket: Accepted as `{escape(view.run_id)}`: {count(view.rows)} rows of "
            f"{escape(view.source)} `{escape(view.window)}` → `{escape(view.topic)}` at {view.tps:,}/s. "
            "Progress follows in this channel, in the run's thread."
        )
    else:
        text = f":repeat: Already accepted as `{escape(view.run_id)}` ({escape(view.state)}); nothing new."
    return _message(text, _section(text))


def run_status(run: Mapping[str, Any]) -> Message:
    return run_parent(view_of(run))


def run_line(run: Mapping[str, Any]) -> str:
    view = view_of(run)
    line = (
        f"{_icon(view.state)} `{escape(view.run_id)}` {escape(view.source)} `{escape(view.window)}` "
        f"→ `{escape(view.topic)}` · {count(view.confirmed)}/{count(view.rows)} · {mention(view.requester)}"
    )
    return clip(line, 400)


def run_list(runs: Sequence[Mapping[str, Any]], title: str) -> Message:
    if not runs:
        return notice(f"No runs ({escape(title)}).")
    shown = [run_line(run) for run in runs[:MAX_LISTED_RUNS]]
    more = len(runs) - len(shown)
    body = "\n".join(shown) + (f"\n…and {more} more" if more > 0 else "")
    text = f"*Runs ({escape(title)})*\n{body}"
    return _message(text, _section(text))


def cancelling(run: Mapping[str, Any]) -> Message:
    return notice(
        f":octagonal_sign: Cancelling `{escape(run['id'])}`; the final count follows in its thread."
    )


def _plan_fields(plan: Mapping[str, Any]) -> dict[str, Any]:
    return _fields(
        [
            ("Source", escape(str(plan["source"]))),
            ("Window", f"`{escape(str(plan['window']))}` (UTC)"),
            ("Rows", count(plan["rows"])),
            ("Target topic", f"`{escape(str(plan['topic']))}` ({plan['partitions']} partitions)"),
            ("Rate", f"{plan['tps']:,}/s on {plan['workers']} workers"),
            ("ETA", human_duration(plan["eta_s"])),
        ]
    )


def plan_summary(plan: Mapping[str, Any]) -> Message:
    text = (
        f"Plan: {count(plan['rows'])} rows of {escape(str(plan['source']))} {escape(str(plan['window']))} "
        f"→ {escape(str(plan['topic']))} at {plan['tps']:,}/s, about {human_duration(plan['eta_s'])}"
    )
    return _message(text, _header("Dry run: nothing was sent"), _plan_fields(plan))


def live_confirmation(plan: Mapping[str, Any], *, value: str, expires_in_s: float) -> Message:
    """Buttons before publishing into a live topic; both carry the same request in `value`."""
    if len(value) > MAX_BUTTON_VALUE:
        raise ValueError(f"button value is {len(value)} characters; Slack allows {MAX_BUTTON_VALUE}")
    warning = (
        f":warning: This publishes into the *live* topic `{escape(str(plan['topic']))}`: every consumer of "
        f"it will see these {count(plan['rows'])} events again. Confirm within "
        f"{human_duration(expires_in_s)}."
    )
    button = {"type": "button", "value": value}
    actions = {
        "type": "actions",
        "block_id": "replay_live",
        "elements": [
            {
                **button,
                "action_id": CONFIRM_ACTION,
                "style": "danger",
                "text": {"type": "plain_text", "text": "Publish to live topic"},
            },
            {**button, "action_id": CANCEL_ACTION, "text": {"type": "plain_text", "text": "Cancel"}},
        ],
    }
    return _message(warning, _section(warning), _plan_fields(plan), actions)

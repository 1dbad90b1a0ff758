"""Block Kit for every message the platform shows in Slack. Pure: values in, `Message` out, no I/O.

One module renders for both senders, the daemon's `SlackNotifier` (a run's thread, a pipeline's thread,
the idle-pipeline DMs) and the bot (ephemeral replies, confirmation buttons), so a run or a pipeline
looks the same in its thread, in `/replay status` / `/replay pipeline` and in the lists.
Everything a user or a job typed is escaped (`&`, `<`, `>`) and clipped to Slack's limits here, once,
so no caller can post a message Slack would refuse or a reason that pings `<!channel>`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from daemon.usecases.notifier import RunView
from store.models import Pipeline

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


# --- scheduled pipelines ---------------------------------------------------------------------------------

MAX_LISTED_PIPELINES = 15
MAX_OWNERS_SHOWN = 8
MAX_DETAIL_RUNS = 5  # 5 run lines of at most 400 characters fit one section without cutting a mention
SCHEDULE_LIVE_CONFIRM_ACTION = "pipeline_live_confirm"
SCHEDULE_LIVE_CANCEL_ACTION = "pipeline_live_cancel"
UNSCHEDULE_CONFIRM_ACTION = "pipeline_unschedule_confirm"
UNSCHEDULE_KEEP_ACTION = "pipeline_unschedule_keep"
IDLE_KEEP_ACTION = "idle_keep"
IDLE_DELETE_ACTION = "idle_delete"

_PIPELINE_ID = re.compile(r"p-[0-9a-f]{12}")
_WATERMARK_RANGE = re.compile(r"\((?P<low>.*), (?P<high>.*)\]", re.DOTALL)
_MENTION_ESCAPED = re.compile(r"&lt;@([UW][A-Z0-9]{2,20})&gt;")
_PIPELINE_ICON = {"active": ":calendar:", "paused": ":double_vertical_bar:", "archived": ":file_cabinet:"}


@dataclass(frozen=True)
class PipelineView:
    """What a message needs to know about a pipeline, from the store's row or the API's JSON."""

    pipeline_id: str
    source: str
    schedule: str
    state: str
    watermark_column: str
    watermark: str | None
    tps: int
    topic: str
    owners: tuple[str, ...]
    next_run_at: datetime | None = None
    last_published_at: datetime | None = None
    created_at: datetime | None = None

    @classmethod
    def of_model(cls, pipeline: Pipeline) -> PipelineView:
        return cls(
            pipeline_id=pipeline.id,
            source=pipeline.source,
            schedule=pipeline.schedule,
            state=str(pipeline.state),
            watermark_column=pipeline.watermark_column,
            watermark=pipeline.watermark_value,
            tps=pipeline.tps,
            topic=pipeline.topic,
            owners=tuple(pipeline.owners or ()),
            next_run_at=pipeline.next_run_at,
            last_published_at=pipeline.last_published_at,
            created_at=pipeline.created_at,
        )

    @classmethod
    def of_api(cls, data: Mapping[str, Any]) -> PipelineView:
        return cls(
            pipeline_id=data["id"],
            source=data["source"],
            schedule=data["schedule"],
            state=data["state"],
            watermark_column=data["watermark_column"],
            watermark=data.get("watermark"),
            tps=int(data["tps"]),
            topic=data["topic"],
            owners=tuple(data.get("owners") or ()),
            next_run_at=_parse_time(data.get("next_run_at")),
            last_published_at=_parse_time(data.get("last_published_at")),
            created_at=_parse_time(data.get("created_at")),
        )


def when(moment: datetime | None, missing: str = "n/a") -> str:
    """A UTC timestamp to the minute: what a person compares with a schedule."""
    if moment is None:
        return missing
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def escape_keeping_mentions(text: str) -> str:
    """Escape text we did not write, but let `<@U…>` (a janitor's "deleted by <@U…>") ping the user."""
    return _MENTION_ESCAPED.sub(r"<@\1>", escape(text))


def owners_line(owners: Sequence[str]) -> str:
    """Mentions, capped so a long list never cuts one in half at Slack's field limit."""
    shown = [mention(clip(owner, 40)) for owner in owners[:MAX_OWNERS_SHOWN]]
    more = len(owners) - len(shown)
    return (", ".join(shown) or "nobody") + (f" and {more} more" if more > 0 else "")


def _pipeline_icon(state: str) -> str:
    return _PIPELINE_ICON.get(state, ":grey_question:")


def _next_run(view: PipelineView) -> str:
    if view.state == "paused":
        return f"paused (`/replay resume {escape(view.pipeline_id)}`)"
    if view.state == "archived":
        return "never (unscheduled)"
    return when(view.next_run_at)


def _pipeline_fields(view: PipelineView) -> dict[str, Any]:
    committed = code(view.watermark) if view.watermark else "nothing yet"
    return _fields(
        [
            ("Source", escape(view.source)),
            ("Schedule", code(view.schedule)),
            ("Watermark column", f"{code(view.watermark_column)} (committed: {committed})"),
            ("Target topic", code(view.topic, limit=300)),
            ("Rate", f"{view.tps:,}/s"),
            ("Owners", owners_line(view.owners)),
            ("Next run", _next_run(view)),
            ("State", f"{_pipeline_icon(view.state)} {escape(view.state)}"),
        ]
    )


def _pipeline_title(view: PipelineView) -> str:
    return f"Pipeline {view.pipeline_id} · {view.source} · {view.schedule}"


def _pipeline_text(view: PipelineView) -> str:
    return (
        f"{_pipeline_icon(view.state)} Pipeline {view.pipeline_id}: {escape(clip(view.source, 80))} "
        f"{escape(clip(view.schedule, 130))} watermark={escape(clip(view.watermark_column, 130))} "
        f"→ {escape(clip(view.topic, 300))} at {view.tps:,}/s; next run {_next_run(view)}"
    )


def pipeline_summary(view: PipelineView) -> Message:
    """The channel message of a new pipeline: its runs reply in its thread."""
    pid = escape(view.pipeline_id)
    footer = (
        f"Each run that publishes or fails reports in this thread · `/replay pipeline {pid}` · "
        f"`/replay pause {pid}` · `/replay unschedule {pid}`"
    )
    return _message(
        _pipeline_text(view), _header(_pipeline_title(view)), _pipeline_fields(view), _context(footer)
    )


def pipeline_scheduled_reply(view: PipelineView, *, announced: bool) -> Message:
    """The requester's ephemeral answer: the id, the next run, where the runs will report."""
    where = (
        "Its runs report in this channel, in the pipeline's thread."
        if announced
        else f"Follow it with `/replay pipeline {escape(view.pipeline_id)}`."
    )
    text = (
        f":calendar: Scheduled as `{escape(view.pipeline_id)}`: {escape(clip(view.source, 80))} "
        f"{code(view.schedule)} → {code(view.topic, limit=300)}. Next run: {_next_run(view)}. {where}"
    )
    return _message(text, _section(text), _pipeline_fields(view))


def pipeline_changed(view: PipelineView, action: str) -> Message:
    """After pause / resume: what it means for the next run."""
    pid = escape(view.pipeline_id)
    if view.state == "paused":
        text = f":double_vertical_bar: Paused `{pid}`: no runs until `/replay resume {pid}`."
    else:
        text = f":arrow_forward: {escape(action.capitalize())}d `{pid}`: next run {_next_run(view)}."
    return _message(text, _section(text))


def pipeline_line(view: PipelineView, *, deadline: datetime | None = None) -> str:
    line = (
        f"{_pipeline_icon(view.state)} `{escape(view.pipeline_id)}` {escape(clip(view.source, 80))} "
        f"{code(view.schedule, limit=60)} → {code(view.topic, limit=100)} · {escape(view.state)}"
    )
    if deadline is not None:
        line += f" · removed after {when(deadline)} unless kept"
    elif view.state == "active":
        line += f" · next run {when(view.next_run_at)}"
    return clip(line, 400)


def pipeline_list(pipelines: Sequence[Mapping[str, Any]], title: str) -> Message:
    """`/replay pipelines [mine|idle]`; idle entries (with `deadline`) say when they go."""
    if not pipelines:
        return notice(f"No pipelines ({escape(title)}).")
    shown = [
        pipeline_line(PipelineView.of_api(p), deadline=_parse_time(p.get("deadline")))
        for p in pipelines[:MAX_LISTED_PIPELINES]
    ]
    more = len(pipelines) - len(shown)
    body = "\n".join(shown) + (f"\n…and {more} more" if more > 0 else "")
    text = f"*Pipelines ({escape(title)})*\n{body}"
    return _message(text, _section(text))


def pipeline_detail(detail: Mapping[str, Any]) -> Message:
    """`/replay pipeline <id>`: the summary, then its last runs."""
    view = PipelineView.of_api(detail)
    runs = detail.get("runs") or []
    lines = [run_line(run) for run in runs[:MAX_DETAIL_RUNS]]
    last = "*Last runs*\n" + ("\n".join(lines) if lines else "no runs yet")
    published = when(view.last_published_at, "never")
    return _message(
        _pipeline_text(view),
        _header(_pipeline_title(view)),
        _pipeline_fields(view),
        _section(last),
        _context(f"Last published: {published} · created {when(view.created_at)}"),
    )


def _buttons(block_id: str, *buttons: tuple[str, str, str, str | None]) -> dict[str, Any]:
    """An actions block; each button is (action_id, label, value, style or None)."""
    elements = []
    for action_id, label_text, value, style in buttons:
        if len(value) > MAX_BUTTON_VALUE:
            raise ValueError(f"button value is {len(value)} characters; Slack allows {MAX_BUTTON_VALUE}")
        button = {
            "type": "button",
            "action_id": action_id,
            "value": value,
            "text": {"type": "plain_text", "text": clip(label_text, 75)},
        }
        elements.append({**button, "style": style} if style else button)
    return {"type": "actions", "block_id": block_id, "elements": elements}


def live_schedule_confirmation(
    schedule: Mapping[str, Any], *, live_topic: str, value: str, expires_in_s: float
) -> Message:
    """Buttons before a pipeline may publish into a live topic on every run; nothing exists yet."""
    rate = f"{schedule['tps']:,}/s" if schedule.get("tps") else "the platform default"
    every = schedule.get("every")
    when_text = f"every={every}" if every else f"cron={schedule.get('cron')}"
    warning = (
        f":warning: This pipeline publishes into the *live* topic {code(live_topic, limit=300)} on every run "
        f"({code(when_text)}): every consumer of it sees the new rows of "
        f"{escape(clip(str(schedule['source']), 80))}. Confirm within {human_duration(expires_in_s)}."
    )
    fields = _fields(
        [
            ("Source", escape(str(schedule["source"]))),
            ("Schedule", code(when_text)),
            ("Watermark column", code(str(schedule["watermark"]))),
            ("Target topic", f"{code(live_topic, limit=300)} (live)"),
            ("Rate", rate),
        ]
    )
    actions = _buttons(
        "pipeline_live",
        (SCHEDULE_LIVE_CONFIRM_ACTION, "Schedule into the live topic", value, "danger"),
        (SCHEDULE_LIVE_CANCEL_ACTION, "Cancel", value, None),
    )
    return _message(warning, _section(warning), fields, actions)


def unschedule_confirmation(view: PipelineView, *, value: str, expires_in_s: float) -> Message:
    pid = escape(view.pipeline_id)
    text = (
        f":warning: Unschedule `{pid}` ({escape(clip(view.source, 80))} {code(view.schedule)})? "
        f"It stops for good: no more runs (its history stays). Answer within {human_duration(expires_in_s)}."
    )
    actions = _buttons(
        "pipeline_unschedule",
        (UNSCHEDULE_CONFIRM_ACTION, "Unschedule", value, "danger"),
        (UNSCHEDULE_KEEP_ACTION, "Keep it", value, None),
    )
    return _message(text, _section(text), _pipeline_fields(view), actions)


def unscheduled(view: PipelineView) -> Message:
    return notice(
        f":file_cabinet: Unscheduled `{escape(view.pipeline_id)}`: no more runs. "
        "Its run history stays (`/replay pipeline " + escape(view.pipeline_id) + "`)."
    )


# --- a pipeline run, in its pipeline's thread -------------------------------------------------------------


def watermark_high(window: str) -> str | None:
    """The upper bound of a pipeline run's range label `(low, high]`; None for anything else."""
    found = _WATERMARK_RANGE.fullmatch(window)
    return found["high"] if found else None


def _pipeline_next_step(run: RunView) -> str:
    reason = (run.reason or "").lower()
    pid = escape(run.pipeline_id or "")
    retry = "the watermark did not move, so the next scheduled run sends this range again"
    if "launch" in reason or "spark" in reason:
        return f"the job never started: ask the platform team to check the launcher; {retry}"
    if any(word in reason for word in ("broker", "kafka", "timed out", "timeout", "delivery")):
        return f"check the cluster; {retry} (duplicates keep their event ids)"
    return f"see `/replay pipeline {pid}`; {retry} (`/replay pause {pid}` holds it meanwhile)"


def pipeline_run_line(run: RunView) -> Message:
    """One line per reported run in the pipeline's thread: what landed, or why not and what next."""
    head = f"{escape(run.pipeline_id or '')} run {escape(run.run_id)}"
    if run.state == "succeeded":
        high = watermark_high(run.window)
        moved = f" (watermark → {escape(clip(high, 120))})" if high else ""
        text = f":white_check_mark: {head}: {count(run.confirmed)} events confirmed{moved}"
    elif run.state == "cancelled":
        text = (
            f":no_entry_sign: {head} was cancelled after {count(run.confirmed)} events were confirmed; "
            "the watermark did not move, so the next run sends them again"
        )
    elif run.state == "failed":
        reason = escape(clip(run.reason or "no reason was reported", 800))
        text = (
            f":x: {head} failed after {count(run.confirmed)} events were confirmed: {reason}\n"
            f"*Next step:* {_pipeline_next_step(run)}"
        )
    else:
        text = f"{_icon(run.state)} {head}: {escape(run.state)} ({escape(clip(run.reason or '', 300))})"
    return _message(text, _section(text))


# --- idle pipelines: the janitor's question and farewell ---------------------------------------------------


def idle_button_value(pipeline_id: str, days: int | None = None) -> str:
    """`p-…` (Delete now) or `p-…:N` (Keep for N more days): all a click needs, nothing to trust."""
    return pipeline_id if days is None else f"{pipeline_id}:{days}"


def read_idle_button(value: str) -> tuple[str, int | None]:
    """The pipeline id and the days in a button value we wrote; ValueError for anything else."""
    pipeline_id, _, days = value.partition(":")
    if not _PIPELINE_ID.fullmatch(pipeline_id) or (days and not days.isdigit()):
        raise ValueError(f"not an idle-pipeline button value: {value[:80]!r}")
    return pipeline_id, int(days) if days else None


def _route(view: PipelineView) -> str:
    return f"{escape(clip(view.source, 80))} {code(view.schedule, limit=60)} → {code(view.topic, limit=200)}"


def _about(view: PipelineView) -> str:
    return f"`{escape(view.pipeline_id)}` ({_route(view)})"


def idle_prompt(
    view: PipelineView,
    *,
    idle_since: datetime,
    deadline: datetime,
    keep_days: int,
    owner: str | None = None,
) -> Message:
    """Keep or delete an idle pipeline; `owner` is mentioned when the DM failed and a channel got it."""
    to = f"{mention(owner)}: " if owner else ""
    if view.last_published_at is not None:
        last = f"It last published on {when(view.last_published_at)}"
    else:
        last = f"It has never published anything since it was created on {when(view.created_at)}"
    text = (
        f":zzz: {to}Pipeline {_about(view)} is idle (since {when(idle_since)}). {last}. "
        f"Unless an owner keeps it, it is de-provisioned after *{when(deadline)}*: its schedule stops and "
        "its own topic is deleted (a live topic never is)."
    )
    actions = _buttons(
        "idle_pipeline",
        (
            IDLE_KEEP_ACTION,
            f"Keep for {keep_days} more days",
            idle_button_value(view.pipeline_id, keep_days),
            "primary",
        ),
        (IDLE_DELETE_ACTION, "Delete now", idle_button_value(view.pipeline_id), "danger"),
    )
    return _message(text, _section(text), _pipeline_fields(view), actions)


def pipeline_removed(
    view: PipelineView, *, removed: Sequence[str], reason: str, owner: str | None = None
) -> Message:
    """The farewell: what was removed and why; the run history stays."""
    to = f"{mention(owner)}: " if owner else ""
    why = escape_keeping_mentions(clip(reason, 500))  # first, so clipping the text never cuts a mention
    what = ", ".join(escape(clip(item, 300)) for item in removed[:10]) or "nothing"
    text = (
        f":wastebasket: {to}Pipeline `{escape(view.pipeline_id)}` was removed ({why}). Removed: {what}. "
        f"It ran {_route(view)}; its run history stays: `/replay pipeline {escape(view.pipeline_id)}`."
    )
    return _message(text, _section(text))


def kept(pipeline_id: str, days: int | None) -> Message:
    span = f"{days} more days" if days else "a while longer"
    return notice(
        f":pushpin: Kept `{escape(pipeline_id)}` for {span}. If it still publishes nothing by then, "
        "its owners are asked again."
    )


def deleted(view: PipelineView) -> Message:
    return notice(
        f":wastebasket: Deleted `{escape(view.pipeline_id)}` now: its schedule is gone and its own topic "
        "deleted (a live topic is kept); its run history stays."
    )


def already_removed(pipeline_id: str) -> Message:
    return notice(
        f":ok_hand: Pipeline `{escape(pipeline_id)}` was already removed; this click changed nothing."
    )

"""The janitor's messages about an idle pipeline: the question to its owners (Keep / Delete now),
the farewell once it is de-provisioned, and the bot's answers to the two buttons. "Delete now" carries
Slack's confirm dialog: the click reaches the bot only once the clicker confirmed it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from daemon.core.ids import PIPELINE_ID_PATTERN
from daemon.slack.blocks import (
    Message,
    buttons,
    clip,
    code,
    escape,
    escape_keeping_mentions,
    fit,
    mention,
    message,
    notice,
    section,
    sections,
    when,
)
from daemon.slack.pipeline_messages import pipeline_fields
from daemon.slack.views import PipelineView

IDLE_KEEP_ACTION = "idle_keep"
IDLE_DELETE_ACTION = "idle_delete"


def idle_button_value(pipeline_id: str, days: int | None = None) -> str:
    """`p-…` (Delete now) or `p-…:N` (Keep for N more days): all a click needs, nothing to trust."""
    return pipeline_id if days is None else f"{pipeline_id}:{days}"


def read_idle_button(value: str) -> tuple[str, int | None]:
    """The pipeline id and the days in a button value we wrote; ValueError for anything else."""
    pipeline_id, _, days = value.partition(":")
    if not PIPELINE_ID_PATTERN.fullmatch(pipeline_id) or (days and not days.isdigit()):
        raise ValueError(f"not an idle-pipeline button value: {value[:80]!r}")
    return pipeline_id, int(days) if days else None


def delete_confirmation(pipeline_id: str) -> dict[str, Any]:
    """Slack's confirm object for "Delete now": a second, deliberate click."""
    return {
        "title": {"type": "plain_text", "text": "Delete this pipeline now?"},
        "text": {
            "type": "mrkdwn",
            "text": (
                f"`{escape(pipeline_id)}` is paused, its running replay (if any) cancelled, and its own "
                "topic deleted. This cannot be undone; its run history stays."
            ),
        },
        "confirm": {"type": "plain_text", "text": "Delete now"},
        "deny": {"type": "plain_text", "text": "Cancel"},
        "style": "danger",
    }


def _route(view: PipelineView) -> str:
    return f"{escape(clip(view.source, 80))} {code(view.schedule, limit=60)} → {code(view.topic, limit=200)}"


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
        f":zzz: {to}Pipeline `{escape(view.pipeline_id)}` ({_route(view)}) is idle "
        f"(since {when(idle_since)}). {last}. Unless an owner keeps it, it is de-provisioned after "
        f"*{when(deadline)}*: it is paused, a running replay of it cancelled, and its own topic deleted "
        "(a live topic never is)."
    )
    actions = buttons(
        "idle_pipeline",
        (
            IDLE_KEEP_ACTION,
            f"Keep for {keep_days} more days",
            idle_button_value(view.pipeline_id, keep_days),
            "primary",
        ),
        (IDLE_DELETE_ACTION, "Delete now", idle_button_value(view.pipeline_id), "danger"),
    )
    for button in actions["elements"]:
        if button["action_id"] == IDLE_DELETE_ACTION:
            button["confirm"] = delete_confirmation(view.pipeline_id)
    return message(text, section(text), pipeline_fields(view), actions)


def pipeline_removed(
    view: PipelineView, *, removed: Sequence[str], reason: str, owner: str | None = None
) -> Message:
    """The farewell: what was removed and why; the run history stays."""
    to = f"{mention(owner)}: " if owner else ""
    why = fit(escape_keeping_mentions(reason), 500)  # a cut never falls inside a mention
    what = ", ".join(escape(clip(item, 300)) for item in removed[:10]) or "nothing"
    text = (
        f":wastebasket: {to}Pipeline `{escape(view.pipeline_id)}` was removed ({why}). Removed: {what}. "
        f"It ran {_route(view)}; its run history stays: `/replay pipeline {escape(view.pipeline_id)}`."
    )
    return message(text, *sections(text))


def kept(pipeline_id: str, days: int | None) -> Message:
    span = f"{days} more days" if days else "a while longer"
    return notice(
        f":pushpin: Kept `{escape(pipeline_id)}` for {span}. If it still publishes nothing by then, "
        "its owners are asked again."
    )


def deleted(view: PipelineView) -> Message:
    if view.state != "archived":  # paused; its run is still stopping, the janitor's next pass goes on
        return notice(
            f":hourglass_flowing_sand: Deleting `{escape(view.pipeline_id)}`: it is paused and its running "
            "replay is being stopped; its topic is deleted once the replay has stopped."
        )
    return notice(
        f":wastebasket: Deleted `{escape(view.pipeline_id)}` now: its schedule is gone, a running replay "
        "cancelled and its own topic deleted (a live topic is kept); its run history stays."
    )


def already_removed(pipeline_id: str) -> Message:
    return notice(
        f":ok_hand: Pipeline `{escape(pipeline_id)}` was already removed; this click changed nothing."
    )

"""The janitor's question about an idle pipeline: *Keep for N more days* / *Delete now*.

The prompt is posted by the daemon (a DM, or the platform channel when the DM could not be delivered),
so anyone who sees it might click: the daemon decides who may (owners and admins) and the clicker is the
actor it judges. A refused click, or one that could not reach the daemon, gets an ephemeral answer and
leaves the prompt in place for the owner; a click that went through replaces the prompt with what
happened. A click on a pipeline already de-provisioned (a second click, another owner's answer, the
deadline passing) is a 409 from the daemon, answered with a harmless "already removed"; a Delete the
daemon refuses for another reason (the pipeline is no longer idle) is shown as the refusal it is.
"Delete now" carries Slack's confirm dialog, so its click is the confirmation the daemon requires.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, Respond

from bot.deps import BotDeps
from bot.replies import outcome_of
from daemon.core.errors import Conflict
from daemon.slack.blocks import Message, refusal
from daemon.slack.idle_messages import (
    IDLE_DELETE_ACTION,
    IDLE_KEEP_ACTION,
    already_removed,
    deleted,
    kept,
    read_idle_button,
)
from daemon.slack.views import PipelineView


def _keep(deps: BotDeps, clicker: str, pipeline_id: str, days: int | None) -> Message:
    deps.daemon.keep(clicker, pipeline_id, days)
    return kept(pipeline_id, days)


def _delete(deps: BotDeps, clicker: str, pipeline_id: str) -> Message:
    return deleted(PipelineView.of(deps.daemon.delete_now(clicker, pipeline_id, confirm=True)))


def _already_removed(deps: BotDeps, clicker: str, pipeline_id: str) -> bool:
    return deps.daemon.get_pipeline(clicker, pipeline_id).state == "archived"


def on_click(deps: BotDeps, body: dict[str, Any], respond: Respond, *, keep: bool) -> None:
    clicker = body["user"]["id"]
    try:
        pipeline_id, days = read_idle_button(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return

    def work() -> Message:
        try:
            return _keep(deps, clicker, pipeline_id, days) if keep else _delete(deps, clicker, pipeline_id)
        except Conflict:
            if _already_removed(deps, clicker, pipeline_id):
                return already_removed(pipeline_id)
            raise

    message, done = outcome_of(work)
    if done:
        respond(**message.payload(replace_original=True))
    else:
        respond(**message.ephemeral(replace_original=False))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def keep_pipeline(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, keep=True)

    def delete_pipeline(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, keep=False)

    app.action(IDLE_KEEP_ACTION)(ack=ack_click, lazy=[keep_pipeline])
    app.action(IDLE_DELETE_ACTION)(ack=ack_click, lazy=[delete_pipeline])

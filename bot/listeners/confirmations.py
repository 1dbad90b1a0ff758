"""`topic=live`: nothing is published until the requester presses *Publish to live topic*.

`ask` (called after the slash command's ack) plans the replay and shows the plan with two buttons.
A click is acked at once; the lazy half checks who clicked and when, then creates the run with
`confirm_live=True` and an Idempotency-Key derived from the confirmation, and replaces the buttons
with the outcome. A second click gets the first run back from the daemon (and says so); a click
by anyone else, or after the confirmation expired, starts nothing and says why.
"""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, Respond

from bot.confirmation import LiveRequest
from bot.deps import BotDeps
from bot.replies import answer_with, create_once, key_for
from daemon.cli.main import request_body
from daemon.core.grammar import USAGE, GrammarError, ReplayCommand, parse, render
from daemon.core.quantities import render_duration
from daemon.slack import messages as slack_blocks


def ask(deps: BotDeps, parsed: ReplayCommand, command: dict[str, Any]) -> slack_blocks.Message:
    """The plan and the buttons; the daemon is only asked to plan, so nothing can start yet."""
    user = command["user_id"]
    plan = deps.daemon.plan(user, request_body(parsed))
    request = LiveRequest(
        command=render(parsed),
        requester=user,
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
    )
    value = request.encode()
    if len(value) > slack_blocks.MAX_BUTTON_VALUE:
        return slack_blocks.refusal("this command is too long for a confirmation button; shorten its headers")
    return slack_blocks.live_confirmation(plan, value=value, expires_in_s=deps.confirm_ttl_s)


def _launch(deps: BotDeps, request: LiveRequest) -> slack_blocks.Message:
    parsed = parse(request.command)
    if not isinstance(parsed, ReplayCommand):
        raise GrammarError("this confirmation does not hold a replay")
    body = {**request_body(parsed), "confirm_live": True, "slack_channel": request.channel or None}
    run = create_once(deps.daemon, request.requester, body, key=request.idempotency_key())
    if run.get("created", True):
        return slack_blocks.accepted(run, created=True)
    return slack_blocks.notice(
        f":repeat: Already published from this confirmation as `{slack_blocks.escape(run['id'])}` "
        f"({slack_blocks.escape(run['state'])}); this click started nothing new."
    )


def on_click(deps: BotDeps, body: dict[str, Any], respond: Respond, *, publish: bool) -> None:
    clicker = body["user"]["id"]
    try:
        request = LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**slack_blocks.refusal("this button is not one of ours").ephemeral(replace_original=False))
        return
    if clicker != request.requester:
        note = f":no_entry: Only {slack_blocks.mention(request.requester)} can answer this confirmation."
        respond(**slack_blocks.notice(note).ephemeral(replace_original=False))
        return
    if not publish:
        message = slack_blocks.notice(
            ":no_entry_sign: Dismissed: nothing will be published from this confirmation "
            "(a run you already confirmed keeps going: `/replay list mine`)."
        )
    elif request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        message = slack_blocks.notice(
            f":hourglass: This confirmation expired (after {ttl}); nothing was published. "
            f"Run `/replay {slack_blocks.escape(request.command)}` again."
        )
    else:
        message = answer_with(lambda: _launch(deps, request), usage=USAGE["replay"])
    respond(**message.ephemeral(replace_original=True))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def publish_live(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, publish=True)

    def dismiss_live(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, publish=False)

    app.action(slack_blocks.CONFIRM_ACTION)(ack=ack_click, lazy=[publish_live])
    app.action(slack_blocks.CANCEL_ACTION)(ack=ack_click, lazy=[dismiss_live])

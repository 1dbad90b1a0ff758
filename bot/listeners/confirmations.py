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
from daemon.contract.models import ReplayBody
from daemon.core.grammar import USAGE, GrammarError, ReplayCommand, parse, render
from daemon.core.quantities import render_duration
from daemon.slack.blocks import MAX_BUTTON_VALUE, Message, escape, mention, notice, refusal
from daemon.slack.run_messages import CANCEL_ACTION, CONFIRM_ACTION, accepted, live_confirmation


def ask(deps: BotDeps, parsed: ReplayCommand, command: dict[str, Any]) -> Message:
    """The plan and the buttons; the daemon is only asked to plan, so nothing can start yet."""
    user = command["user_id"]
    plan = deps.daemon.plan(user, ReplayBody.of(parsed))
    request = LiveRequest(
        command=render(parsed),
        requester=user,
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
    )
    value = request.encode()
    if len(value) > MAX_BUTTON_VALUE:
        return refusal("this command is too long for a confirmation button; shorten its headers")
    return live_confirmation(plan, value=value, expires_in_s=deps.confirm_ttl_s)


def _launch(deps: BotDeps, request: LiveRequest) -> Message:
    parsed = parse(request.command)
    if not isinstance(parsed, ReplayCommand):
        raise GrammarError("this confirmation does not hold a replay")
    body = ReplayBody.of(parsed, confirm_live=True, slack_channel=request.channel or None)
    run = create_once(deps.daemon, request.requester, body, key=request.idempotency_key())
    if run.created:
        return accepted(run, created=True)
    return notice(
        f":repeat: Already published from this confirmation as `{escape(run.id)}` "
        f"({escape(run.state)}); this click started nothing new."
    )


def on_click(deps: BotDeps, body: dict[str, Any], respond: Respond, *, publish: bool) -> None:
    clicker = body["user"]["id"]
    try:
        request = LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return
    if clicker != request.requester:
        note = f":no_entry: Only {mention(request.requester)} can answer this confirmation."
        respond(**notice(note).ephemeral(replace_original=False))
        return
    if not publish:
        message = notice(
            ":no_entry_sign: Dismissed: nothing will be published from this confirmation "
            "(a run you already confirmed keeps going: `/replay list mine`)."
        )
    elif request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        message = notice(
            f":hourglass: This confirmation expired (after {ttl}); nothing was published. "
            f"Run `/replay {escape(request.command)}` again."
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

    app.action(CONFIRM_ACTION)(ack=ack_click, lazy=[publish_live])
    app.action(CANCEL_ACTION)(ack=ack_click, lazy=[dismiss_live])

"""`topic=live`: nothing is published until the requester presses *Publish to live topic*.

`ask` (called after the slash command's ack) plans the replay and shows the plan with two buttons.
A click is acked at once; the lazy half checks who clicked and when, then creates the run with
`confirm_live=True` and an Idempotency-Key derived from the confirmation, and replaces the buttons
with the outcome. A second click gets the first run back from the daemon (and says so); a click
by anyone else, or after the confirmation expired, starts nothing and says why.

A source with `live_approvals: 2` takes one more step: the requester's click posts an approval request
in the channel (not ephemeral: the incident room sees it), and the click of another owner creates the
run with `approved_by`. The requester's own click is refused here; the daemon refuses (and audits)
anyone who is not an owner. A window that overlaps a going or recent live replay is refused at once,
unless `force=yes`, and then the prompt names the run it overrides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from bot.confirmation import LiveRequest
from bot.deps import BotDeps
from bot.replies import answer_with, key_for
from daemon.contract.commands import LiveReplayToConfirm, refuse_overlap
from daemon.contract.models import ReplayBody, RunCreated
from daemon.core.grammar import CEILINGS, USAGE, GrammarError, ReplayCommand, parse, render
from daemon.core.quantities import render_duration
from daemon.slack.blocks import MAX_BUTTON_VALUE, Message, escape, mention, notice, refusal
from daemon.slack.run_messages import (
    APPROVE_ACTION,
    CANCEL_ACTION,
    CONFIRM_ACTION,
    accepted,
    live_approval_request,
    live_confirmation,
)


def ask(deps: BotDeps, result: LiveReplayToConfirm, command: dict[str, Any]) -> Message:
    """The plan and the buttons; the daemon was only asked to plan, so nothing can start yet."""
    request = LiveRequest(
        command=render(result.command),
        requester=command["user_id"],
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
        approvals=result.plan.live_approvals,
    )
    value = request.encode()
    if len(value) > MAX_BUTTON_VALUE:
        return refusal("this command is too long for a confirmation button; shorten its headers")
    return live_confirmation(result.plan, value=value, expires_in_s=deps.confirm_ttl_s)


def _replay_of(request: LiveRequest) -> ReplayCommand:
    parsed = parse(request.command, CEILINGS)  # checked against the limits when it was typed
    if not isinstance(parsed, ReplayCommand):
        raise GrammarError("this confirmation does not hold a replay")
    return parsed


def _create(deps: BotDeps, request: LiveRequest, approved_by: str | None = None) -> RunCreated:
    """The confirmed run (the client retries it with the confirmation's key: a double click is one run)."""
    body = ReplayBody.of(
        _replay_of(request), confirm_live=True, approved_by=approved_by, slack_channel=request.channel or None
    )
    return deps.daemon.create_replay(request.requester, body, idempotency_key=request.idempotency_key())


def _already(run: RunCreated) -> Message:
    return notice(
        f":repeat: Already published from this confirmation as `{escape(run.id)}` "
        f"({escape(run.state)}); this click started nothing new."
    )


def _launch(deps: BotDeps, request: LiveRequest) -> Message:
    run = _create(deps, request)
    return accepted(run, created=True) if run.created else _already(run)


def _ask_for_approval(deps: BotDeps, request: LiveRequest, client: WebClient) -> Message:
    """Post the approval request in the channel; the requester is told where it went."""
    parsed = _replay_of(request)
    plan = deps.daemon.plan(request.requester, ReplayBody.of(parsed))
    refuse_overlap(plan, parsed)
    if not request.channel:
        return notice(":no_entry: No channel to ask for approval in; nothing was published.")
    asked = replace(request, issued_at=int(deps.clock()))
    prompt = live_approval_request(
        plan, requester=request.requester, value=asked.encode(), expires_in_s=deps.confirm_ttl_s
    )
    try:
        client.chat_postMessage(channel=request.channel, **prompt.payload())
    except SlackClientError as exc:
        return notice(
            f":electric_plug: Could not post the approval request in the channel ({escape(str(exc))}); "
            "nothing was published. Invite the app to the channel, then run the command again."
        )
    return notice(
        ":raised_hand: Asked in the channel: another owner of the source must approve; "
        "nothing is published until then."
    )


def _request_of(body: dict[str, Any], respond: Respond) -> LiveRequest | None:
    """The confirmation a button carries, or None after telling the clicker it is not one of ours."""
    try:
        return LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return None


def on_click(
    deps: BotDeps, body: dict[str, Any], respond: Respond, *, publish: bool, client: WebClient | None = None
) -> None:
    clicker = body["user"]["id"]
    request = _request_of(body, respond)
    if request is None:
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
    elif request.approvals > 1 and client is not None:
        message = answer_with(lambda: _ask_for_approval(deps, request, client), usage=USAGE["replay"])
    else:
        message = answer_with(lambda: _launch(deps, request), usage=USAGE["replay"])
    respond(**message.ephemeral(replace_original=True))


def on_approve(deps: BotDeps, body: dict[str, Any], respond: Respond) -> None:
    """A click on the channel's approval request: another owner's launches, anyone else's is refused."""
    clicker = body["user"]["id"]
    request = _request_of(body, respond)
    if request is None:
        return
    if clicker == request.requester:
        note = ":no_entry: You asked for this replay; another owner of the source must approve it."
        respond(**notice(note).ephemeral(replace_original=False))
        return
    if request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        expired = notice(
            f":hourglass: This approval request expired (after {ttl}); nothing was published. "
            f"{mention(request.requester)} can run `/replay {escape(request.command)}` again."
        )
        respond(**expired.payload(response_type="in_channel", replace_original=True))
        return
    created: list[bool] = []

    def approve() -> Message:
        run = _create(deps, request, approved_by=clicker)
        created.append(run.created)
        if not run.created:
            return _already(run)
        launched = accepted(run, created=True).text
        return notice(f":white_check_mark: Approved by {mention(clicker)}. {launched}")

    message = answer_with(approve, usage=USAGE["replay"])
    if created == [True]:  # the channel sees the outcome; a refusal or a repeat is for the clicker only
        respond(**message.payload(response_type="in_channel", replace_original=True))
    else:
        respond(**message.ephemeral(replace_original=False))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def publish_live(body: dict[str, Any], respond: Respond, client: WebClient) -> None:
        on_click(deps, body, respond, publish=True, client=client)

    def approve_live(body: dict[str, Any], respond: Respond) -> None:
        on_approve(deps, body, respond)

    def dismiss_live(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, publish=False)

    app.action(CONFIRM_ACTION)(ack=ack_click, lazy=[publish_live])
    app.action(CANCEL_ACTION)(ack=ack_click, lazy=[dismiss_live])
    app.action(APPROVE_ACTION)(ack=ack_click, lazy=[approve_live])

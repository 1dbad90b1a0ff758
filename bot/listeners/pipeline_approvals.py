"""The second owner's step for live pipelines of a source with `live_approvals: 2`.

A pipeline into the live topic publishes on every run, so it gets the replay's rule: the requester's
confirmation of `schedule … topic=live`, and `resume` of such a paused pipeline, post an approval
request in the channel (the incident room sees it), and only another owner's click creates or resumes
it, with that owner as `approved_by`. The button carries a `LiveRequest` (the canonical command), so a
click needs no state in the bot; the requester's own click is refused here, anyone else who is not an
owner by the daemon (which audits both).
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
from daemon.contract.commands import LiveResumeToApprove
from daemon.contract.models import ScheduleBody
from daemon.core.grammar import CEILINGS, USAGE, ResumeCommand, ScheduleCommand, parse, render
from daemon.core.quantities import render_duration
from daemon.slack.blocks import Message, escape, mention, notice, refusal
from daemon.slack.pipeline_messages import (
    PIPELINE_LIVE_APPROVE_ACTION,
    live_pipeline_approval_request,
    pipeline_changed,
    pipeline_scheduled_reply,
)
from daemon.slack.views import PipelineView


def ask_in_channel(
    deps: BotDeps,
    request: LiveRequest,
    client: WebClient | None,
    *,
    asks: str,
    source: str,
    live_topic: str,
) -> Message:
    """Post the approval request in the requester's channel; the requester is told where it went."""
    if client is None or not request.channel:
        return notice(":no_entry: No channel to ask for approval in; nothing was changed.")
    asked = replace(request, issued_at=int(deps.clock()), approvals=2)
    prompt = live_pipeline_approval_request(
        asks=asks,
        source=source,
        live_topic=live_topic,
        requester=request.requester,
        value=asked.encode(),
        expires_in_s=deps.confirm_ttl_s,
    )
    try:
        client.chat_postMessage(channel=request.channel, **prompt.payload())
    except SlackClientError as exc:
        return notice(
            f":electric_plug: Could not post the approval request in the channel ({escape(str(exc))}); "
            "nothing was changed. Invite the app to the channel, then run the command again."
        )
    return notice(
        ":raised_hand: Asked in the channel: another owner of the source must approve; "
        "nothing is changed until then."
    )


def ask_resume(
    deps: BotDeps, result: LiveResumeToApprove, command: dict[str, Any], client: WebClient | None
) -> Message:
    """`/replay resume p-…` of a live pipeline of a two-owner source: ask a second owner first."""
    request = LiveRequest(
        command=render(result.command),
        requester=command["user_id"],
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
        approvals=2,
    )
    asks = f"to resume pipeline `{escape(result.command.pipeline_id)}`"
    return ask_in_channel(
        deps, request, client, asks=asks, source=result.pipeline.source, live_topic=result.live_topic
    )


def ask_schedule(deps: BotDeps, request: LiveRequest, client: WebClient | None) -> Message:
    """The requester confirmed `schedule … topic=live` of a two-owner source: ask a second owner."""
    parsed = parse(request.command, CEILINGS)
    if not isinstance(parsed, ScheduleCommand):
        return refusal("this confirmation does not hold a schedule")
    live_topic = next(
        (s.live_topic for s in deps.daemon.sources(request.requester) if s.name == parsed.source), None
    )
    if not live_topic:
        return refusal(f"source '{parsed.source}' has no live topic any more; nothing was scheduled")
    asks = f"to schedule `{escape(request.command)}`"
    return ask_in_channel(deps, request, client, asks=asks, source=parsed.source, live_topic=live_topic)


def _approved(deps: BotDeps, request: LiveRequest, approver: str) -> tuple[Message, bool]:
    """Create or resume the pipeline in the requester's name with ``approver``; (answer, changed)."""
    parsed = parse(request.command, CEILINGS)  # checked against the limits when it was typed
    if isinstance(parsed, ScheduleCommand):
        body = ScheduleBody.of(
            parsed, confirm_live=True, approved_by=approver, slack_channel=request.channel or None
        )
        pipeline, created = deps.daemon.schedule_once(
            request.requester, body, idempotency_key=request.idempotency_key()
        )
        if not created:
            return notice(f":repeat: Already scheduled from this request as `{escape(pipeline.id)}`."), False
        shown = pipeline_scheduled_reply(PipelineView.of(pipeline), announced=pipeline.slack_ts is not None)
        return notice(f":white_check_mark: Approved by {mention(approver)}. {shown.text}"), True
    if isinstance(parsed, ResumeCommand):
        pipeline = deps.daemon.pipeline_action(
            request.requester, parsed.pipeline_id, "resume", approved_by=approver
        )
        shown = pipeline_changed(PipelineView.of(pipeline), "resume")
        return notice(f":white_check_mark: Approved by {mention(approver)}. {shown.text}"), True
    return refusal("this approval does not hold a live pipeline"), False


def on_approve(deps: BotDeps, body: dict[str, Any], respond: Respond) -> None:
    """A click on the channel's approval request: another owner's goes ahead, anyone else's is refused."""
    clicker = body["user"]["id"]
    try:
        request = LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return
    if clicker == request.requester:
        note = ":no_entry: You asked for this; another owner of the source must approve it."
        respond(**notice(note).ephemeral(replace_original=False))
        return
    if request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        expired = notice(
            f":hourglass: This approval request expired (after {ttl}); nothing was changed. "
            f"{mention(request.requester)} can run `/replay {escape(request.command)}` again."
        )
        respond(**expired.payload(response_type="in_channel", replace_original=True))
        return
    changed: list[bool] = []

    def approve() -> Message:
        message, done = _approved(deps, request, clicker)
        changed.append(done)
        return message

    message = answer_with(approve, usage=USAGE["schedule"])
    if changed == [True]:  # the channel sees the outcome; a refusal or a repeat is for the clicker only
        respond(**message.payload(response_type="in_channel", replace_original=True))
    else:
        respond(**message.ephemeral(replace_original=False))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def approve(body: dict[str, Any], respond: Respond) -> None:
        on_approve(deps, body, respond)

    app.action(PIPELINE_LIVE_APPROVE_ACTION)(ack=ack_click, lazy=[approve])

"""`/replay schedule | pipelines | pipeline | pause | resume | unschedule`, and their buttons.

The daemon decides (owners and admins only, a schedule that parses, a real watermark column) and its
notifier posts the pipeline's summary in the channel, the thread its runs report in; the bot answers
the requester ephemerally. Two commands ask first, with buttons only the requester may press, for
`confirm_ttl_s`: a `topic=live` schedule (nothing exists before the click) and `unschedule` (nothing
stops before the click). Each button carries a `LiveRequest` (the canonical command, who, where, when),
so a click needs no state in the bot.

A second click is harmless. Unscheduling twice is a 409 from the daemon, shown as "already
unscheduled". Every create carries an Idempotency-Key, as a replay's does: a live-schedule click the one
derived from its confirmation, a plain `schedule` one from the slash command's trigger. The daemon gives
the first pipeline back to a second click, whichever bot replica it reaches.
"""

from __future__ import annotations

from typing import Any, TypeVar

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.confirmation import LiveRequest
from bot.deps import BotDeps
from bot.listeners import pipeline_approvals
from bot.replies import answer_with, key_for
from daemon.contract.commands import (
    IdlePipelinesListed,
    LiveScheduleToConfirm,
    PipelineChanged,
    PipelineShown,
    PipelinesListed,
    Scheduled,
    Unscheduled,
    UnscheduleToConfirm,
)
from daemon.contract.models import PipelineOut, ScheduleBody
from daemon.core.errors import Conflict
from daemon.core.grammar import (
    CEILINGS,
    USAGE,
    Command,
    GrammarError,
    ScheduleCommand,
    UnscheduleCommand,
    parse,
    render,
)
from daemon.core.quantities import render_duration
from daemon.slack.blocks import MAX_BUTTON_VALUE, Message, escape, mention, notice, refusal
from daemon.slack.pipeline_messages import (
    SCHEDULE_LIVE_CANCEL_ACTION,
    SCHEDULE_LIVE_CONFIRM_ACTION,
    UNSCHEDULE_CONFIRM_ACTION,
    UNSCHEDULE_KEEP_ACTION,
    live_schedule_confirmation,
    pipeline_changed,
    pipeline_detail,
    pipeline_list,
    pipeline_scheduled_reply,
    unschedule_confirmation,
    unscheduled,
)
from daemon.slack.views import PipelineView

_LIST_TITLES = {"all": "scheduled", "mine": "yours", "idle": "idle: de-provisioned unless kept"}

PipelineResult = (
    Scheduled
    | PipelinesListed
    | IdlePipelinesListed
    | PipelineShown
    | PipelineChanged
    | Unscheduled
    | LiveScheduleToConfirm
    | UnscheduleToConfirm
)
C = TypeVar("C", UnscheduleCommand, ScheduleCommand)


# --- commands ------------------------------------------------------------------------------------------


def _request(deps: BotDeps, parsed: Command, command: dict[str, Any], approvals: int = 1) -> LiveRequest:
    return LiveRequest(
        command=render(parsed),
        requester=command["user_id"],
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
        approvals=approvals,
    )


def _scheduled(pipeline: PipelineOut) -> Message:
    return pipeline_scheduled_reply(PipelineView.of(pipeline), announced=pipeline.slack_ts is not None)


def _ask_live(deps: BotDeps, result: LiveScheduleToConfirm, command: dict[str, Any]) -> Message:
    """The schedule and the buttons; only the catalog was read, so nothing can be created yet."""
    value = _request(deps, result.command, command, approvals=result.live_approvals).encode()
    if len(value) > MAX_BUTTON_VALUE:
        return refusal("this command is too long for a confirmation button; shorten its headers")
    return live_schedule_confirmation(
        ScheduleBody.of(result.command),
        live_topic=result.live_topic,
        value=value,
        expires_in_s=deps.confirm_ttl_s,
        approvals=result.live_approvals,
    )


def _ask_unschedule(deps: BotDeps, result: UnscheduleToConfirm, command: dict[str, Any]) -> Message:
    pipeline = PipelineView.of(result.pipeline)
    if pipeline.state == "archived":
        return notice(f"Pipeline `{result.command.pipeline_id}` is already unscheduled.")
    value = _request(deps, result.command, command).encode()
    return unschedule_confirmation(pipeline, value=value, expires_in_s=deps.confirm_ttl_s)


def message_for(deps: BotDeps, result: PipelineResult, command: dict[str, Any]) -> Message:
    """The answer to a pipeline command's result (from the shared command table)."""
    if isinstance(result, Scheduled):
        return _scheduled(result.pipeline)
    if isinstance(result, PipelinesListed):
        shown = [p for p in result.pipelines if p.state != "archived"]
        return pipeline_list(shown, _LIST_TITLES[result.filter])
    if isinstance(result, IdlePipelinesListed):
        return pipeline_list(list(result.pipelines), _LIST_TITLES["idle"])
    if isinstance(result, PipelineShown):
        return pipeline_detail(result.detail)
    if isinstance(result, PipelineChanged):
        return pipeline_changed(PipelineView.of(result.pipeline), result.action)
    if isinstance(result, Unscheduled):
        return unscheduled(PipelineView.of(result.pipeline))
    if isinstance(result, LiveScheduleToConfirm):
        return _ask_live(deps, result, command)
    return _ask_unschedule(deps, result, command)


# --- buttons -------------------------------------------------------------------------------------------


def _checked(deps: BotDeps, body: dict[str, Any], respond: Respond, *, confirm: bool) -> LiveRequest | None:
    """The request behind a click, if this clicker may answer it now; otherwise say why and None."""
    try:
        request = LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return None
    if body["user"]["id"] != request.requester:
        note = f":no_entry: Only {mention(request.requester)} can answer this confirmation."
        respond(**notice(note).ephemeral(replace_original=False))
        return None
    if confirm and request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        note = (
            f":hourglass: This confirmation expired (after {ttl}); nothing was changed. "
            f"Run `/replay {escape(request.command)}` again."
        )
        respond(**notice(note).ephemeral(replace_original=True))
        return None
    return request


def _parsed(request: LiveRequest, kind: type[C]) -> C:
    parsed = parse(request.command, CEILINGS)  # checked against the limits when it was typed
    if not isinstance(parsed, kind):
        raise GrammarError(f"this confirmation does not hold a {kind.__name__}")
    return parsed


def _unschedule(deps: BotDeps, request: LiveRequest) -> Message:
    parsed = _parsed(request, UnscheduleCommand)
    try:
        pipeline = deps.daemon.unschedule(request.requester, parsed.pipeline_id, confirm=True)
    except Conflict:  # archived already: a second click, or someone else got there first
        return notice(
            f":ok_hand: Pipeline `{parsed.pipeline_id}` is already unscheduled; this click changed nothing."
        )
    return unscheduled(PipelineView.of(pipeline))


def _keep_scheduled(_deps: BotDeps, request: LiveRequest) -> Message:
    pipeline_id = _parsed(request, UnscheduleCommand).pipeline_id
    return notice(f":ok_hand: Kept: `{pipeline_id}` stays scheduled; nothing changed.")


def _schedule_live(deps: BotDeps, request: LiveRequest) -> Message:
    parsed = _parsed(request, ScheduleCommand)
    body = ScheduleBody.of(parsed, confirm_live=True, slack_channel=request.channel or None)
    pipeline, created = deps.daemon.schedule_once(
        request.requester, body, idempotency_key=request.idempotency_key()
    )
    if not created:
        return notice(
            f":repeat: Already scheduled from this confirmation as `{escape(pipeline.id)}`; "
            "this click created nothing new."
        )
    return _scheduled(pipeline)


def on_unschedule_click(deps: BotDeps, body: dict[str, Any], respond: Respond, *, confirm: bool) -> None:
    request = _checked(deps, body, respond, confirm=confirm)
    if request is None:
        return
    work = _unschedule if confirm else _keep_scheduled
    message = answer_with(lambda: work(deps, request), usage=USAGE["unschedule"])
    respond(**message.ephemeral(replace_original=True))


def on_live_schedule_click(
    deps: BotDeps,
    body: dict[str, Any],
    respond: Respond,
    *,
    confirm: bool,
    client: WebClient | None = None,
) -> None:
    request = _checked(deps, body, respond, confirm=confirm)
    if request is None:
        return
    if confirm and request.approvals > 1:  # a two-owner source: another owner approves in the channel
        message = answer_with(
            lambda: pipeline_approvals.ask_schedule(deps, request, client), usage=USAGE["schedule"]
        )
    elif confirm:
        message = answer_with(lambda: _schedule_live(deps, request), usage=USAGE["schedule"])
    else:
        message = notice(":no_entry_sign: Dismissed: nothing was scheduled from this confirmation.")
    respond(**message.ephemeral(replace_original=True))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def unschedule(body: dict[str, Any], respond: Respond) -> None:
        on_unschedule_click(deps, body, respond, confirm=True)

    def keep_scheduled(body: dict[str, Any], respond: Respond) -> None:
        on_unschedule_click(deps, body, respond, confirm=False)

    def schedule_live(body: dict[str, Any], respond: Respond, client: WebClient) -> None:
        on_live_schedule_click(deps, body, respond, confirm=True, client=client)

    def dismiss_live(body: dict[str, Any], respond: Respond) -> None:
        on_live_schedule_click(deps, body, respond, confirm=False)

    app.action(UNSCHEDULE_CONFIRM_ACTION)(ack=ack_click, lazy=[unschedule])
    app.action(UNSCHEDULE_KEEP_ACTION)(ack=ack_click, lazy=[keep_scheduled])
    app.action(SCHEDULE_LIVE_CONFIRM_ACTION)(ack=ack_click, lazy=[schedule_live])
    app.action(SCHEDULE_LIVE_CANCEL_ACTION)(ack=ack_click, lazy=[dismiss_live])

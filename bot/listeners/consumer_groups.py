"""`/replay lag` and `/replay rewind`, and the rewind's confirmation buttons.

`lag` is answered after the ack (the daemon samples the group twice, about a second apart). `rewind`
first shows the daemon's preview (current -> new offsets, events read again) with two buttons that
only the requester may press, for `confirm_ttl_s`; each carries the request as a `LiveRequest` (the
canonical command, who, where, when), so a click needs no state in the bot. A click applies it with an
Idempotency-Key derived from the confirmation, so a double click moves the offsets once; the daemon
decides who may (owners of the live topic's source, admins) and refuses while the group has members;
such a refusal leaves the buttons in place, to press again once the consumers are stopped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, Respond

from bot.confirmation import LiveRequest
from bot.deps import BotDeps
from bot.replies import key_for, outcome_of
from daemon.contract.commands import LagMeasured, RewindToConfirm, Rewound
from daemon.contract.groups import RewindBody
from daemon.core.grammar import CEILINGS, USAGE, GrammarError, RewindCommand, parse, render
from daemon.core.quantities import render_duration
from daemon.slack.blocks import MAX_BUTTON_VALUE, Message, escape, mention, notice, refusal
from daemon.slack.group_messages import (
    REWIND_CANCEL_ACTION,
    REWIND_CONFIRM_ACTION,
    lag_message,
    rewind_preview,
    rewound,
)


def _ask(deps: BotDeps, result: RewindToConfirm, command: dict[str, Any]) -> Message:
    """The daemon's preview and the buttons; nothing moves before the click."""
    request = LiveRequest(
        # the cluster the preview read, pinned: a catalog reload before the click cannot move another's
        command=render(replace(result.command, cluster=result.preview.cluster)),
        requester=command["user_id"],
        channel=str(command.get("channel_id") or ""),
        issued_at=int(deps.clock()),
        nonce=key_for("n", str(command.get("trigger_id") or command.get("response_url") or "")),
    )
    value = request.encode()
    if len(value) > MAX_BUTTON_VALUE:
        return refusal("this command is too long for a confirmation button; shorten the group or topic")
    return rewind_preview(result.preview, value=value, expires_in_s=deps.confirm_ttl_s)


def message_for(
    deps: BotDeps, result: LagMeasured | RewindToConfirm | Rewound, command: dict[str, Any]
) -> Message:
    """The answer to a `lag` or `rewind` result (from the shared command table)."""
    if isinstance(result, LagMeasured):
        return lag_message(result.lag)
    if isinstance(result, Rewound):
        return rewound(result.rewind)
    return _ask(deps, result, command)


def _apply(deps: BotDeps, request: LiveRequest) -> Message:
    parsed = parse(request.command, CEILINGS)  # checked against the limits when it was typed
    if not isinstance(parsed, RewindCommand):
        raise GrammarError("this confirmation does not hold a rewind")
    body = RewindBody.of(parsed, preview=False)
    key = key_for("slack-rewind", request.encode())
    return rewound(deps.daemon.rewind(request.requester, parsed.group, body, idempotency_key=key))


def on_click(deps: BotDeps, body: dict[str, Any], respond: Respond, *, apply: bool) -> None:
    try:
        request = LiveRequest.decode(body["actions"][0]["value"])
    except ValueError:
        respond(**refusal("this button is not one of ours").ephemeral(replace_original=False))
        return
    if body["user"]["id"] != request.requester:
        note = f":no_entry: Only {mention(request.requester)} can answer this confirmation."
        respond(**notice(note).ephemeral(replace_original=False))
        return
    if not apply:
        message = notice(":no_entry_sign: Dismissed: the group's offsets were not moved.")
    elif request.expired(deps.clock(), deps.confirm_ttl_s):
        ttl = render_duration(int(deps.confirm_ttl_s))
        message = notice(
            f":hourglass: This confirmation expired (after {ttl}); nothing was moved. "
            f"Run `/replay {escape(request.command)}` again."
        )
    else:  # a refusal (say, the group still has members) keeps the buttons for a later try
        message, done = outcome_of(lambda: _apply(deps, request), usage=USAGE["rewind"])
        respond(**message.ephemeral(replace_original=done))
        return
    respond(**message.ephemeral(replace_original=True))


def register(app: App, deps: BotDeps) -> None:
    def ack_click(ack: Ack) -> None:
        ack()

    def confirm(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, apply=True)

    def dismiss(body: dict[str, Any], respond: Respond) -> None:
        on_click(deps, body, respond, apply=False)

    app.action(REWIND_CONFIRM_ACTION)(ack=ack_click, lazy=[confirm])
    app.action(REWIND_CANCEL_ACTION)(ack=ack_click, lazy=[dismiss])

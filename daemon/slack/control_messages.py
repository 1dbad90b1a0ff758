"""Live control in a run's thread: one line per rate change, pause or resume, and the bot's answer.

⏸ paused by <@U1>, from 12:00:03 UTC
▶ resumed at 3,000/s by <@U1>, from 12:04:10 UTC
rate 1,000/s → 3,000/s by <@U1>, from 12:00:03 UTC
rate 3,000/s → 1,600/s by auto (lag 60,000 > 50,000: below what g consumes (2,000/s)), from 12:00:09 UTC
"""

from __future__ import annotations

from datetime import tzinfo

from daemon.contract.models import RateChangeOut, RunOut
from daemon.slack.blocks import (
    Message,
    escape,
    mention,
    message,
    notice,
    sections,
)
from daemon.slack.zones import clock_time


def _previous(run: RunOut) -> RateChangeOut:
    """The rate before the newest change: the one before it, else the launch rate."""
    if len(run.rate_changes) >= 2:
        return run.rate_changes[-2]
    first = run.rate_changes[0]
    return RateChangeOut(at=first.at, tps=run.tps, paused=False)


def rate_change_line(
    run: RunOut, *, actor: str, reason: str | None = None, zone: tzinfo | None = None
) -> str:
    """What the newest change did, who asked (or, for ``tps=auto``, why), and from when (every task
    switches at that instant; in `zone`, the requester's, with UTC beside)."""
    if not run.rate_changes:
        return f"rate {run.current_tps:,}/s"
    change, before = run.rate_changes[-1], _previous(run)
    since = f"from {clock_time(change.at, zone, seconds=True)}"
    who = f"auto ({escape(reason)})" if reason is not None else mention(actor)
    if change.paused and not before.paused:
        return f":double_vertical_bar: paused by {who}, {since}"
    if before.paused and not change.paused:
        return f":arrow_forward: resumed at {change.tps:,}/s by {who}, {since}"
    if change.paused:
        resumes = f"it resumes at {change.tps:,}/s (was {before.tps:,}/s)"
        return f":double_vertical_bar: still paused; {resumes}, by {who}"
    return f"rate {before.tps:,}/s → {change.tps:,}/s by {who}, {since}"


def rate_changed_reply(
    run: RunOut, *, actor: str, reason: str | None = None, zone: tzinfo | None = None
) -> Message:
    """The reply in the run's thread."""
    text = rate_change_line(run, actor=actor, reason=reason, zone=zone)
    return message(text, *sections(text))


def rate_changed_notice(run: RunOut, *, actor: str, zone: tzinfo | None = None) -> Message:
    """The bot's answer to the one who asked: the same line, with the run it is about."""
    return notice(f"`{escape(run.id)}`: {rate_change_line(run, actor=actor, zone=zone)}")

"""Block Kit for a run's consumer-group watch (``watch=``): the message edited while the groups drain,
and the one line per group when it caught up or the watch timed out.

A lag nobody measured reads "unknown", never 0; times are UTC to the second (people compare them
with their consumers' own logs).
"""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.contract.models import GroupDrainOut, RunOut
from daemon.core.drain import DrainStage
from daemon.slack.blocks import (
    Message,
    context,
    escape,
    human_duration,
    message,
    section,
    sections,
)


def _lag(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def clock_time(moment: datetime) -> str:
    """`12:03:04 UTC`: the second a group caught up."""
    return moment.astimezone(UTC).strftime("%H:%M:%S UTC")


def _after(seconds: float | None) -> str:
    """`2 min 3 s`: how long after the run's last event."""
    if seconds is None:
        return "n/a"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def _drain(watched: GroupDrainOut) -> str:
    if watched.drain_per_s is None:
        return "drain not measured yet"
    if watched.drain_per_s <= 0:
        return f"*not draining* ({watched.drain_per_s:+,.1f}/s)"
    eta = human_duration(watched.seconds_to_baseline) if watched.seconds_to_baseline is not None else "n/a"
    return f"draining {watched.drain_per_s:,.1f}/s, back to baseline in about {eta}"


def group_line(watched: GroupDrainOut) -> str:
    """One group in the watch message."""
    name = f"`{escape(watched.group)}`"
    baseline = f"baseline {_lag(watched.baseline)}"
    if watched.state == DrainStage.CAUGHT_UP and watched.caught_up_at is not None:
        at = clock_time(watched.caught_up_at)
        return f":white_check_mark: {name}: caught up at {at} (lag {_lag(watched.lag)}, {baseline})"
    if watched.state == DrainStage.TIMED_OUT:
        return f":hourglass: {name}: watch timed out with lag {_lag(watched.lag)} left ({baseline})"
    if watched.state == DrainStage.SKIPPED:
        return f"{name}: not watched ({escape(watched.note or 'nothing to catch up on')})"
    if watched.state == DrainStage.BASELINE:
        return f":mag: {name}: {baseline}; watched once the run ends"
    text = f":mag: {name}: lag {_lag(watched.lag)} ({baseline}); {_drain(watched)}"
    return text + (f" — {escape(watched.note)}" if watched.note and watched.lag is None else "")


def drain_message(run: RunOut) -> Message:
    """The dedicated message in the run's thread, edited while the groups drain."""
    open_ = [w for w in run.watch if not w.state.concluded]
    head = f"Consumers catching up on `{escape(run.topic)}` after {escape(run.id)}"
    if not open_:
        head = f"Consumers after {escape(run.id)} on `{escape(run.topic)}`: watch over"
    lines = [group_line(w) for w in run.watch]
    text = head + ": " + "; ".join(w.group for w in run.watch)
    blocks = [section(f"*{head}*\n" + "\n".join(lines))]
    if open_ and run.watch_deadline is not None:
        blocks.append(context(f"Watched until {clock_time(run.watch_deadline)} at the latest."))
    return message(text, *blocks)


def drain_outcome(run: RunOut, group: str) -> Message:
    """The thread line when one group caught up, or its watch timed out."""
    watched = next(w for w in run.watch if w.group == group)
    name = f"`{escape(group)}`"
    if watched.state == DrainStage.CAUGHT_UP and watched.caught_up_at is not None:
        text = (
            f":white_check_mark: {name} caught up at {clock_time(watched.caught_up_at)}, "
            f"{_after(watched.caught_up_after_s)} after the last event (lag {_lag(watched.lag)}, "
            f"baseline {_lag(watched.baseline)})."
        )
    else:
        text = (
            f":hourglass: {name}: the watch timed out with lag {_lag(watched.lag)} left "
            f"(baseline {_lag(watched.baseline)})."
        )
        if watched.note:
            text += f" {escape(watched.note)}."
    return message(text, *sections(text))

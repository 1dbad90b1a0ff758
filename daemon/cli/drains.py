"""`replay status` / `--follow`: a run's consumer-group watch (`watch=`) as plain lines."""

from __future__ import annotations

from daemon.contract.models import GroupDrainOut, RunOut
from daemon.core.drain import DrainStage


def _lag(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def drain_line(watched: GroupDrainOut) -> str:
    text = (
        f"watch {watched.group}: {watched.state}, lag {_lag(watched.lag)} (baseline {_lag(watched.baseline)})"
    )
    if watched.state == DrainStage.CAUGHT_UP and watched.caught_up_at is not None:
        text += f", caught up at {watched.caught_up_at.strftime('%H:%M:%S')} UTC"
        if watched.caught_up_after_s is not None:
            text += f", {watched.caught_up_after_s:,.0f}s after the last event"
    elif watched.state == DrainStage.WATCHING and watched.drain_per_s is not None:
        text += f", draining {watched.drain_per_s:+,.1f}/s"
        if watched.seconds_to_baseline is not None:
            text += f", back to baseline in ~{watched.seconds_to_baseline:,.0f}s"
    if watched.note:
        text += f" ({watched.note})"
    return text


def drain_lines(run: RunOut) -> str:
    """One indented line per watched group; empty when the run watches nothing."""
    return "".join(f"\n  {drain_line(watched)}" for watched in run.watch)

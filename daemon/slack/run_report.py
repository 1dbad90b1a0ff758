"""The honest part of a run's story: its measured counts, its reconcile verdict, and what to run next.

A count nobody measured says so ("not measured", "unknown") and is never shown as 0; a failed run says
how many of its records the broker holds at least, not only what finished tasks confirmed. The retry
command pins the window the run actually read, so `last=6h` retried tomorrow replays the same hours.
Pure: runs (the wire's `RunOut`) in, mrkdwn lines out.
"""

from __future__ import annotations

import re
from datetime import tzinfo

from daemon.contract.models import ReconcileOut, RunOut
from daemon.core.grammar.shaped import render_speed
from daemon.core.quantities import render_duration
from daemon.core.reconcile import Verdict, VerdictKind, suppressed_text
from daemon.core.windows import TimeWindow, label
from daemon.slack.blocks import MAX_LINE, clip, code, count, escape, human_duration
from daemon.slack.zones import clock_time, date_time

MAX_SAMPLE = 10  # sample ids shown per category: what the job keeps
MAX_ID_SHOWN = 60

_VERDICT_ICON = {
    VerdictKind.CLEAN: ":white_check_mark:",
    VerdictKind.EXPLAINED: ":information_source:",
    VerdictKind.NOT_MEASURED: ":grey_question:",
}

# What an executor or a container running out of memory leaves in a reason (Spark, YARN, EMR, Docker).
_OUT_OF_MEMORY = (
    "outofmemoryerror",
    "java heap space",
    "gc overhead limit exceeded",
    "container killed",
    "killed by the os",
    "executorlostfailure",
    "oomkilled",
)
_KILLED_137 = re.compile(r"(exit|code|status)\D{0,12}137\b")  # 128 + SIGKILL: the OOM killer's mark


def run_verdict(reconcile: ReconcileOut | None) -> Verdict:
    """The verdict of a reconcile; a run without one is "not measured", never clean."""
    if reconcile is None:
        return Verdict(VerdictKind.NOT_MEASURED, "not reconciled: the run reported no reconcile")
    return reconcile.verdict()


def chart_title(run_id: str, reconcile: ReconcileOut | None) -> str:
    """The rate chart's title: which run, and whether every event id is on the topic exactly once."""
    return f"{run_id} · {run_verdict(reconcile).text}"


def _samples(name: str, ids: list[str]) -> str | None:
    if not ids:
        return None
    shown = ", ".join(code(i, MAX_ID_SHOWN) for i in ids[:MAX_SAMPLE])
    return f"{name}: {shown}"


def verdict_lines(run_id: str, reconcile: ReconcileOut | None) -> list[str]:
    """`*Reconcile:* <verdict>` and, for each category with findings, up to 10 sample event ids."""
    found = run_verdict(reconcile)
    icon = _VERDICT_ICON.get(found.kind, ":warning:")
    lines = [f"{icon} *Reconcile:* {escape(clip(found.text, MAX_LINE))}"]
    if reconcile is None or found.kind == VerdictKind.NOT_MEASURED:
        lines.append(f"`/replay reconcile {escape(run_id)}` compares the event ids on the topic now.")
        return lines
    for name, ids in (
        ("missing", reconcile.missing_sample),
        ("unexpected", reconcile.unexpected_sample),
        ("duplicated", reconcile.duplicates_sample),
    ):
        if shown := _samples(name, ids):
            lines.append(shown)
    return lines


def _dead_lettered(run: RunOut) -> str:
    if run.dead_lettered is None:
        return "no dead-letter topic" if run.dlq_topic is None else "dead-lettered unknown"
    return f"dead-lettered {run.dead_lettered:,}"


def report_line(run: RunOut) -> str:
    """What the job measured besides the confirmed count, each "not measured" when it was not."""
    duplicates = "not measured" if run.duplicates is None else f"{run.duplicates:,}"
    skew = "not measured" if run.partition_skew is None else f"{run.partition_skew:,.1f}x"
    behind = run.behind_schedule_s
    schedule = (
        "behind schedule: not measured"
        if behind is None
        else ("on schedule" if behind < 1 else f"{human_duration(behind)} behind schedule")
    )
    parts = [
        _dead_lettered(run),
        f"duplicates {duplicates}",
        f"failed task attempts {run.failed_tasks:,}",
        f"partition skew {skew}",
        schedule,
    ]
    if run.speed is not None:  # the ceiling's part in a shaped replay
        slid = run.slid_s
        parts.append(
            "slide under max=: not measured"
            if slid is None
            else (
                f"never above max={run.tps:,}/s"
                if slid < 0.5
                else f"max={run.tps:,}/s slid the last event {human_duration(slid)} later"
            )
        )
    if run.max_mb is not None:  # the byte ceiling's part: how long it, not the rate, held events back
        held = run.bytes_held_s
        parts.append(
            f"max_mb={run.max_mb} held events: not measured"
            if held is None
            else (
                f"max_mb={run.max_mb} never held events back"
                if held < 0.5
                else f"max_mb={run.max_mb} held events back {human_duration(held)}"
            )
        )
    if run.delivery == "transactional":  # a reader of committed records waits at most this long
        parts.append(transactions_text(run.transactions, run.longest_transaction_s, run.resumed))
    if run.erasures is not None or run.suppressed is not None:  # what the erasure list left out
        as_of = run.erasures_as_of.isoformat().replace("+00:00", "Z") if run.erasures_as_of else None
        parts.append(
            "erasures: not measured" if run.suppressed is None else suppressed_text(run.suppressed, as_of)
        )
    return "*Report:* " + " · ".join(parts)


def transactions_text(count: int | None, longest_s: float | None, resumed: int | None) -> str:
    """How a transactional run's records were committed; "not measured" when the job did not say."""
    if count is None or longest_s is None:
        return "transactions: not measured"
    text = f"{count:,} transactions, the longest open {longest_s:.1f}s"
    if resumed:
        text += f"; retries resumed after {resumed:,} committed rows"
    return text


def times_line(run: RunOut, zone: tzinfo | None) -> str | None:
    """When the run's job started and ended, in the reader's zone with UTC beside; None before a start."""
    if run.started_at is None:
        return None
    line = f"Started {date_time(run.started_at, zone)}"
    if run.ended_at is not None:
        same_day = run.ended_at.date() == run.started_at.date()
        end = clock_time(run.ended_at, zone) if same_day else date_time(run.ended_at, zone)
        line += f", ended {end}"
    return line + "."


def on_topic_line(run: RunOut) -> str:
    """A stopped run: what is on the topic at least, never "0" when nobody counted."""
    topic = f"`{escape(run.topic)}`"
    if run.on_topic_at_least is None:
        return (
            f"How many of its records reached {topic} is unknown: "
            f"`/replay reconcile {escape(run.id)}` counts them."
        )
    return (
        f"At least *{count(run.on_topic_at_least)}* are on the topic {topic} "
        "(confirmed by the broker before it stopped, unfinished tasks included)."
    )


def pinned_window(run: RunOut) -> str:
    """The window to retry with: a relative or zoned one (`last=6h`, `today`, `tz=`) pinned to the
    UTC bounds this run read."""
    if run.window_relative and run.window_start is not None and run.window_end is not None:
        try:
            start, _, end = label(TimeWindow(run.window_start, run.window_end)).partition("..")
        except (TypeError, ValueError):  # bounds the grammar cannot express: keep what was typed
            return run.window or ""
        return f"{start}Z..{end}Z"
    return run.window or ""


def rerun_command(run: RunOut) -> str:
    live = " topic=live" if run.topic_mode == "live" else ""
    ramp = f" ramp={render_duration(run.ramp_s)}" if run.ramp_s else ""
    ceiling = f" max_mb={run.max_mb}" if run.max_mb else ""
    rate = f"tps={run.tps}"
    if run.speed is not None:
        rate = f"tps=original speed={render_speed(run.speed)} max={run.tps}"
    fields = f" fields={','.join(run.fields)}" if run.fields else ""
    fields += f" keys=@{run.keys_file}" if run.keys_file else ""
    fields += f" snapshot={run.snapshot}" if run.snapshot else ""  # what the run read, not what is now
    where = f" where={run.where}" if run.where else ""  # last: a filter runs to the end
    return f"/replay {run.source} {pinned_window(run)} {rate}{live}{ramp}{ceiling}{fields}{where}"


def out_of_memory(reason: str) -> bool:
    """Whether a failure reason says an executor, the driver or their container ran out of memory."""
    lowered = reason.lower()
    return any(sign in lowered for sign in _OUT_OF_MEMORY) or _KILLED_137.search(lowered) is not None

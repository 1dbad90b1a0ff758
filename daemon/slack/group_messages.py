"""Block Kit for ``lag`` and ``rewind``: a small partition table, the preview with its buttons, the outcome.

Tables are monospace (a code block) with the hottest partitions first and at most ``MAX_ROWS`` rows,
then "… and N more". A figure nobody measured reads "unknown", never 0.
"""

from __future__ import annotations

from typing import Any

from daemon.contract.groups import LagOut, OffsetMoveOut, PartitionLagOut, RewindOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.slack.blocks import (
    Message,
    buttons,
    context,
    count,
    escape,
    fields,
    human_duration,
    message,
    rate,
    section,
)

REWIND_CONFIRM_ACTION = "rewind_confirm"
REWIND_CANCEL_ACTION = "rewind_cancel"
MAX_ROWS = 10
MAX_MEMBERS = 5


def _offset(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _table(header: str, rows: list[str], total: int) -> str:
    more = total - len(rows)
    body = "\n".join([header, *rows])
    return f"```{escape(body)}```" + (f"\n… and {more} more" if more > 0 else "")


def _lag_row(p: PartitionLagOut, width: int) -> str:
    lag = "unknown" if p.lag is None else f"{p.lag:,}"
    return f"{p.topic[:width]:<{width}} {p.partition:>4} {_offset(p.committed):>14} {p.end:>14,} {lag:>12}"


def _drain_line(lag: LagOut) -> str:
    drain = lag.drain
    if drain is None:
        return "Drain: not measured (one sample)."
    took = f"over {drain.seconds:.1f}s"
    consumed, produced = rate(drain.consumed_per_s), rate(drain.produced_per_s)
    if drain.state == "caught_up":
        return f"Drain: caught up (consuming {consumed}, producing {produced}, {took})."
    if drain.state == "draining":
        eta = human_duration(drain.seconds_to_zero)
        return f"Drain: consuming {consumed}, producing {produced} ({took}): zero lag in about {eta}."
    if drain.state == "not_draining":
        return f"Drain: *not draining*: consuming {consumed}, producing {produced} ({took})."
    return f"Drain: unknown: no partition has a committed offset in both samples ({took})."


def _on_cluster(cluster: str) -> str:
    """Named only when it is not the default cluster: most estates have one."""
    return "" if cluster == DEFAULT_CLUSTER else f" (cluster `{escape(cluster)}`)"


def lag_text(lag: LagOut) -> str:
    """The headline: total lag (known partitions), the hottest partition, the unknown ones."""
    where = f" on `{escape(lag.topic)}`" if lag.topic else ""
    where += _on_cluster(lag.cluster)
    text = f"Consumer group `{escape(lag.group)}`{where}: lag {count(lag.total_lag)}"
    if lag.unknown_partitions:
        text += f" (and unknown on {lag.unknown_partitions} partition(s) with no committed offset)"
    if lag.hottest is not None and lag.hottest.lag:
        text += f"; hottest `{escape(lag.hottest.topic)}[{lag.hottest.partition}]` with {lag.hottest.lag:,}"
    return text + "."


def lag_message(lag: LagOut) -> Message:
    text = lag_text(lag)
    width = min(max((len(p.topic) for p in lag.partitions), default=5), 24)
    header = f"{'topic':<{width}} {'part':>4} {'committed':>14} {'end':>14} {'lag':>12}"
    rows = [_lag_row(p, width) for p in lag.partitions[:MAX_ROWS]]
    members = [
        f"{escape(m.client_id)} @ {escape(m.host)} ({len(m.assignment)} partition(s))"
        for m in lag.members[:MAX_MEMBERS]
    ]
    if len(lag.members) > MAX_MEMBERS:
        members.append(f"… and {len(lag.members) - MAX_MEMBERS} more")
    blocks = [
        section(text),
        fields([("State", escape(lag.state)), ("Members", "\n".join(members) or "none")]),
    ]
    if lag.partitions:
        blocks.append(section(_table(header, rows, len(lag.partitions))))
    else:
        blocks.append(section("No committed offsets and no assigned partitions to show."))
    blocks.append(context(_drain_line(lag)))
    return message(text, *blocks)


def _move_row(m: OffsetMoveOut) -> str:
    again = "unknown" if m.re_consumed is None else f"{m.re_consumed:+,}"
    return f"{m.partition:>4} {_offset(m.current):>14} → {m.new:<14,} {again:>12}"


def re_consumed_text(rewind: RewindOut) -> str:
    """How many events the group reads again; a forward move says what it skips."""
    if rewind.re_consumed is None:
        return "events read again: unknown (no partition has a committed offset)"
    unknown = f", unknown on {rewind.unknown_partitions} partition(s)" if rewind.unknown_partitions else ""
    if rewind.re_consumed < 0:
        return f"a move *forward*: {-rewind.re_consumed:,} events are skipped, never read{unknown}"
    return f"{rewind.re_consumed:,} events are read again{unknown}"


def _rewind_body(rewind: RewindOut) -> tuple[str, dict[str, Any]]:
    header = f"{'part':>4} {'current':>14}   {'new':<14} {'re-read':>12}"
    rows = [_move_row(m) for m in rewind.moves[:MAX_ROWS]]
    text = (
        f"Rewind `{escape(rewind.group)}` on `{escape(rewind.topic)}`{_on_cluster(rewind.cluster)} "
        f"to `{escape(rewind.to)}`: "
        f"{re_consumed_text(rewind)}."
    )
    return text, section(text + "\n" + _table(header, rows, len(rewind.moves)))


def rewind_preview(rewind: RewindOut, *, value: str, expires_in_s: float) -> Message:
    """The preview; buttons only when it can be applied (the group has no members)."""
    text, body = _rewind_body(rewind)
    if rewind.blocked:
        note = f":no_entry: Cannot be applied now: {escape(rewind.blocked)}"
        return message(text, section(note), body)
    minutes = max(1, round(expires_in_s / 60))
    note = f":rewind: Preview: nothing moved yet. Confirm within {minutes} min to move the offsets."
    actions = buttons(
        "replay_rewind",
        (REWIND_CONFIRM_ACTION, "Rewind the group", value, "danger"),
        (REWIND_CANCEL_ACTION, "Cancel", value, None),
    )
    return message(text, section(note), body, actions)


def rewound(rewind: RewindOut) -> Message:
    """The outcome of a click (or the CLI's `--yes`)."""
    text, body = _rewind_body(rewind)
    if rewind.repeated:
        head = ":repeat: Already rewound from this confirmation; nothing moved again."
    elif rewind.applied:
        head = ":white_check_mark: Rewound: the group's consumers start from these offsets."
    else:
        head = ":information_source: Nothing was moved."
    return message(f"{head} {text}", section(head), body)


def rewind_hint(rewind_instead: str | None) -> str | None:
    """The plan's line when the window is still on the live topic."""
    if not rewind_instead:
        return None
    return (
        ":bulb: This window is still on the live topic: rewinding the consumer group that needs it "
        f"re-delivers it to that group only: `/replay {escape(rewind_instead)}`"
    )

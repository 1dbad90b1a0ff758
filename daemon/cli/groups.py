"""`replay lag` and `replay rewind` on the command line: plain-text tables, a y/N before moving offsets.

    replay lag orders-service [orders] [--json]
    replay rewind orders-service orders to=2024-01-01T10:00 [--yes] [--json]

`rewind` prints the daemon's preview, then asks `Rewind? [y/N]` unless `--yes` (a refusal, such as a
group with members, is printed with the preview and exits 1 without asking); `daemon.cli.main` does
the asking, these functions only describe.
"""

from __future__ import annotations

from daemon.contract.groups import LagOut, RewindOut


def _offset(value: int | None) -> str:
    return "-" if value is None else str(value)


def _rate(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.1f}/s"


def describe_lag(lag: LagOut) -> str:
    where = f" on {lag.topic}" if lag.topic else ""
    total = "unknown" if lag.total_lag is None else f"{lag.total_lag:,}"
    lines = [f"group {lag.group}{where}: {lag.state}, {len(lag.members)} member(s), lag {total}"]
    if lag.unknown_partitions:
        lines[0] += f" (unknown on {lag.unknown_partitions} partition(s) with no committed offset)"
    if lag.hottest is not None:
        lines.append(f"hottest: {lag.hottest.topic}[{lag.hottest.partition}] lag {lag.hottest.lag:,}")
    lines.append(f"{'TOPIC':<30} {'PARTITION':>9} {'CURRENT-OFFSET':>15} {'LOG-END-OFFSET':>15} {'LAG':>10}")
    for p in lag.partitions:
        lag_text = "unknown" if p.lag is None else str(p.lag)
        lines.append(f"{p.topic:<30} {p.partition:>9} {_offset(p.committed):>15} {p.end:>15} {lag_text:>10}")
    for member in lag.members:
        assigned = ", ".join(f"{a.topic}[{a.partition}]" for a in member.assignment) or "nothing"
        lines.append(f"member {member.client_id} @ {member.host}: {assigned}")
    drain = lag.drain
    if drain is None:
        lines.append("drain: not measured (one sample)")
    else:
        text = f"consuming {_rate(drain.consumed_per_s)}, producing {_rate(drain.produced_per_s)}"
        if drain.state == "draining" and drain.seconds_to_zero is not None:
            text += f": zero lag in about {drain.seconds_to_zero:,.0f}s"
        elif drain.state != "draining":
            text += f": {drain.state.replace('_', ' ')}"
        lines.append(f"drain over {drain.seconds:.1f}s: {text}")
    return "\n".join(lines)


def describe_rewind(rewind: RewindOut) -> str:
    lines = [f"rewind {rewind.group} on {rewind.topic} to {rewind.to} ({rewind.state})"]
    lines.append(f"{'PARTITION':>9} {'CURRENT':>12} {'NEW':>12} {'RE-READ':>10}")
    for m in rewind.moves:
        again = "unknown" if m.re_consumed is None else f"{m.re_consumed:+}"
        lines.append(f"{m.partition:>9} {_offset(m.current):>12} {m.new:>12} {again:>10}")
    if rewind.re_consumed is None:
        lines.append("events read again: unknown (no partition has a committed offset)")
    elif rewind.re_consumed < 0:
        lines.append(f"a move forward: {-rewind.re_consumed:,} events are skipped, never read")
    else:
        lines.append(f"{rewind.re_consumed:,} events are read again")
    if rewind.unknown_partitions:
        lines.append(f"unknown on {rewind.unknown_partitions} partition(s) with no committed offset")
    if rewind.blocked:
        lines.append(f"cannot be applied now: {rewind.blocked}")
    if rewind.repeated:
        lines.append("already applied with this key; nothing moved again")
    elif rewind.applied:
        lines.append("applied: the group's consumers start from the new offsets")
    return "\n".join(lines)

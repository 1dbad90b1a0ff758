"""How the ``/replay`` commands are written: the usage lines every error and ``help`` shows."""

from __future__ import annotations

PREFIX = "/replay"

USAGE: dict[str, str] = {
    "replay": f"{PREFIX} <source> <window> [tz=<zone>] [tps=N | tps=auto max=N lag<M group=G]"
    " [topic=auto|live] [headers=k:v,k2:v2] [workers=N] [ordering=entity|none] [force=yes]"
    " [timestamp=event|replay] [on_error=fail|dlq] [watch=<group>[,<group>]]",
    "plan": f"{PREFIX} plan <source> <window> [tz=<zone>] [tps=N | tps=auto max=N lag<M group=G]"
    " [topic=auto|live] [headers=k:v,k2:v2] [workers=N] [ordering=entity|none] [force=yes]"
    " [timestamp=event|replay] [on_error=fail|dlq] [watch=<group>[,<group>]]",
    "status": f"{PREFIX} status [run-id]",
    "list": f"{PREFIX} list [mine|running]",
    "cancel": f"{PREFIX} cancel <run-id>",
    "reconcile": f"{PREFIX} reconcile <run-id>",
    "chart": f"{PREFIX} chart <run-id>",
    "schedule": f'{PREFIX} schedule <source> (every=<duration> | cron="<min hour day month weekday>")'
    " watermark=<column> [tps=N] [topic=auto|live] [lookback=<duration>] [headers=k:v,k2:v2]"
    " [idle_after=<N>d] [on_error=fail|dlq] [watch=<group>[,<group>]]",
    "pipelines": f"{PREFIX} pipelines [mine|idle]",
    "pipeline": f"{PREFIX} pipeline <pipeline-id>",
    "tps": f"{PREFIX} tps <run-id> <N>",
    "pause": f"{PREFIX} pause <run-id>|<pipeline-id>",
    "resume": f"{PREFIX} resume <run-id>|<pipeline-id>",
    "unschedule": f"{PREFIX} unschedule <pipeline-id>",
    "lag": f"{PREFIX} lag <group> [topic]",
    "rewind": f"{PREFIX} rewind <group> <topic> to=<time>|earliest|latest",
    "sources": f"{PREFIX} sources [source]",
    "help": f"{PREFIX} help [command]",
}
GENERAL_USAGE = (
    f"{PREFIX} <source> <window> [options], or {PREFIX} <command> with a command among: "
    + ", ".join(name for name in USAGE if name != "replay")
)
_NOTES = (
    "<window>: 2024-01-01..2024-01-07 (UTC days, inclusive), 2024-01-01T10:00..2024-01-01T12:30"
    " (UTC, end excluded), last=6h, today or yesterday; `2024-01-01 to 2024-01-07` and `last 6h` also read",
    "<zone>: an IANA name (tz=Europe/Paris): the window's days and times are read there instead of in UTC",
    "N: 10000, 10k or 1.5m; <duration>: 90s, 15m, 1h, 1h30m, 2d or 1w; ids look like r-0123456789ab (runs)"
    " and p-0123456789ab (pipelines)",
)
_EXAMPLES = (
    f"{PREFIX} orders 2024-01-01..2024-01-07 tps=10k",
    f"{PREFIX} plan orders last=6h topic=live",
    f"{PREFIX} schedule orders every=15m watermark=updated_at lookback=1h",
    f"{PREFIX} tps r-0123456789ab 5k",
    f"{PREFIX} orders last=6h topic=live tps=auto max=20k lag<50k group=orders-consumer",
)


def help_text(topic: str | None = None) -> str:
    """What the bot and CLI print for ``help``: every usage line (or one), notes and examples."""
    if topic is not None:
        return "Usage: " + USAGE[topic]
    lines = ["Usage:", *(f"  {line}" for line in USAGE.values()), *_NOTES, "Examples:"]
    return "\n".join([*lines, *(f"  {example}" for example in _EXAMPLES)])

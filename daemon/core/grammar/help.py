"""How the ``/replay`` commands are written: the usage lines every error and ``help`` shows."""

from __future__ import annotations

PREFIX = "/replay"

USAGE: dict[str, str] = {
    "replay": f"{PREFIX} <source> <window> [tz=<zone>]"
    " [tps=N | tps=auto max=N lag<M group=G | tps=original speed=Nx [max=N]]"
    " [topic=auto|live] [headers=k:v,k2:v2] [workers=N] [ordering=entity|none] [force=yes]"
    " [timestamp=event|replay] [on_error=fail|dlq] [delivery=idempotent|transactional]"
    " [watch=<group>[,<group>]] [ramp=<duration>] [max_mb=N]"
    " [keys=k1,k2|@<file>] [types=t1,t2] [fields=f1,f2] [snapshot=<id>] [where=<filter>]",
    "plan": f"{PREFIX} plan <source> <window> [tz=<zone>]"
    " [tps=N | tps=auto max=N lag<M group=G | tps=original speed=Nx [max=N]]"
    " [topic=auto|live] [headers=k:v,k2:v2] [workers=N] [ordering=entity|none] [force=yes]"
    " [timestamp=event|replay] [on_error=fail|dlq] [delivery=idempotent|transactional]"
    " [watch=<group>[,<group>]] [ramp=<duration>] [max_mb=N]"
    " [keys=k1,k2] [types=t1,t2] [fields=f1,f2] [snapshot=<id>] [where=<filter>]",
    "status": f"{PREFIX} status [run-id]",
    "list": f"{PREFIX} list [mine|running]",
    "cancel": f"{PREFIX} cancel <run-id>",
    "reconcile": f"{PREFIX} reconcile <run-id>",
    "redrive": f"{PREFIX} redrive <run-id>",
    "repair": f"{PREFIX} repair <run-id>",
    "chart": f"{PREFIX} chart <run-id>",
    "open": f"{PREFIX} open [run-id]",
    "schedule": f'{PREFIX} schedule <source> (every=<duration> | cron="<min hour day month weekday>")'
    " (watermark=<column> [lookback=<duration>] | incremental=snapshot) [tps=N] [topic=auto|live]"
    " [headers=k:v,k2:v2]"
    " [idle_after=<N>d] [on_error=fail|dlq] [watch=<group>[,<group>]] [where=<filter>]",
    "pipelines": f"{PREFIX} pipelines [mine|idle]",
    "pipeline": f"{PREFIX} pipeline <pipeline-id>",
    "tps": f"{PREFIX} tps <run-id> <N>",
    "pause": f"{PREFIX} pause <run-id>|<pipeline-id>",
    "resume": f"{PREFIX} resume <run-id>|<pipeline-id>",
    "unschedule": f"{PREFIX} unschedule <pipeline-id>",
    "lag": f"{PREFIX} lag <group> [topic] [cluster=<name>]",
    "rewind": f"{PREFIX} rewind <group> <topic> to=<time>|earliest|latest [cluster=<name>]",
    "sources": f"{PREFIX} sources [source]",
    "help": f"{PREFIX} help [command]",
}
# What each command is for, in one line: `replay --help`, `replay help <command>` and docs/usage.md show it.
SUMMARY: dict[str, str] = {
    "replay": "replay a window into a new topic (topic=live: into the live one, once confirmed)",
    "plan": "dry run: rows, ETA, topic and partitions; nothing is created",
    "status": "a run's state, progress and report (your latest run when no id is given)",
    "list": "recent runs: everyone's, yours, or the running ones",
    "cancel": "stop a run; what it already published stays on the topic",
    "reconcile": "check a finished run's event ids against its topic again",
    "redrive": "send a run's dead letters back to its topic once the cause is fixed",
    "repair": "publish only the ids a run's reconcile found missing, then reconcile it whole",
    "chart": "a run's events per second against its target (CLI: -o run.png writes it)",
    "open": "a link that signs you in to a run's page (or the console) in your browser",
    "schedule": "an incremental pipeline: on each tick, what changed since its watermark",
    "pipelines": "pipelines: everyone's, yours, or the idle ones due for removal",
    "pipeline": "one pipeline and its last runs",
    "tps": "change a running replay's rate",
    "pause": "hold a running replay, or pause a pipeline",
    "resume": "let a paused replay go on, or resume a pipeline",
    "unschedule": "stop a pipeline for good (asks for a confirmation)",
    "lag": "a consumer group's lag, hottest partition and drain",
    "rewind": "move a consumer group's offsets (a preview first, then a confirmation)",
    "sources": "what may be replayed: owners, formats, live topic, history",
    "help": "every usage line with notes and examples, or one command's",
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
    "ramp=<duration>: start at a tenth of the rate and rise to all of it over that time (a cold downstream);"
    " max_mb=N: at most N megabytes a second as well, whichever is tighter",
    "tps=original speed=10x: each event at its own time, ten times faster (1x, 0.5x too); max=N caps"
    " any second, sliding what would top it later",
    "where=<filter>: only the rows it keeps, e.g. where=merchant in ('m-1', 'm-2') and amount > 100;"
    " = != < <= > >=, [not] in (...), [not] between a and b, is [not] null, and, or, not, ( );"
    " quote text; it runs to the next option",
    "keys=k1,k2: only those entities' events (the key column); types=a,b: only those event types (the"
    " source's type column); fields=a,b: only those columns in each JSON value",
    "snapshot=<id>: an Iceberg or Delta table as it was at that snapshot id or version (a failed run's"
    " retry reads what the run read); without it, the table's current snapshot, pinned by the plan",
    "delivery=transactional: sent in Kafka transactions, so a retried task adds no duplicates for"
    " consumers that read committed (isolation.level=read_committed); the source's default otherwise",
)
_EXAMPLES = (
    f"{PREFIX} orders 2024-01-01..2024-01-07 tps=10k",
    f"{PREFIX} plan orders last=6h topic=live",
    f"{PREFIX} orders yesterday tps=5k ramp=5m max_mb=20",
    f"{PREFIX} orders yesterday tps=original speed=60x max=20k",
    f"{PREFIX} orders 2024-01-01..2024-01-07 tps=5k where=merchant in ('m-1', 'm-2') and amount > 100",
    f"{PREFIX} schedule orders every=15m watermark=updated_at lookback=1h",
    f"{PREFIX} schedule orders every=1h incremental=snapshot",
    f"{PREFIX} tps r-0123456789ab 5k",
    f"{PREFIX} orders last=6h topic=live tps=auto max=20k lag<50k group=orders-consumer",
)


def help_text(topic: str | None = None) -> str:
    """What the bot and CLI print for ``help``: every usage line (or one), notes and examples."""
    if topic is not None:
        return "Usage: " + USAGE[topic]
    lines = ["Usage:", *(f"  {line}" for line in USAGE.values()), *_NOTES, "Examples:"]
    return "\n".join([*lines, *(f"  {example}" for example in _EXAMPLES)])

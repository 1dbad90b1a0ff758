"""`/replay sources`: what the catalog offers, so nobody has to ask which names exist or who owns them.

The list is one short section per source (name, description, owners, formats, current snapshot, live topic,
history);
`/replay sources <name>` shows one source as a card with the columns its windows and pipelines use.
Pure: wire models in, `Message` out.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from daemon.contract.models import SourceOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.slack.blocks import (
    MAX_LINE,
    Message,
    clip,
    context,
    escape,
    fields,
    header,
    message,
    notice,
    owners_line,
    refusal,
    section,
)

MAX_LISTED_SOURCES = 40  # Slack draws at most 50 blocks; the rest is named in a last line
MAX_DESCRIPTION = 300
NO_RETENTION = "not stated in the catalog"


def _formats(source: SourceOut) -> str:
    values = "raw bytes, replayed as they were" if source.value_format == "raw" else source.value_format
    return f"{escape(source.table_format)} table → {escape(values)} values"


def _snapshot(source: SourceOut) -> str | None:
    """The version a replay planned now would pin; None for Parquet, whose tables have none."""
    if source.snapshot_unreadable is not None:
        return f"could not be read: {escape(clip(source.snapshot_unreadable, MAX_LINE))}"
    if source.table_format == "parquet":
        return None
    if source.snapshot is None:
        return "none yet: the table was never written"
    return f"`{escape(source.snapshot)}`"


def _live_topic(source: SourceOut) -> str:
    if source.live_topic is None:
        return "none: replays go to their own topic"
    on = "" if source.cluster == DEFAULT_CLUSTER else f" on `{escape(source.cluster)}`"
    return f"`{escape(source.live_topic)}`{on}"


def _retention(source: SourceOut) -> str:
    return escape(clip(source.retention, MAX_LINE)) if source.retention else NO_RETENTION


def _description(source: SourceOut) -> str:
    return escape(clip(source.description, MAX_DESCRIPTION)) if source.description else "_no description_"


def source_line(source: SourceOut) -> str:
    """One source in the list: its name and description, then who owns it and what it holds."""
    snapshot = _snapshot(source)
    return (
        f"*{escape(source.name)}*: {_description(source)}\n"
        f"Owners: {owners_line(source.owners)} · Formats: {_formats(source)} · "
        + ("" if snapshot is None else f"Snapshot: {snapshot} · ")
        + f"Live topic: {_live_topic(source)} · History: {_retention(source)}"
    )


def sources_list(sources: Sequence[SourceOut]) -> Message:
    """Every source, by name; past what one message can draw, the rest are named in a last line."""
    if not sources:
        return notice("The catalog has no sources yet: ask the platform team to onboard one.")
    ordered = sorted(sources, key=lambda s: s.name)
    shown, rest = ordered[:MAX_LISTED_SOURCES], ordered[MAX_LISTED_SOURCES:]
    blocks = [header(f"Sources you can replay ({len(ordered)})"), *(section(source_line(s)) for s in shown)]
    tail = escape("`/replay sources <name>` shows one source; `/replay <name> <window>` replays it.")
    if rest:
        names = ", ".join(escape(s.name) for s in rest)
        tail = clip(f"…and {len(rest)} more: {names}. ", 1500) + tail
    blocks.append(context(tail))
    text = f"Sources you can replay: {', '.join(s.name for s in ordered)}"
    return message(text, *blocks)


def source_card(source: SourceOut) -> Message:
    """One source in full: what `/replay sources <name>` answers."""
    pairs = [
        ("Owners", owners_line(source.owners)),
        ("Formats", _formats(source)),
        *([] if (snapshot := _snapshot(source)) is None else [("Current snapshot", snapshot)]),
        ("Live topic", _live_topic(source)),
        ("History", _retention(source)),
        ("Day windows by", f"`{escape(source.partition_column)}`"),
        (
            "Pipelines' watermark",
            f"`{escape(source.watermark_column)}`"
            if source.watermark_column
            else "none: it cannot be scheduled",
        ),
    ]
    example = f"`/replay plan {escape(source.name)} last=6h` shows what a replay of it would send."
    text = f"Source {source.name}: {source.description or 'no description'}"
    return message(
        clip(text, MAX_LINE),
        header(f"Source {source.name}"),
        section(_description(source)),
        fields(pairs),
        context(example),
    )


def unknown_source(name: str, sources: Sequence[SourceOut]) -> Message:
    """`/replay sources <name>` for a name the catalog does not have: the closest ones, or all names."""
    names = sorted(s.name for s in sources)
    close = difflib.get_close_matches(name, names, n=3)
    known = ", ".join(close) if close else ", ".join(names) or "none"
    hint = "did you mean" if close else "the catalog has"
    return refusal(f"no source '{name}' in the catalog ({hint}: {known})")

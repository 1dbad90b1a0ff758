"""`replay sources [source]`: the catalog's sources as plain lines, one block per source."""

from __future__ import annotations

from collections.abc import Sequence

from daemon.contract.models import SourceOut
from daemon.core.errors import UnknownSource


def _snapshot(source: SourceOut) -> list[str]:
    """The version a replay planned now would pin: a line for Iceberg and Delta, none for Parquet."""
    if source.snapshot_unreadable is not None:
        return [f"  snapshot: could not be read: {source.snapshot_unreadable}"]
    if source.table_format == "parquet":
        return []
    return [f"  snapshot: {source.snapshot or 'none yet (the table was never written)'}"]


def describe_source(source: SourceOut) -> str:
    live = source.live_topic or "none (replays go to their own topic)"
    return "\n".join(
        [
            f"{source.name}: {source.description or 'no description'}",
            f"  owners: {', '.join(source.owners)}",
            f"  formats: {source.table_format} table, {source.value_format} values",
            *_snapshot(source),
            f"  live topic: {live}",
            f"  history: {source.retention or 'not stated in the catalog'}",
        ]
    )


def chosen_sources(sources: Sequence[SourceOut], name: str | None) -> list[SourceOut]:
    """Every source by name, or only `name`; a name the catalog lacks is bad input (exit 2)."""
    ordered = sorted(sources, key=lambda s: s.name)
    if name is None:
        return ordered
    chosen = [s for s in ordered if s.name == name]
    if not chosen:
        raise UnknownSource(name, [s.name for s in ordered])
    return chosen


def describe_sources(sources: Sequence[SourceOut]) -> str:
    return "\n".join(describe_source(s) for s in sources) or "the catalog has no sources"

"""`replay sources [source]`: the catalog's sources as plain lines, one block per source."""

from __future__ import annotations

from collections.abc import Sequence

from daemon.contract.models import SourceOut


def describe_source(source: SourceOut) -> str:
    live = source.live_topic or "none (replays go to their own topic)"
    return "\n".join(
        [
            f"{source.name}: {source.description or 'no description'}",
            f"  owners: {', '.join(source.owners)}",
            f"  formats: {source.table_format} table, {source.value_format} values",
            f"  live topic: {live}",
            f"  history: {source.retention or 'not stated in the catalog'}",
        ]
    )


def describe_sources(sources: Sequence[SourceOut], name: str | None) -> str:
    """Every source, or only `name`; says so when the catalog has none of them."""
    chosen = [s for s in sorted(sources, key=lambda s: s.name) if name is None or s.name == name]
    if chosen:
        return "\n".join(describe_source(s) for s in chosen)
    return f"no source '{name}' in the catalog" if name else "the catalog has no sources"

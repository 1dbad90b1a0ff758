"""``sources [source]``: what may be replayed, read from the catalog (all of it, or one source)."""

from __future__ import annotations

from dataclasses import dataclass

from daemon.core.grammar.help import USAGE
from daemon.core.grammar.values import GrammarError, blaming, check_source


@dataclass(frozen=True)
class SourcesCommand:
    """List the catalog's sources; with a name, only that one."""

    source: str | None = None

    def __post_init__(self) -> None:
        if self.source is not None:
            with blaming(None, USAGE["sources"]):
                check_source(self.source)


def parse_sources(args: list[str]) -> SourcesCommand:
    usage = USAGE["sources"]
    if len(args) > 1:
        raise GrammarError("unexpected extra argument", token=args[1], usage=usage)
    if not args:
        return SourcesCommand()
    with blaming(args[0], usage):
        check_source(args[0])
    return SourcesCommand(args[0])


def render_sources(command: SourcesCommand) -> str:
    return "sources" if command.source is None else f"sources {command.source}"

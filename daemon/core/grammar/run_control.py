"""``tps``, ``pause`` and ``resume`` on a run: live control of a running replay, parsed and rendered.

``pause`` and ``resume`` also act on pipelines (``p-…``): the id's prefix says which, so both read the
same; a token that is neither kind of id is refused naming both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from daemon.core.grammar.help import USAGE
from daemon.core.grammar.values import MAX_TPS, GrammarError, blaming, check_id, check_range
from daemon.core.ids import PIPELINE_ID_PATTERN, RUN_ID_PATTERN
from daemon.core.quantities import InvalidValue, parse_count


@dataclass(frozen=True)
class TpsCommand:
    """Change a going run's rate (every task switches at the same instant, a moment from now)."""

    run_id: str
    tps: int

    def __post_init__(self) -> None:
        with blaming(None, USAGE["tps"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")
            check_range("tps", self.tps, 1, MAX_TPS)


@dataclass(frozen=True)
class PauseRunCommand:
    """Hold a going run: its tasks stop sending and keep their place."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["pause"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


@dataclass(frozen=True)
class ResumeRunCommand:
    """Let a paused run go on, at the rate it had."""

    run_id: str

    def __post_init__(self) -> None:
        with blaming(None, USAGE["resume"]):
            check_id(self.run_id, RUN_ID_PATTERN, "run id")


RunControlCommand: TypeAlias = TpsCommand | PauseRunCommand | ResumeRunCommand
CONTROL_WORDS: dict[type[RunControlCommand], str] = {
    TpsCommand: "tps",
    PauseRunCommand: "pause",
    ResumeRunCommand: "resume",
}
_Pipeline = TypeVar("_Pipeline")


def _run_id(token: str, usage: str) -> str:
    value = token.strip("`").lower()
    if RUN_ID_PATTERN.fullmatch(value):
        return value
    if PIPELINE_ID_PATTERN.fullmatch(value):
        raise GrammarError("that is a pipeline id; this command takes a run id", token=token, usage=usage)
    raise GrammarError("not a run id (r- and 12 hex digits, e.g. r-0123456789ab)", token=token, usage=usage)


def parse_tps(args: list[str], *, max_tps: int = MAX_TPS) -> TpsCommand:
    """``tps <run-id> <rate>``: the rate as everywhere else (10000, 10k, 1.5m)."""
    usage = USAGE["tps"]
    if not args:
        raise GrammarError("missing run id and rate", usage=usage)
    run_id = _run_id(args[0], usage)
    if len(args) < 2:
        raise GrammarError(f"missing the new rate after the run id (e.g. tps {run_id} 5k)", usage=usage)
    if len(args) > 2:
        raise GrammarError("unexpected extra argument", token=args[2], usage=usage)
    token = args[1]
    value = token[4:] if token[:4].lower() == "tps=" else token  # `tps r-… tps=5k` reads the same
    with blaming(token, usage):
        rate = parse_count(value, minimum=1)
        if rate > max_tps:
            raise InvalidValue(value, f"tps={rate} is above this platform's maximum of {max_tps}")
        return TpsCommand(run_id, rate)


def run_or_pipeline(
    word: str, on_pipeline: Callable[[list[str]], _Pipeline]
) -> Callable[[list[str]], _Pipeline | PauseRunCommand | ResumeRunCommand]:
    """``pause``/``resume``: a run id acts on the run, anything else goes to the pipeline parser
    (which names what is wrong with a token that is neither)."""
    run_command: type[PauseRunCommand | ResumeRunCommand] = (
        PauseRunCommand if word == "pause" else ResumeRunCommand
    )
    usage = USAGE[word]

    def parse_either(args: list[str]) -> _Pipeline | PauseRunCommand | ResumeRunCommand:
        if not args:
            raise GrammarError("missing run id or pipeline id", usage=usage)
        if args[0].strip("`").lower().startswith("r-"):
            if len(args) > 1:
                raise GrammarError("unexpected extra argument", token=args[1], usage=usage)
            return run_command(_run_id(args[0], usage))
        if not args[0].strip("`").lower().startswith("p-"):
            raise GrammarError(
                "not a run id (r-0123456789ab) or a pipeline id (p-0123456789ab)", token=args[0], usage=usage
            )
        return on_pipeline(args)

    return parse_either


def render_run_control(command: RunControlCommand) -> str:
    if isinstance(command, TpsCommand):
        return f"tps {command.run_id} {command.tps}"
    return f"{CONTROL_WORDS[type(command)]} {command.run_id}"

"""The ``/replay`` command language, shared by the Slack bot and the ``replay`` CLI.

One pure parser (text in, frozen command out) so both front ends accept exactly the same input and
give the same errors: each names the offending token, says why, and shows the command's usage.
``render`` is the inverse (``parse(render(c)) == c``), used to echo back what was understood.
"""

from __future__ import annotations

import difflib
import re
import shlex
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeVar, cast

from daemon.core.errors import BadRequest
from daemon.core.quantities import (
    DAY,
    MAX_DURATION_SECONDS,
    MINUTE,
    InvalidValue,
    parse_count,
    parse_duration,
    render_duration,
)
from daemon.core.windows import DayWindow, RelativeWindow, TimeWindow, Window, label, parse_window

Topic = Literal["auto", "live"]
Ordering = Literal["entity", "none"]
ListFilter = Literal["all", "mine", "running"]
PipelineFilter = Literal["all", "mine", "idle"]

PREFIX = "/replay"
MAX_TPS = 10_000_000
MAX_WORKERS = 512
MAX_HEADERS = 20
MAX_IDLE_DAYS = 3_660
RESERVED = frozenset(
    {"plan", "status", "list", "cancel", "help", "schedule", "pipelines", "pipeline", "pause", "resume"}
    | {"unschedule"}
)
RUN_OPTIONS = ("tps", "topic", "headers", "workers", "ordering")
SCHEDULE_OPTIONS = ("every", "cron", "watermark", "tps", "topic", "lookback", "headers", "idle_after")

_SOURCE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_RUN_ID = re.compile(r"r-[0-9a-f]{12}")
_PIPELINE_ID = re.compile(r"p-[0-9a-f]{12}")
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(?:\.[A-Za-z_][A-Za-z0-9_]{0,127})*")
_HEADER_KEY = re.compile(r"[A-Za-z0-9._-]+")
_CRON_FIELD = re.compile(r"[0-9*/,A-Za-z-]+")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CRON_NAMES = frozenset((*_MONTHS, "sun", "mon", "tue", "wed", "thu", "fri", "sat"))
# Slack "smart" punctuation the user never meant, mapped back to what shlex understands.
_SMART_QUOTES = str.maketrans(
    {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"'}
    | {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'"}
)
_SHELL_SPECIAL = frozenset(" \"'\\")

USAGE: dict[str, str] = {
    "replay": f"{PREFIX} <source> <window> [tps=N] [topic=auto|live] [headers=k:v,k2:v2] [workers=N]"
    " [ordering=entity|none]",
    "plan": f"{PREFIX} plan <source> <window> [tps=N] [topic=auto|live] [headers=k:v,k2:v2] [workers=N]"
    " [ordering=entity|none]",
    "status": f"{PREFIX} status [run-id]",
    "list": f"{PREFIX} list [mine|running]",
    "cancel": f"{PREFIX} cancel <run-id>",
    "schedule": f'{PREFIX} schedule <source> (every=<duration> | cron="<min hour day month weekday>")'
    " watermark=<column> [tps=N] [topic=auto|live] [lookback=<duration>] [headers=k:v,k2:v2]"
    " [idle_after=<N>d]",
    "pipelines": f"{PREFIX} pipelines [mine|idle]",
    "pipeline": f"{PREFIX} pipeline <pipeline-id>",
    "pause": f"{PREFIX} pause <pipeline-id>",
    "resume": f"{PREFIX} resume <pipeline-id>",
    "unschedule": f"{PREFIX} unschedule <pipeline-id>",
    "help": f"{PREFIX} help [command]",
}
GENERAL_USAGE = (
    f"{PREFIX} <source> <window> [options], or {PREFIX} <command> with a command among: "
    + ", ".join(name for name in USAGE if name != "replay")
)
_NOTES = (
    "<window>: 2024-01-01..2024-01-07 (UTC days, inclusive), 2024-01-01T10:00..2024-01-01T12:30"
    " (UTC, end excluded) or last=6h",
    "N: 10000, 10k or 1.5m; <duration>: 90s, 15m, 1h, 2d or 1w; ids look like r-0123456789ab (runs)"
    " and p-0123456789ab (pipelines)",
)
_EXAMPLES = (
    f"{PREFIX} orders 2024-01-01..2024-01-07 tps=10k",
    f"{PREFIX} plan orders last=6h topic=live",
    f"{PREFIX} schedule orders every=15m watermark=updated_at lookback=1h",
)


class GrammarError(BadRequest):
    """Text that is not a valid command: the token at fault, why, and how the command is written."""

    def __init__(self, reason: str, *, token: str | None = None, usage: str = GENERAL_USAGE) -> None:
        where = f"`{token}`: " if token is not None else ""
        super().__init__(f"{where}{reason}\nUsage: {usage}")
        self.token, self.reason, self.usage = token, reason, usage


def help_text(topic: str | None = None) -> str:
    """What the bot and CLI print for ``help``: every usage line (or one), notes and examples."""
    if topic is not None:
        return "Usage: " + USAGE[topic]
    lines = ["Usage:", *(f"  {line}" for line in USAGE.values()), *_NOTES, "Examples:"]
    return "\n".join([*lines, *(f"  {example}" for example in _EXAMPLES)])


@contextmanager
def _blaming(token: str | None, usage: str) -> Iterator[None]:
    """Turn a value error into a GrammarError that names the token it came from."""
    try:
        yield
    except InvalidValue as exc:
        raise GrammarError(exc.reason, token=token, usage=usage) from None


# --- values shared by the parser and the commands' own validation ---------------------------------


def _check_source(name: str) -> None:
    if name in RESERVED:
        raise InvalidValue(name, f"'{name}' is a command, not a source")
    if not _SOURCE.fullmatch(name):
        if _SOURCE.fullmatch(name.lower()):
            raise InvalidValue(name, f"source names are lowercase (did you mean `{name.lower()}`?)")
        raise InvalidValue(name, "not a source name (a lowercase letter, then letters, digits, '-' or '_')")


def _check_range(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidValue(None, f"{name} must be between {low} and {high}, got {value}")


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InvalidValue(None, f"{name} must be one of {', '.join(allowed)}, got '{value}'")


def _bad_character(text: str) -> str | None:
    """The first character a person cannot see or that a round trip would not preserve."""
    for char in text:
        if unicodedata.category(char).startswith("C") or (char.isspace() and char != " "):
            return char
        if char != char.translate(_SMART_QUOTES):
            return char
    return None


def _describe(char: str) -> str:
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed character')})"


def _check_header(key: str, value: str) -> None:
    if not _HEADER_KEY.fullmatch(key):
        raise InvalidValue(None, f"header name '{key}' may only use letters, digits, '.', '_' and '-'")
    if key.lower().startswith("replay-"):
        raise InvalidValue(None, f"header name '{key}' is reserved: replay-* headers record provenance")
    if not value:
        raise InvalidValue(None, f"header '{key}' has an empty value")
    if "," in value:
        raise InvalidValue(None, f"header '{key}' has a comma in its value")
    if value != value.strip(" "):
        raise InvalidValue(None, f"header '{key}' value starts or ends with a space")
    if (char := _bad_character(value)) is not None:
        raise InvalidValue(None, f"header '{key}' value contains {_describe(char)}")


def check_headers(headers: tuple[tuple[str, str], ...]) -> None:
    """Validate already-split headers (what ``parse_headers`` returns, or a caller builds)."""
    if len(headers) > MAX_HEADERS:
        raise InvalidValue(None, f"too many headers ({len(headers)}; at most {MAX_HEADERS})")
    seen: set[str] = set()
    for key, value in headers:
        _check_header(key, value)
        if key in seen:
            raise InvalidValue(None, f"header '{key}' given twice")
        seen.add(key)


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """``k:v,k2:v2`` -> pairs in the order given; ``replay-*`` names are kept for provenance."""
    if not text:
        raise InvalidValue(text, "no headers given (write key:value,key2:value2)")
    pairs: list[tuple[str, str]] = []
    for entry in (part.strip(" ") for part in text.split(",")):
        if not entry:
            raise InvalidValue(text, "empty header entry (a stray comma?)")
        key, colon, value = entry.partition(":")
        if not colon:
            raise InvalidValue(text, f"header '{entry}' needs a value (write key:value)")
        pairs.append((key.strip(" "), value.strip(" ")))
    try:
        check_headers(tuple(pairs))
    except InvalidValue as exc:
        raise InvalidValue(text, exc.reason) from None
    return tuple(pairs)


def render_headers(headers: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{key}:{value}" for key, value in headers)


def parse_cron(text: str) -> str:
    """Light check (five fields of digits, ``* / , -`` and names); the scheduler validates fully."""
    fields = text.split(" ")
    fields = [field for field in fields if field]
    if len(fields) != 5:
        raise InvalidValue(
            text, f"a cron expression has 5 fields (minute hour day month weekday), got {len(fields)}"
        )
    for field in fields:
        if not _CRON_FIELD.fullmatch(field):
            raise InvalidValue(
                text, f"cron field '{field}' may only use digits, '*', '/', ',', '-' and names"
            )
        for name in re.findall(r"[A-Za-z]+", field):
            if name.lower() not in _CRON_NAMES:
                raise InvalidValue(text, f"cron field '{field}' has an unknown name '{name}'")
    return " ".join(fields)


def _check_column(name: str) -> None:
    if not _COLUMN.fullmatch(name):
        raise InvalidValue(name, f"'{name}' is not a column name")


def _check_id(value: str, pattern: re.Pattern[str], kind: str) -> None:
    if not pattern.fullmatch(value):
        raise InvalidValue(value, f"'{value}' is not a {kind}")


# --- commands ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplaySpec:
    """What to replay; shared by ``ReplayCommand`` and ``PlanCommand`` (which only estimates it)."""

    source: str
    window: Window
    tps: int | None = None  # None: the service's default rate
    topic: Topic = "auto"
    headers: tuple[tuple[str, str], ...] = ()
    workers: int | None = None
    ordering: Ordering = "entity"

    def __post_init__(self) -> None:
        with _blaming(None, USAGE["plan" if isinstance(self, PlanCommand) else "replay"]):
            _check_source(self.source)
            if not isinstance(self.window, DayWindow | TimeWindow | RelativeWindow):
                raise InvalidValue(None, "window must be a DayWindow, TimeWindow or RelativeWindow")
            _check_range("tps", self.tps, 1, MAX_TPS)
            _check_choice("topic", self.topic, ("auto", "live"))
            check_headers(self.headers)
            _check_range("workers", self.workers, 1, MAX_WORKERS)
            _check_choice("ordering", self.ordering, ("entity", "none"))


@dataclass(frozen=True)
class ReplayCommand(ReplaySpec):
    """Replay a window of a source's history to a topic."""


@dataclass(frozen=True)
class PlanCommand(ReplaySpec):
    """Dry run: what a replay with these options would read, send and take."""


@dataclass(frozen=True)
class StatusCommand:
    run_id: str | None = None  # None: the caller's latest run

    def __post_init__(self) -> None:
        if self.run_id is not None:
            with _blaming(None, USAGE["status"]):
                _check_id(self.run_id, _RUN_ID, "run id")


@dataclass(frozen=True)
class ListCommand:
    filter: ListFilter = "all"

    def __post_init__(self) -> None:
        with _blaming(None, USAGE["list"]):
            _check_choice("filter", self.filter, ("all", "mine", "running"))


@dataclass(frozen=True)
class CancelCommand:
    run_id: str

    def __post_init__(self) -> None:
        with _blaming(None, USAGE["cancel"]):
            _check_id(self.run_id, _RUN_ID, "run id")


@dataclass(frozen=True)
class HelpCommand:
    topic: str | None = None  # a key of USAGE, or None for everything

    def __post_init__(self) -> None:
        if self.topic is not None and self.topic not in USAGE:
            raise GrammarError(f"no help topic '{self.topic}'", usage=USAGE["help"])


@dataclass(frozen=True)
class ScheduleCommand:
    """An incremental pipeline: every period (or on a cron), replay rows past the watermark."""

    source: str
    every_seconds: int | None
    cron: str | None
    watermark: str
    tps: int | None = None
    topic: Topic = "auto"
    lookback_seconds: int = 0
    headers: tuple[tuple[str, str], ...] = ()
    idle_after_days: int | None = None

    def __post_init__(self) -> None:
        with _blaming(None, USAGE["schedule"]):
            _check_source(self.source)
            if (self.every_seconds is None) == (self.cron is None):
                raise InvalidValue(None, "give exactly one of every= or cron=")
            _check_range("every", self.every_seconds, MINUTE, MAX_DURATION_SECONDS)
            if self.cron is not None and parse_cron(self.cron) != self.cron:
                raise InvalidValue(None, "cron must be five fields separated by single spaces")
            _check_column(self.watermark)
            _check_range("tps", self.tps, 1, MAX_TPS)
            _check_choice("topic", self.topic, ("auto", "live"))
            _check_range("lookback", self.lookback_seconds, 0, MAX_DURATION_SECONDS)
            check_headers(self.headers)
            _check_range("idle_after days", self.idle_after_days, 1, MAX_IDLE_DAYS)


@dataclass(frozen=True)
class PipelinesCommand:
    filter: PipelineFilter = "all"

    def __post_init__(self) -> None:
        with _blaming(None, USAGE["pipelines"]):
            _check_choice("filter", self.filter, ("all", "mine", "idle"))


@dataclass(frozen=True)
class _PipelineAction:
    pipeline_id: str

    def __post_init__(self) -> None:
        with _blaming(None, USAGE[_ACTION_WORDS[type(self)]]):
            _check_id(self.pipeline_id, _PIPELINE_ID, "pipeline id")


@dataclass(frozen=True)
class PipelineCommand(_PipelineAction):
    """Show one pipeline."""


@dataclass(frozen=True)
class PauseCommand(_PipelineAction):
    pass


@dataclass(frozen=True)
class ResumeCommand(_PipelineAction):
    pass


@dataclass(frozen=True)
class UnscheduleCommand(_PipelineAction):
    pass


_ACTION_WORDS: dict[type[_PipelineAction], str] = {
    PipelineCommand: "pipeline",
    PauseCommand: "pause",
    ResumeCommand: "resume",
    UnscheduleCommand: "unschedule",
}

Command: TypeAlias = (
    ReplayCommand
    | PlanCommand
    | StatusCommand
    | ListCommand
    | CancelCommand
    | HelpCommand
    | ScheduleCommand
    | PipelinesCommand
    | PipelineCommand
    | PauseCommand
    | ResumeCommand
    | UnscheduleCommand
)


# --- parsing ----------------------------------------------------------------------------------------


def _unbalanced(text: str) -> GrammarError:
    """shlex says *that* quoting failed; find *where*, as the raw word the user typed."""
    quote: str | None = None
    word_start: int | None = None
    opened_in = 0
    index = 0
    while index < len(text):
        char = text[index]
        if quote is None:
            if char == " ":
                word_start = None
            else:
                word_start = index if word_start is None else word_start
                if char == "\\":
                    index += 1
                elif char in "\"'":
                    quote, opened_in = char, word_start
        elif char == quote:
            quote = None
        elif char == "\\" and quote == '"':
            index += 1
        index += 1
    if quote is not None:
        kind = "double" if quote == '"' else "single"
        return GrammarError(f"unbalanced {kind} quote ({quote})", token=text[opened_in:].strip(" "))
    return GrammarError("ends with a lone backslash", token=text[word_start or 0 :].strip(" "))


def tokenize(text: str) -> list[str]:
    """Split like a POSIX shell after undoing Slack's smart quotes and exotic spaces."""
    plain = "".join(" " if char.isspace() else char for char in text.translate(_SMART_QUOTES))
    try:
        tokens = shlex.split(plain, posix=True)
    except ValueError:
        raise _unbalanced(plain) from None
    for token in tokens:
        if token == "":
            raise GrammarError("empty argument (\"\" or '')", token=token)
        for char in token:
            if unicodedata.category(char).startswith("C"):
                raise GrammarError(
                    f"contains an invisible, control or unknown character {_describe(char)}", token=token
                )
    return tokens


def _options(tokens: list[str], allowed: tuple[str, ...], command: str) -> dict[str, tuple[str, str]]:
    """``key=value`` tokens -> {key: (token, value)}; keys are case-insensitive, values untouched."""
    usage = USAGE[command]
    found: dict[str, tuple[str, str]] = {}
    for token in tokens:
        key, equals, value = token.partition("=")
        name = key.lower().replace("-", "_")
        if not equals:
            reason = "expected an option (key=value) here, not a positional argument"
            if "cron" in found:
                reason += ' (quote a cron expression: cron="*/15 * * * *")'
            elif "headers" in found and ":" in token:
                reason += " (no spaces between headers: headers=k:v,k2:v2)"
            raise GrammarError(reason, token=token, usage=usage)
        if name == "last" and command in ("replay", "plan"):
            raise GrammarError("the window goes right after the source", token=token, usage=usage)
        if name not in allowed:
            allowed_list = ", ".join(allowed)
            raise GrammarError(
                f"unknown option '{key}' (allowed for {command}: {allowed_list})", token=token, usage=usage
            )
        if name in found:
            raise GrammarError(f"option '{name}' given twice", token=token, usage=usage)
        found[name] = (token, value)
    return found


_T = TypeVar("_T")


def _value(
    options: dict[str, tuple[str, str]], name: str, convert: Callable[[str], _T], usage: str
) -> _T | None:
    if name not in options:
        return None
    token, value = options[name]
    with _blaming(token, usage):
        return convert(value)


def _choice(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def convert(value: str) -> str:
        if value.lower() not in allowed:
            raise InvalidValue(value, f"must be one of {', '.join(allowed)}")
        return value.lower()

    return convert


def _column(value: str) -> str:
    _check_column(value)
    return value


def _idle_days(value: str) -> int:
    seconds = parse_duration(value, minimum=DAY, maximum=MAX_IDLE_DAYS * DAY)
    if seconds % DAY:
        raise InvalidValue(value, "must be a whole number of days (e.g. 14d)")
    return seconds // DAY


def _source(token: str, usage: str) -> str:
    if "=" in token:
        raise GrammarError("expected a source name first, not an option", token=token, usage=usage)
    if token[:1].isdigit():
        raise GrammarError("expected a source name before the window", token=token, usage=usage)
    with _blaming(token, usage):
        _check_source(token)
    return token


def _parse_spec(cls: type[ReplaySpec], command: str, args: list[str]) -> ReplaySpec:
    usage = USAGE[command]
    # A bare first word is only known to be a source if it is a good one; else show every command.
    source = _source(args[0], usage if command == "plan" else GENERAL_USAGE) if args else None
    if source is None:
        raise GrammarError("missing source and window", usage=usage)
    if len(args) < 2:
        close = difflib.get_close_matches(source, sorted(RESERVED), n=1)
        if close and command == "replay":
            raise GrammarError(f"unknown command (did you mean `{close[0]}`?)", token=source)
        raise GrammarError(f"missing window after the source (e.g. {source} last=6h)", usage=usage)
    token = args[1]
    if "=" in token and token[:5].lower() != "last=":
        raise GrammarError("expected a window before the options (e.g. last=6h)", token=token, usage=usage)
    with _blaming(token, usage):
        window = parse_window(token)
    options = _options(args[2:], RUN_OPTIONS, command)
    return cls(
        source=source,
        window=window,
        tps=_value(options, "tps", lambda v: parse_count(v, minimum=1, maximum=MAX_TPS), usage),
        topic=cast(Topic, _value(options, "topic", _choice(("auto", "live")), usage) or "auto"),
        headers=_value(options, "headers", parse_headers, usage) or (),
        workers=_value(options, "workers", lambda v: parse_count(v, minimum=1, maximum=MAX_WORKERS), usage),
        ordering=cast(Ordering, _value(options, "ordering", _choice(("entity", "none")), usage) or "entity"),
    )


def _parse_schedule(args: list[str]) -> ScheduleCommand:
    usage = USAGE["schedule"]
    if not args:
        raise GrammarError("missing source", usage=usage)
    source = _source(args[0], usage)
    options = _options(args[1:], SCHEDULE_OPTIONS, "schedule")
    every = _value(options, "every", lambda v: parse_duration(v, minimum=MINUTE), usage)
    cron = _value(options, "cron", parse_cron, usage)
    if every is not None and cron is not None:
        later = max(("every", "cron"), key=list(options).index)
        raise GrammarError("give every= or cron=, not both", token=options[later][0], usage=usage)
    if every is None and cron is None:
        raise GrammarError('missing every=<duration> or cron="<expression>"', usage=usage)
    watermark = _value(options, "watermark", _column, usage)
    if watermark is None:
        raise GrammarError("missing watermark=<column> (the column that only grows)", usage=usage)
    return ScheduleCommand(
        source=source,
        every_seconds=every,
        cron=cron,
        watermark=watermark,
        tps=_value(options, "tps", lambda v: parse_count(v, minimum=1, maximum=MAX_TPS), usage),
        topic=cast(Topic, _value(options, "topic", _choice(("auto", "live")), usage) or "auto"),
        lookback_seconds=_value(options, "lookback", parse_duration, usage) or 0,
        headers=_value(options, "headers", parse_headers, usage) or (),
        idle_after_days=_value(options, "idle_after", _idle_days, usage),
    )


def _at_most(args: list[str], count: int, usage: str) -> None:
    if len(args) > count:
        raise GrammarError("unexpected extra argument", token=args[count], usage=usage)


def _exactly_one(args: list[str], what: str, usage: str) -> str:
    if not args:
        raise GrammarError(f"missing {what}", usage=usage)
    _at_most(args, 1, usage)
    return args[0]


def _id(token: str, kind: Literal["run", "pipeline"], usage: str) -> str:
    value = token.strip("`").lower()
    wanted, other = (_RUN_ID, _PIPELINE_ID) if kind == "run" else (_PIPELINE_ID, _RUN_ID)
    if wanted.fullmatch(value):
        return value
    example = "r-0123456789ab" if kind == "run" else "p-0123456789ab"
    if other.fullmatch(value):
        reason = f"that is a {'pipeline' if kind == 'run' else 'run'} id; this command takes a {kind} id"
    else:
        reason = f"not a {kind} id ({example[:2]} and 12 hex digits, e.g. {example})"
    raise GrammarError(reason, token=token, usage=usage)


def _keyword(args: list[str], allowed: tuple[str, ...], usage: str) -> str:
    _at_most(args, 1, usage)
    if not args:
        return "all"
    if args[0].lower() not in (*allowed, "all"):
        raise GrammarError(f"expected one of {', '.join(allowed)}", token=args[0], usage=usage)
    return args[0].lower()


def _parse_status(args: list[str]) -> StatusCommand:
    usage = USAGE["status"]
    _at_most(args, 1, usage)
    return StatusCommand(_id(args[0], "run", usage) if args else None)


def _parse_help(args: list[str]) -> HelpCommand:
    usage = USAGE["help"]
    _at_most(args, 1, usage)
    if not args:
        return HelpCommand()
    if args[0].lower() not in USAGE:
        raise GrammarError(f"no such command (try one of: {', '.join(USAGE)})", token=args[0], usage=usage)
    return HelpCommand(args[0].lower())


def _pipeline_action(cls: type[_PipelineAction], word: str) -> Callable[[list[str]], Command]:
    def parse_action(args: list[str]) -> Command:
        usage = USAGE[word]
        return cast(Command, cls(_id(_exactly_one(args, "pipeline id", usage), "pipeline", usage)))

    return parse_action


_COMMANDS: dict[str, Callable[[list[str]], Command]] = {
    "plan": lambda args: cast(PlanCommand, _parse_spec(PlanCommand, "plan", args)),
    "status": _parse_status,
    "list": lambda args: ListCommand(cast(ListFilter, _keyword(args, ("mine", "running"), USAGE["list"]))),
    "cancel": lambda args: CancelCommand(
        _id(_exactly_one(args, "run id", USAGE["cancel"]), "run", USAGE["cancel"])
    ),
    "help": _parse_help,
    "schedule": _parse_schedule,
    "pipelines": lambda args: PipelinesCommand(
        cast(PipelineFilter, _keyword(args, ("mine", "idle"), USAGE["pipelines"]))
    ),
    **{word: _pipeline_action(cls, word) for cls, word in _ACTION_WORDS.items()},
}


def parse(text: str) -> Command:
    """Parse the text after ``/replay`` (or the CLI's argv joined); raises only ``GrammarError``."""
    tokens = tokenize(text)
    if not tokens:
        raise GrammarError("no command given")
    handler = _COMMANDS.get(tokens[0].lower())
    if handler is None:
        return cast(ReplayCommand, _parse_spec(ReplayCommand, "replay", tokens))
    return handler(tokens[1:])


# --- rendering --------------------------------------------------------------------------------------


def _quote(value: str) -> str:
    """Double-quote a value only when the tokenizer would otherwise split or alter it."""
    if value and not _SHELL_SPECIAL.intersection(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_spec(spec: ReplaySpec) -> list[str]:
    parts = [spec.source, label(spec.window)]
    if spec.tps is not None:
        parts.append(f"tps={spec.tps}")
    if spec.topic != "auto":
        parts.append(f"topic={spec.topic}")
    if spec.headers:
        parts.append("headers=" + _quote(render_headers(spec.headers)))
    if spec.workers is not None:
        parts.append(f"workers={spec.workers}")
    if spec.ordering != "entity":
        parts.append(f"ordering={spec.ordering}")
    return parts


def _render_schedule(command: ScheduleCommand) -> list[str]:
    parts = ["schedule", command.source]
    if command.every_seconds is not None:
        parts.append(f"every={render_duration(command.every_seconds)}")
    if command.cron is not None:
        parts.append("cron=" + _quote(command.cron))
    parts.append(f"watermark={command.watermark}")
    if command.tps is not None:
        parts.append(f"tps={command.tps}")
    if command.topic != "auto":
        parts.append(f"topic={command.topic}")
    if command.lookback_seconds:
        parts.append(f"lookback={render_duration(command.lookback_seconds)}")
    if command.headers:
        parts.append("headers=" + _quote(render_headers(command.headers)))
    if command.idle_after_days is not None:
        parts.append(f"idle_after={command.idle_after_days}d")
    return parts


def render(command: Command) -> str:
    """Canonical text of a command (fixed option order, defaults omitted); ``parse`` reads it back."""
    if isinstance(command, PlanCommand):
        return " ".join(["plan", *_render_spec(command)])
    if isinstance(command, ReplayCommand):
        return " ".join(_render_spec(command))
    if isinstance(command, ScheduleCommand):
        return " ".join(_render_schedule(command))
    if isinstance(command, StatusCommand):
        return "status" if command.run_id is None else f"status {command.run_id}"
    if isinstance(command, CancelCommand):
        return f"cancel {command.run_id}"
    if isinstance(command, ListCommand):
        return "list" if command.filter == "all" else f"list {command.filter}"
    if isinstance(command, PipelinesCommand):
        return "pipelines" if command.filter == "all" else f"pipelines {command.filter}"
    if isinstance(command, HelpCommand):
        return "help" if command.topic is None else f"help {command.topic}"
    return f"{_ACTION_WORDS[type(command)]} {command.pipeline_id}"

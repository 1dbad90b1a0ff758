"""Tokens to a command: one pure parser for the Slack bot and the ``replay`` CLI.

Both front ends accept exactly the same input and give the same errors: each names the offending
token, says why, and shows the command's usage. A word that is not a command is a source to replay
(case-insensitive, as catalog names are lower-case). Rates and workers are held to the ``Limits``
passed in (the service's); windows are read forgivingly (``forgiving``) but never guessed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Literal, TypeVar, cast

from daemon.core.cron import parse_cron
from daemon.core.grammar.auto import LAG_BOUND, parse_auto
from daemon.core.grammar.commands import (
    ACTION_WORDS,
    DELIVERY_CHOICES,
    INCREMENTAL_CHOICES,
    ON_ERROR_CHOICES,
    RUN_OPTIONS,
    SCHEDULE_OPTIONS,
    CancelCommand,
    ChartCommand,
    Command,
    Delivery,
    HelpCommand,
    Incremental,
    ListCommand,
    ListFilter,
    OnError,
    OpenCommand,
    Ordering,
    PauseCommand,
    PipelineAction,
    PipelineFilter,
    PipelinesCommand,
    PlanCommand,
    ReconcileCommand,
    RedriveCommand,
    RepairCommand,
    ReplayCommand,
    ReplaySpec,
    ResumeCommand,
    ScheduleCommand,
    StatusCommand,
    Timestamp,
    Topic,
)
from daemon.core.grammar.drain import parse_drain_groups
from daemon.core.grammar.forgiving import corrected_window, stray_mark, window_text
from daemon.core.grammar.groups import parse_lag, parse_rewind
from daemon.core.grammar.help import GENERAL_USAGE, USAGE
from daemon.core.grammar.limits import Limits
from daemon.core.grammar.predicates import parse_predicate
from daemon.core.grammar.renderer import render
from daemon.core.grammar.run_control import parse_tps, run_or_pipeline
from daemon.core.grammar.selection import parse_key_file, parse_listed
from daemon.core.grammar.shaped import parse_original
from daemon.core.grammar.sources import parse_sources
from daemon.core.grammar.tokenizer import tokenize
from daemon.core.grammar.values import (
    MAX_IDLE_DAYS,
    RESERVED,
    GrammarError,
    blaming,
    check_column,
    check_snapshot,
    check_source,
    parse_headers,
)
from daemon.core.ids import PIPELINE_ID_PATTERN, RUN_ID_PATTERN
from daemon.core.quantities import DAY, MINUTE, InvalidValue, parse_count, parse_duration
from daemon.core.rate_shape import MAX_MB, MAX_RAMP_S
from daemon.core.windows import is_point, parse_window, parse_zone

_T = TypeVar("_T")


def _options(tokens: list[str], allowed: tuple[str, ...], command: str) -> dict[str, tuple[str, str]]:
    """``key=value`` tokens -> {key: (token, value)}; keys are case-insensitive, values untouched."""
    usage = USAGE[command]
    found: dict[str, tuple[str, str]] = {}
    for token in tokens:
        key, equals, value = token.partition("=")
        if token[: len(LAG_BOUND)].lower() == LAG_BOUND and "lag" in allowed:  # a bound: lag<50k
            key, equals, value = "lag", "=", token[len(LAG_BOUND) :]
        elif key.lower() == "lag" and equals and "lag" in allowed:
            raise GrammarError(
                "the lag is a bound: write lag<M (keep the lag under M)", token=token, usage=usage
            )
        name = key.lower().replace("-", "_")
        if (stray := stray_mark(token)) is not None:
            raise GrammarError(stray, token=token, usage=usage)
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


def _value(
    options: dict[str, tuple[str, str]], name: str, convert: Callable[[str], _T], usage: str
) -> _T | None:
    if name not in options:
        return None
    token, value = options[name]
    with blaming(token, usage):
        return convert(value)


def _choice(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def convert(value: str) -> str:
        if value.lower() not in allowed:
            raise InvalidValue(value, f"must be one of {', '.join(allowed)}")
        return value.lower()

    return convert


def _column(value: str) -> str:
    check_column(value)
    return value


def _idle_days(value: str) -> int:
    seconds = parse_duration(value, minimum=DAY, maximum=MAX_IDLE_DAYS * DAY)
    if seconds % DAY:
        raise InvalidValue(value, "must be a whole number of days (e.g. 14d)")
    return seconds // DAY


def _bounded(name: str, maximum: int) -> Callable[[str], int]:
    """A count from 1 to this platform's maximum, the refusal naming that maximum."""

    def convert(value: str) -> int:
        number = parse_count(value, minimum=1)
        if number > maximum:
            raise InvalidValue(value, f"{name}={number} is above this platform's maximum of {maximum}")
        return number

    return convert


def _source(token: str, usage: str) -> str:
    if "=" in token:
        raise GrammarError("expected a source name first, not an option", token=token, usage=usage)
    if token[:1].isdigit():
        raise GrammarError("expected a source name before the window", token=token, usage=usage)
    with blaming(token, usage):
        check_source(token.lower())
    return token.lower()


def _zone(args: list[str], usage: str) -> str | None:
    """``tz=``, read before the window: it says how the window's days and times are read."""
    for token in args:
        key, equals, value = token.partition("=")
        if equals and key.lower() == "tz":
            with blaming(token, usage):
                return parse_zone(value)
    return None


def _suggestion(cls: type[ReplaySpec], command: str, args: list[str], limits: Limits) -> str | None:
    """The whole corrected command when the refused window has exactly one reading, else None."""
    correction = corrected_window(args[1:])
    if correction is None:
        return None
    text, used = correction
    try:
        fixed = _parse_spec(cls, command, [args[0], text, *args[1 + used :]], limits)
    except GrammarError:
        return None
    return render(cast(Command, fixed))


def _parse_spec(cls: type[ReplaySpec], command: str, args: list[str], limits: Limits) -> ReplaySpec:
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
    written = window_text(args[1:], usage)
    rest = args[1 + written.used :]
    tz = _zone(rest, usage)
    try:
        window = parse_window(written.text, tz)
    except InvalidValue as exc:
        suggestion = _suggestion(cls, command, args, limits)
        raise GrammarError(exc.reason, token=written.blame, usage=usage, suggestion=suggestion) from None
    if written.used == 1 and is_point(written.text) and rest and is_point(rest[0]):
        suggestion = _suggestion(cls, command, args, limits)
        reason = "a second day or time after the window: a range is written start..end"
        raise GrammarError(reason, token=rest[0], usage=usage, suggestion=suggestion)
    options = _options(rest, RUN_OPTIONS, command)
    original = parse_original(options, usage, max_tps=limits.max_tps)
    steering = {name: given for name, given in options.items() if original is None or name != "max"}
    auto = parse_auto(options["tps"][0] if "tps" in options else "", steering, usage, max_tps=limits.max_tps)
    if original is not None:
        tps = original.ceiling
    elif auto is None:
        tps = _value(options, "tps", _bounded("tps", limits.max_tps), usage)
    else:
        tps = None
    return cls(
        source=source,
        window=window,
        tz=tz,
        tps=tps,
        auto=auto,
        speed=original.speed if original is not None else None,
        topic=cast(Topic, _value(options, "topic", _choice(("auto", "live")), usage) or "auto"),
        headers=_value(options, "headers", parse_headers, usage) or (),
        workers=_value(options, "workers", _bounded("workers", limits.max_workers), usage),
        ordering=cast(Ordering, _value(options, "ordering", _choice(("entity", "none")), usage) or "entity"),
        force=_value(options, "force", _choice(("yes", "no")), usage) == "yes",
        timestamp=cast(Timestamp | None, _value(options, "timestamp", _choice(("event", "replay")), usage)),
        on_error=cast(OnError | None, _value(options, "on_error", _choice(ON_ERROR_CHOICES), usage)),
        delivery=cast(Delivery | None, _value(options, "delivery", _choice(DELIVERY_CHOICES), usage)),
        watch=_value(options, "watch", parse_drain_groups, usage) or (),
        ramp_s=_value(options, "ramp", lambda v: parse_duration(v, minimum=1, maximum=MAX_RAMP_S), usage),
        max_mb=_value(options, "max_mb", _bounded("max_mb", MAX_MB), usage),
        where=parse_predicate(options["where"][1]) if "where" in options else None,
        keys=_value(options, "keys", lambda v: () if v.startswith("@") else parse_listed("keys", v), usage)
        or (),
        keys_file=_value(options, "keys", lambda v: parse_key_file(v) if v.startswith("@") else None, usage),
        types=_value(options, "types", lambda v: parse_listed("types", v), usage) or (),
        fields=_value(options, "fields", lambda v: parse_listed("fields", v, columns=True), usage) or (),
        snapshot=_value(options, "snapshot", _snapshot, usage),
    )


def _snapshot(value: str) -> str:
    check_snapshot(value)
    return value


def _parse_schedule(args: list[str], limits: Limits) -> ScheduleCommand:
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
    incremental = cast(
        Incremental, _value(options, "incremental", _choice(INCREMENTAL_CHOICES), usage) or "watermark"
    )
    if incremental == "snapshot" and watermark is not None:
        raise GrammarError(
            "incremental=snapshot follows the table's commits: leave out watermark=",
            token=options["watermark"][0],
            usage=usage,
        )
    if incremental == "watermark" and watermark is None:
        raise GrammarError(
            "missing watermark=<column> (the column that only grows), or incremental=snapshot "
            "(the rows each Iceberg or Delta commit appended)",
            usage=usage,
        )
    return ScheduleCommand(
        source=source,
        every_seconds=every,
        cron=cron,
        watermark=watermark,
        incremental=incremental,
        tps=_value(options, "tps", _bounded("tps", limits.max_tps), usage),
        topic=cast(Topic, _value(options, "topic", _choice(("auto", "live")), usage) or "auto"),
        lookback_seconds=_value(options, "lookback", parse_duration, usage) or 0,
        headers=_value(options, "headers", parse_headers, usage) or (),
        idle_after_days=_value(options, "idle_after", _idle_days, usage),
        on_error=cast(OnError | None, _value(options, "on_error", _choice(ON_ERROR_CHOICES), usage)),
        watch=_value(options, "watch", parse_drain_groups, usage) or (),
        where=parse_predicate(options["where"][1]) if "where" in options else None,
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
    wanted, other = (
        (RUN_ID_PATTERN, PIPELINE_ID_PATTERN) if kind == "run" else (PIPELINE_ID_PATTERN, RUN_ID_PATTERN)
    )
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


def _parse_open(args: list[str]) -> OpenCommand:
    usage = USAGE["open"]
    _at_most(args, 1, usage)
    return OpenCommand(_id(args[0], "run", usage) if args else None)


def _parse_help(args: list[str]) -> HelpCommand:
    usage = USAGE["help"]
    _at_most(args, 1, usage)
    if not args:
        return HelpCommand()
    if args[0].lower() not in USAGE:
        raise GrammarError(f"no such command (try one of: {', '.join(USAGE)})", token=args[0], usage=usage)
    return HelpCommand(args[0].lower())


def _pipeline_action(cls: type[PipelineAction], word: str) -> Callable[[list[str]], Command]:
    def parse_action(args: list[str]) -> Command:
        usage = USAGE[word]
        return cast(Command, cls(_id(_exactly_one(args, "pipeline id", usage), "pipeline", usage)))

    return parse_action


# The commands whose values the platform's limits bound.
_LIMITED: dict[str, Callable[[list[str], Limits], Command]] = {
    "plan": lambda args, limits: cast(PlanCommand, _parse_spec(PlanCommand, "plan", args, limits)),
    "schedule": _parse_schedule,
    "tps": lambda args, limits: parse_tps(args, max_tps=limits.max_tps),
}
_COMMANDS: dict[str, Callable[[list[str]], Command]] = {
    "status": _parse_status,
    "list": lambda args: ListCommand(cast(ListFilter, _keyword(args, ("mine", "running"), USAGE["list"]))),
    "cancel": lambda args: CancelCommand(
        _id(_exactly_one(args, "run id", USAGE["cancel"]), "run", USAGE["cancel"])
    ),
    "reconcile": lambda args: ReconcileCommand(
        _id(_exactly_one(args, "run id", USAGE["reconcile"]), "run", USAGE["reconcile"])
    ),
    "redrive": lambda args: RedriveCommand(
        _id(_exactly_one(args, "run id", USAGE["redrive"]), "run", USAGE["redrive"])
    ),
    "repair": lambda args: RepairCommand(
        _id(_exactly_one(args, "run id", USAGE["repair"]), "run", USAGE["repair"])
    ),
    "chart": lambda args: ChartCommand(
        _id(_exactly_one(args, "run id", USAGE["chart"]), "run", USAGE["chart"])
    ),
    "open": _parse_open,
    "help": _parse_help,
    "pipelines": lambda args: PipelinesCommand(
        cast(PipelineFilter, _keyword(args, ("mine", "idle"), USAGE["pipelines"]))
    ),
    **{word: _pipeline_action(cls, word) for cls, word in ACTION_WORDS.items()},
    "lag": parse_lag,
    "rewind": parse_rewind,
    "pause": run_or_pipeline("pause", _pipeline_action(PauseCommand, "pause")),
    "resume": run_or_pipeline("resume", _pipeline_action(ResumeCommand, "resume")),
    "sources": parse_sources,
}


def parse(text: str, limits: Limits | None = None) -> Command:
    """Parse the text after ``/replay`` (or the CLI's argv joined); raises only ``GrammarError``.

    ``limits``: the service's (``Settings.limits``); the settings' defaults when None."""
    limits = limits or Limits()
    tokens = tokenize(text, (*RUN_OPTIONS, *SCHEDULE_OPTIONS))
    if not tokens:
        raise GrammarError("no command given")
    word = tokens[0].lower()
    if (limited := _LIMITED.get(word)) is not None:
        return limited(tokens[1:], limits)
    handler = _COMMANDS.get(word)
    if handler is None:
        return cast(ReplayCommand, _parse_spec(ReplayCommand, "replay", tokens, limits))
    return handler(tokens[1:])

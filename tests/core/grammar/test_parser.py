"""The `/replay` grammar by example: what each command parses to, and the exact token each error names.

Properties over generated input (parse never fails otherwise; render round-trips) are in
`core/grammar/test_parser_properties.py`.
"""

from __future__ import annotations

import shlex
from datetime import UTC, date, datetime

import pytest

from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest
from daemon.core.grammar import (
    GENERAL_USAGE,
    MAX_HEADERS,
    USAGE,
    CancelCommand,
    Command,
    GrammarError,
    HelpCommand,
    ListCommand,
    PauseCommand,
    PipelineCommand,
    PipelinesCommand,
    PlanCommand,
    ReplayCommand,
    ResumeCommand,
    ScheduleCommand,
    StatusCommand,
    UnscheduleCommand,
    help_text,
    parse,
    render,
)
from daemon.core.grammar.predicates import Compare, Or
from daemon.core.grammar.values import check_source
from daemon.core.quantities import InvalidValue
from daemon.core.windows import DayWindow, RelativeWindow, TimeWindow

RUN = "r-0123456789ab"
PIPE = "p-0123456789ab"
WEEK = DayWindow(date(2024, 1, 1), date(2024, 1, 7))


# --- happy paths ------------------------------------------------------------------------------------


def test_replay_with_every_option() -> None:
    command = parse(
        "orders 2024-01-01..2024-01-07 tps=10k topic=live headers=team:Data,trace:a:b workers=8 ordering=none"
    )

    assert command == ReplayCommand(
        source="orders",
        window=WEEK,
        tps=10_000,
        topic="live",
        headers=(("team", "Data"), ("trace", "a:b")),
        workers=8,
        ordering="none",
    )


def test_transactional_delivery_is_a_run_option_and_reads_back_as_written() -> None:
    command = parse("orders 2024-01-01..2024-01-07 tps=5k delivery=transactional")

    assert command == ReplayCommand("orders", WEEK, tps=5_000, delivery="transactional")
    assert render(command).endswith(" delivery=transactional")
    assert parse(render(command)) == command


def test_transactional_delivery_sets_no_record_aside() -> None:
    """A dead letter goes out on its own producer, outside the task's transactions."""
    with pytest.raises(GrammarError) as caught:
        parse("orders 2024-01-01..2024-01-07 delivery=transactional on_error=dlq")

    assert "does not combine with on_error=dlq" in caught.value.reason


def test_a_ramp_is_a_duration_and_reads_back_as_written() -> None:
    command = parse("orders 2024-01-01..2024-01-07 tps=5k ramp=5m")

    assert command == ReplayCommand("orders", WEEK, tps=5_000, ramp_s=300)
    assert render(command) == "orders 2024-01-01..2024-01-07 tps=5000 ramp=5m"
    assert parse("plan orders last=6h ramp=90s") == PlanCommand("orders", RelativeWindow(21_600), ramp_s=90)


def test_the_original_timeline_takes_a_speed_and_a_ceiling_and_reads_back_as_written() -> None:
    command = parse("orders 2024-01-01..2024-01-07 tps=original speed=60x max=20k")

    assert command == ReplayCommand("orders", WEEK, tps=20_000, speed=60.0)
    assert render(command) == "orders 2024-01-01..2024-01-07 tps=original speed=60x max=20000"
    assert parse("orders last=6h tps=ORIGINAL speed=0.5") == ReplayCommand(
        "orders", RelativeWindow(21_600), speed=0.5
    )
    assert render(parse("orders last=6h tps=original")) == "orders last=6h tps=original speed=1x"


def test_a_byte_ceiling_is_whole_megabytes_and_reads_back_as_written() -> None:
    command = parse("orders 2024-01-01..2024-01-07 tps=5k ramp=5m max_mb=20")

    assert command == ReplayCommand("orders", WEEK, tps=5_000, ramp_s=300, max_mb=20)
    assert render(command) == "orders 2024-01-01..2024-01-07 tps=5000 ramp=5m max_mb=20"


def test_replay_defaults_are_left_to_the_service() -> None:
    assert parse("orders 2024-01-01..2024-01-07") == ReplayCommand("orders", WEEK)
    assert ReplayCommand("orders", WEEK).tps is None


def test_option_keys_are_case_insensitive_and_header_values_keep_case() -> None:
    command = parse("orders last=6h TPS=1.5k Topic=LIVE Headers=Team:DataEng")

    assert command == ReplayCommand(
        "orders", RelativeWindow(21_600), tps=1_500, topic="live", headers=(("Team", "DataEng"),)
    )


def test_plan_takes_the_same_options_but_is_a_different_command() -> None:
    plan = parse("plan orders 2024-01-01..2024-01-07 tps=10000")

    assert plan != ReplayCommand("orders", WEEK, tps=10_000)
    assert plan == PlanCommand("orders", WEEK, tps=10_000)
    assert not isinstance(plan, ReplayCommand)


def test_time_window() -> None:
    command = parse("orders 2024-01-01T10:00..2024-01-01T12:30Z")

    assert isinstance(command, ReplayCommand)
    assert command.window == TimeWindow(
        datetime(2024, 1, 1, 10, tzinfo=UTC), datetime(2024, 1, 1, 12, 30, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("status", StatusCommand()),
        (f"status {RUN}", StatusCommand(RUN)),
        ("status R-0123456789AB", StatusCommand(RUN)),
        (f"status `{RUN}`", StatusCommand(RUN)),
        ("list", ListCommand()),
        ("list mine", ListCommand("mine")),
        ("LIST running", ListCommand("running")),
        (f"cancel {RUN}", CancelCommand(RUN)),
        ("help", HelpCommand()),
        ("help schedule", HelpCommand("schedule")),
        ("pipelines", PipelinesCommand()),
        ("pipelines idle", PipelinesCommand("idle")),
        (f"pipeline {PIPE}", PipelineCommand(PIPE)),
        (f"pause {PIPE}", PauseCommand(PIPE)),
        (f"resume {PIPE}", ResumeCommand(PIPE)),
        (f"unschedule {PIPE}", UnscheduleCommand(PIPE)),
    ],
)
def test_short_commands(text: str, expected: Command) -> None:
    assert parse(text) == expected


def test_schedule_every() -> None:
    command = parse(
        "schedule orders every=15m watermark=updated_at tps=2k topic=live lookback=1h idle_after=14d"
    )

    assert command == ScheduleCommand(
        source="orders",
        every_seconds=900,
        cron=None,
        watermark="updated_at",
        tps=2_000,
        topic="live",
        lookback_seconds=3_600,
        idle_after_days=14,
    )


def test_schedule_following_table_commits() -> None:
    command = parse("schedule orders every=1h incremental=snapshot tps=5k")

    assert command == ScheduleCommand(
        source="orders", every_seconds=3_600, cron=None, watermark=None, incremental="snapshot", tps=5_000
    )
    assert render(command) == "schedule orders every=1h incremental=snapshot tps=5000"
    assert parse("schedule orders every=1h watermark=ts incremental=watermark") == parse(
        "schedule orders every=1h watermark=ts"
    )


@pytest.mark.parametrize(
    "text",
    [
        'schedule orders cron="*/15 * * * *" watermark=updated_at',
        "schedule orders cron='*/15 * * * *' watermark=updated_at",
        "schedule orders cron=\u201c*/15 * * * *\u201d watermark=updated_at",  # Slack smart quotes
        'schedule orders "cron=*/15  *  * * *" watermark=updated_at',
    ],
)
def test_schedule_cron_is_one_token(text: str) -> None:
    command = parse(text)

    assert command == ScheduleCommand("orders", None, "*/15 * * * *", "updated_at")


@pytest.mark.parametrize(
    "text",
    [
        "orders last=6h tps=5 where=merchant in ('m-1', 'm-2') and amount > 100",
        'orders last=6h where=merchant IN ("m-1","m-2") AND amount>100 tps=5',
        "orders last=6h where=\u201cmerchant in (\u2018m-1\u2019, \u2018m-2\u2019)"
        " and amount > 100\u201d tps=5",
        "orders last=6h WHERE=merchant in ('m-1', 'm-2') and amount > 100 TPS=5",
        'orders last=6h \'where=merchant in ("m-1", "m-2") and amount > 100\' tps=5',
        "orders last=6h tps=5 where=(merchant == 'm-1' or merchant = 'm-2') and amount > 100",
    ],
)
def test_a_filter_is_read_the_one_way_it_can_be_meant_wherever_it_is(text: str) -> None:
    """Quotes of any kind, any case, spaces or none, before or after the other options."""
    command = parse(text)

    assert command.tps == 5  # type: ignore[union-attr]
    assert render(command) == (
        "orders last=6h tps=5 where=merchant IN ('m-1', 'm-2') AND amount > 100"
        if "==" not in text
        else "orders last=6h tps=5 where=(merchant = 'm-1' OR merchant = 'm-2') AND amount > 100"
    )


def test_a_filter_ends_at_the_next_option_not_at_an_option_word_inside_it() -> None:
    command = parse("orders last=6h where=note = 'tps=9 and topic=live' or tps = 3 topic=live")

    assert command == ReplayCommand(
        "orders",
        RelativeWindow(6 * 3600),
        topic="live",
        where=Or((Compare("note", "=", "tps=9 and topic=live"), Compare("tps", "=", 3))),
    )


def test_cli_argv_with_a_filter_parses_like_slack_text() -> None:
    argv = ["orders", "last=6h", "where=merchant in ('m-1', \"m-2\") and amount > 100", "tps=5"]

    assert parse(shlex.join(argv)) == parse(" ".join(argv))


def test_cli_argv_joined_with_shlex_parses_like_slack_text() -> None:
    argv = ["schedule", "orders", "cron=0 6 * * mon-fri", "watermark=updated_at", "headers=team:data eng"]

    command = parse(shlex.join(argv))

    assert command == ScheduleCommand(
        "orders", None, "0 6 * * mon-fri", "updated_at", headers=(("team", "data eng"),)
    )


# --- errors: each names exactly the token at fault ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "token", "reason"),
    [
        ("orders last=6h pace=5", "pace=5", "unknown option 'pace'"),
        ("orders last=6h speed=5", "speed=5", "goes with tps=original"),
        ("orders last=6h tps=original speed=0x", "speed=0x", "between 0.01x and 100000x"),
        ("orders last=6h tps=original speed=1.234x", "speed=1.234x", "at most two decimals"),
        ("orders last=6h tps=original speed=fast", "speed=fast", "not a speed"),
        ("orders last=6h tps=original lag<5", "lag<5", "go with tps=auto"),
        ("orders last=6h tps=original ramp=5m", "ramp=5m", "is for a flat rate"),
        ("orders last=6h tps=original max=20m", "max=20m", "above this platform's maximum"),
        ("orders last=6h tps=5 max=5", "max=5", "also with tps=original"),
        ("orders last=6h tps=0", "tps=0", "at least 1"),
        ("orders last=6h tps=abc", "tps=abc", "not a number"),
        ("orders last=6h tps=-1", "tps=-1", "negative"),
        ("orders last=6h tps=1e99", "tps=1e99", "scientific notation"),
        ("orders last=6h tps=", "tps=", "no value given"),
        ("orders last=6h tps=20m", "tps=20m", "above this platform's maximum of 200000"),
        ("orders last=6h tps=1.2345k", "tps=1.2345k", "not a whole number"),
        ("orders last=6h workers=513", "workers=513", "above this platform's maximum of 64"),
        ("orders 2024-01-07..2024-01-01", "2024-01-07..2024-01-01", "window ends before it starts"),
        ("orders 2024-02-30..2024-03-01", "2024-02-30..2024-03-01", "'2024-02-30'"),
        ("orders 2024-01-01..2024-01-02T10:00", "2024-01-01..2024-01-02T10:00", "mixes a day and a time"),
        ("🔥🔥", "🔥🔥", "not a source name"),
        ("🔥🔥 last=6h", "🔥🔥", "not a source name"),
        ("orders\u200b last=6h", "orders\u200b", "U+200B"),
        ("orders last=6h\u200b", "last=6h\u200b", "U+200B"),
        ("\u0637\u0644\u0628\u0627\u062a last=6h", "\u0637\u0644\u0628\u0627\u062a", "not a source name"),
        ("orders \u202e2024-01-01", "\u202e2024-01-01", "U+202E"),
        ('orders last=6h headers="team:data', 'headers="team:data', "unbalanced double quote"),
        ("orders last=6h headers='team:data tps=5", "headers='team:data tps=5", "unbalanced single quote"),
        ("orders last=6h tps=5 tps=6", "tps=6", "given twice"),
        ("orders last=6h TPS=5 tps=6", "tps=6", "given twice"),
        ("orders last=6h headers=replay-run:x", "headers=replay-run:x", "reserved"),
        ("orders last=6h headers=Replay-Source:x", "headers=Replay-Source:x", "reserved"),
        ("orders last=6h headers=a:b,a:c", "headers=a:b,a:c", "given twice"),
        ("orders last=6h headers=a:", "headers=a:", "empty value"),
        ("orders last=6h headers=a", "headers=a", "needs a value"),
        ("orders last=6h headers=a:b,", "headers=a:b,", "stray comma"),
        ("orders last=6h headers=a/b:c", "headers=a/b:c", "may only use"),
        ("orders last=6h 10000", "10000", "not a positional argument"),
        ("orders last=6h last=1h", "last=1h", "right after the source"),
        ("orders tps=5", "tps=5", "expected a window"),
        ("tps=5 orders last=6h", "tps=5", "expected a source name"),
        ("2024-01-01 orders", "2024-01-01", "source name before the window"),
        ("Ord€rs last=6h", "Ord€rs", "not a source name"),
        ("stauts", "stauts", "did you mean `status`"),
        ("orders last=6h topic=dlq", "topic=dlq", "auto, live"),
        ("orders last=6h ordering=random", "ordering=random", "entity, none"),
        ("orders last=6h ramp=0", "ramp=0", "at least 1s"),
        ("orders last=6h ramp=2d", "ramp=2d", "at most"),
        ("orders last=6h ramp=fast", "ramp=fast", "not a duration"),
        ("orders last=6h max_mb=0", "max_mb=0", "at least 1"),
        ("orders last=6h max_mb=20k", "max_mb=20k", "above this platform's maximum of 10000"),
        ("orders last=6h max_mb=1.5", "max_mb=1.5", "not a whole number"),
        ("orders last=6h where=", "where=", "the filter is empty"),
        ("orders last=6h keys=", "keys=", "nothing listed"),
        ("orders last=6h keys=@", "keys=@", "no file after @"),
        ("orders last=6h keys=@a.txt keys=b", "keys=b", "given twice"),
        ("orders last=6h keys=a,,b", "keys=a,,b", "stray comma"),
        ("orders last=6h keys=a,b,a", "keys=a,b,a", "lists 'a' twice"),
        (
            "orders last=6h keys=" + ",".join(map(str, range(1001))),
            "keys=" + ",".join(map(str, range(1001))),
            "at most 1,000",
        ),
        ("orders last=6h types=a,", "types=a,", "stray comma"),
        ("orders last=6h fields=order_id,1st", "fields=order_id,1st", "not a column name"),
        ("orders last=6h snapshot=latest", "snapshot=latest", "not a table snapshot"),
        ("orders last=6h snapshot=-3", "snapshot=-3", "not a table snapshot"),
        ("orders last=6h snapshot=007", "snapshot=007", "no leading zero"),
        ("orders last=6h snapshot=" + "9" * 21, "snapshot=" + "9" * 21, "not a table snapshot"),
        ("schedule orders every=1h incremental=snapshot snapshot=3", "snapshot=3", "allowed for schedule"),
        ("orders last=6h where= tps=5", "where=", "the filter is empty"),
        ("orders last=6h where=amount >> 5", ">", "expected a value"),
        ("orders last=6h where=amount > 'abc tps=5", "'abc tps=5", "unbalanced quote"),
        ("orders last=6h where=amount > 5 merchant = 'x'", "merchant", "expected and, or"),
        ("orders last=6h where=amount in () tps=5", ")", "expected a value"),
        ("orders last=6h where=amount ~ 5", "~", "not an operator"),
        ("orders last=6h where=a=1 where=b=2", "where=b=2", "given twice"),
        (
            "schedule orders every=1h watermark=ts where=ts > 2024-01-01",
            "ts",
            "would break the pipeline's watermark",
        ),
        ("schedule orders every=1h watermark=ts where=", "where=", "the filter is empty"),
        ("schedule orders every=1h watermark=ts ramp=5m", "ramp=5m", "allowed for schedule"),
        ("cancel p-0123456789ab", "p-0123456789ab", "pipeline id"),
        ("cancel r-123", "r-123", "not a run id"),
        (f"status {RUN} extra", "extra", "unexpected"),
        ("pause x-0123456789ab", "x-0123456789ab", "not a run id (r-0123456789ab) or a pipeline id"),
        ("tps p-0123456789ab 5k", "p-0123456789ab", "that is a pipeline id"),
        ("tps r-0123456789ab fast", "fast", "not a number"),
        ("list everything", "everything", "mine, running"),
        ("help me", "me", "no such command"),
        ("schedule orders every=30s watermark=ts", "every=30s", "at least 1m"),
        ("schedule orders every=1h watermark=ts idle_after=36h", "idle_after=36h", "whole number of days"),
        ("schedule orders every=1h watermark=ts idle_after=1h", "idle_after=1h", "at least 1d"),
        ("schedule orders every=1h watermark=ts lookback=-1h", "lookback=-1h", "negative"),
        ("schedule orders every=1h watermark=ts workers=4", "workers=4", "allowed for schedule"),
        ("schedule orders every=1h watermark=1st", "watermark=1st", "not a column name"),
        ('schedule orders cron="*/15 * * *" watermark=ts', "cron=*/15 * * *", "5 fields"),
        ('schedule orders cron="? * * * *" watermark=ts', "cron=? * * * *", "may only use"),
        ('schedule orders cron="0 0 * foo *" watermark=ts', "cron=0 0 * foo *", "unknown name 'foo'"),
        ("schedule orders cron=*/15 * * * * watermark=ts", "*", "quote a cron expression"),
        ("schedule orders every=1h cron='* * * * *' watermark=ts", "cron=* * * * *", "not both"),
        (
            "schedule orders every=1h incremental=snapshot watermark=ts",
            "watermark=ts",
            "leave out watermark=",
        ),
        ("schedule orders every=1h incremental=cdc", "incremental=cdc", "watermark, snapshot"),
        ("orders last=6h delivery=twice", "delivery=twice", "idempotent, transactional"),
        ('orders last=6h ""', "", "empty argument"),
        ("orders last=6h trailing\\", "trailing\\", "lone backslash"),
    ],
)
def test_bad_input_names_the_exact_token(text: str, token: str, reason: str) -> None:
    with pytest.raises(GrammarError) as caught:
        parse(text)

    assert caught.value.token == token
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no command given"),
        ("orders last=6h where=(amount > 5", "expected `)` at the end of the filter"),
        ("orders last=6h where=amount between 1", "expected and at the end of the filter"),
        ("   \t ", "no command given"),
        ("orders", "missing window"),
        ("plan", "missing source"),
        ("cancel", "missing run id"),
        ("schedule", "missing source"),
        ("schedule orders watermark=ts", "missing every="),
        ("schedule orders every=1h", "missing watermark="),
        ("schedule orders every=1h incremental=snapshot lookback=1h", "incremental=snapshot has none"),
        ("pause", "missing run id or pipeline id"),
        ("tps r-0123456789ab", "missing the new rate"),
    ],
)
def test_missing_pieces_have_no_token(text: str, reason: str) -> None:
    with pytest.raises(GrammarError) as caught:
        parse(text)

    assert caught.value.token is None
    assert reason in caught.value.reason


def test_empty_text_shows_the_general_usage() -> None:
    with pytest.raises(GrammarError) as caught:
        parse("")

    assert caught.value.usage == GENERAL_USAGE
    assert str(caught.value) == f"no command given\nUsage: {GENERAL_USAGE}"


def test_error_text_is_token_reason_and_the_commands_usage() -> None:
    with pytest.raises(GrammarError) as caught:
        parse("orders last=6h pace=5")

    error = caught.value
    assert isinstance(error, BadRequest)
    assert error.usage == USAGE["replay"]
    assert str(error) == f"`pace=5`: {error.reason}\nUsage: {USAGE['replay']}"
    assert "tps, topic, headers, workers, ordering" in error.reason


def test_schedule_errors_show_the_schedule_usage() -> None:
    with pytest.raises(GrammarError) as caught:
        parse("schedule orders every=1h watermark=ts speed=5")

    assert caught.value.usage == USAGE["schedule"]
    assert "every, cron, watermark" in caught.value.reason


def test_header_bytes_are_capped_per_value_and_in_all() -> None:
    """Headers ride on every replayed record: a payload smuggled into one is refused, naming the cap."""
    with pytest.raises(GrammarError, match="value is 1,025 bytes; at most 1,024"):
        parse(f"orders last=6h headers=big:{'x' * 1025}")
    five = ",".join(f"h{i}:{'y' * 900}" for i in range(5))
    with pytest.raises(GrammarError, match="at most 4,096 in all"):
        parse(f"orders last=6h headers={five}")
    with pytest.raises(BadRequest, match="at most 1,024"):  # the API's body is held to the same limits
        ReplayBody(source="orders", window="last=6h", headers={"big": "x" * 1025}).command(ReplayCommand)


def test_command_words_are_not_source_names() -> None:
    """A catalog source named like a command could never be replayed: it is refused as a source."""
    for word in ("reconcile", "repair", "redrive", "chart"):
        with pytest.raises(InvalidValue, match="is a command, not a source"):
            check_source(word)


def test_too_many_headers() -> None:
    headers = ",".join(f"h{i}:v" for i in range(MAX_HEADERS + 1))

    with pytest.raises(GrammarError, match="too many headers"):
        parse(f"orders last=6h headers={headers}")


def test_reserved_words_are_never_sources() -> None:
    with pytest.raises(GrammarError, match="is a command"):
        ReplayCommand("status", WEEK)


def test_commands_validate_themselves() -> None:
    with pytest.raises(GrammarError, match="tps must be between"):
        ReplayCommand("orders", WEEK, tps=0)
    with pytest.raises(GrammarError, match="exactly one of every= or cron="):
        ScheduleCommand("orders", 900, "* * * * *", "ts")
    with pytest.raises(GrammarError, match="not a run id"):
        CancelCommand("r-nothex")


def test_a_key_list_never_opens_with_a_key_that_reads_as_a_file() -> None:
    # keys=@x names a file of keys, so the command that would render as keys=@a cannot be built
    with pytest.raises(GrammarError, match="names a file of keys"):
        ReplayCommand("orders", WEEK, keys=("@a",))
    command = parse("orders last=6h keys=a,@b")

    assert isinstance(command, ReplayCommand)
    assert command.keys == ("a", "@b") and command.keys_file is None
    assert parse(render(command)) == command


def test_help_text_lists_every_usage_line_and_examples() -> None:
    text = help_text()

    for line in USAGE.values():
        assert line in text
    assert "Examples:" in text
    assert help_text("cancel") == f"Usage: {USAGE['cancel']}"


def test_render_is_canonical() -> None:
    assert render(parse("orders 2024-01-01..2024-01-07 topic=auto TPS=10k ordering=entity")) == (
        "orders 2024-01-01..2024-01-07 tps=10000"
    )
    assert render(parse('schedule orders watermark=ts cron="0  6 * * *" lookback=0')) == (
        'schedule orders cron="0 6 * * *" watermark=ts'
    )

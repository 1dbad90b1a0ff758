"""The forgiving grammar: every accepted spelling reads as exactly one canonical command, and what is
still refused names the word or character at fault, with the corrected command when only one exists."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from daemon.config.settings import load_settings
from daemon.contract.models import ReplayBody
from daemon.core.errors import ConfigError
from daemon.core.grammar import CEILINGS, GrammarError, Limits, PlanCommand, ReplayCommand, parse, render
from daemon.core.windows import DayWindow, TimeWindow, bounds, label, parse_window, resolve

ACCEPTED = [
    ("orders 2024-01-01\u20132024-01-07", "orders 2024-01-01..2024-01-07"),  # en dash
    ("orders 2024-01-01\u20142024-01-07", "orders 2024-01-01..2024-01-07"),  # em dash
    ("orders 2024-01-01\u22122024-01-07", "orders 2024-01-01..2024-01-07"),  # minus sign
    ("orders 2024-01-01\u20122024-01-07", "orders 2024-01-01..2024-01-07"),  # figure dash
    ("orders 2024-01-01\u20262024-01-07", "orders 2024-01-01..2024-01-07"),  # ellipsis
    ("orders 2024-01-01T10:00\u20132024-01-01T12:30", "orders 2024-01-01T10:00..2024-01-01T12:30"),
    ("orders 2024-01-01 .. 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01 \u2013 2024-01-07 tps=5k", "orders 2024-01-01..2024-01-07 tps=5000"),
    ("orders 2024-01-01 - 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01 to 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01 TO 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01.. 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01 ..2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("orders 2024-01-01\u2013 2024-01-07", "orders 2024-01-01..2024-01-07"),
    ("plan orders 2024-01-01 to 2024-01-07 topic=live", "plan orders 2024-01-01..2024-01-07 topic=live"),
    ("orders last 6h", "orders last=6h"),
    ("orders Last 6h tps=1k", "orders last=6h tps=1000"),
    ("orders last=1h30m", "orders last=90m"),
    ("orders last 2d12h", "orders last=60h"),
    ("orders last=1d1s", "orders last=86401s"),
    ("orders today", "orders today"),
    ("orders Yesterday", "orders yesterday"),
    ("Orders last=6h", "orders last=6h"),
    ("ORDERS 2024-01-01", "orders 2024-01-01"),
    ("plan Orders today", "plan orders today"),
    ("schedule Orders every=1h30m watermark=ts", "schedule orders every=90m watermark=ts"),
    ("orders 2024-01-01..2024-01-07 tz=Europe/Paris", "orders 2024-01-01..2024-01-07 tz=Europe/Paris"),
    ("orders yesterday tz=europe/paris", "orders yesterday tz=Europe/Paris"),
    ("orders 2024-01-01 to 2024-01-02 tps=1k TZ=utc", "orders 2024-01-01..2024-01-02 tz=UTC tps=1000"),
    (
        "orders 2024-07-01T10:00..2024-07-01T12:00 tz=Europe/Paris",
        "orders 2024-07-01T10:00..2024-07-01T12:00 tz=Europe/Paris",
    ),
    (  # an explicit offset wins over tz=, and is rendered as that zone's wall clock
        "orders 2024-07-01T08:00Z..2024-07-01T10:00Z tz=Europe/Paris",
        "orders 2024-07-01T10:00..2024-07-01T12:00 tz=Europe/Paris",
    ),
]


@pytest.mark.parametrize(("typed", "canonical"), ACCEPTED)
def test_each_accepted_form_renders_to_one_canonical_command(typed: str, canonical: str) -> None:
    command = parse(typed)

    assert render(command) == canonical
    assert parse(canonical) == command


REFUSED = [
    # (typed, the word blamed, in the reason, the corrected command or None)
    (
        "orders 2024-01-01...2024-01-07",
        "2024-01-01...2024-01-07",
        "is not a date",
        "orders 2024-01-01..2024-01-07",
    ),
    (
        "orders 2024-01-01-2024-01-07 tps=5k",
        "2024-01-01-2024-01-07",
        "not a window",
        "orders 2024-01-01..2024-01-07 tps=5000",
    ),
    (
        "orders 2024-01-01 2024-01-07",
        "2024-01-07",
        "a range is written start..end",
        "orders 2024-01-01..2024-01-07",
    ),
    ("orders 6h", "6h", "not a window", "orders last=6h"),
    ("orders last6h topic=live", "last6h", "not a window", "orders last=6h topic=live"),
    ("orders 1h30m", "1h30m", "not a window", "orders last=90m"),
    ("orders last 6x", "6x", "unknown unit 'x'", None),
    ("orders last 30m1h", "30m1h", "largest first", None),
    ("orders last", "last", "give the duration after last", None),
    ("orders last tps=5k", "last", "give the duration after last", None),
    (
        "orders 2024-01-01\u2014",
        "2024-01-01\u2014",
        "U+2014 (EM DASH) is not between two days or times",
        None,
    ),
    ("orders \u2013", "\u2013", "U+2013 (EN DASH) is not between two days or times", None),
    ("orders 2024-01-01 \u2014 tps=5k", "\u2014", "U+2014 (EM DASH) outside a range", None),
    ("orders last=6h \u2026", "\u2026", "U+2026 (HORIZONTAL ELLIPSIS) outside a range", None),
    ("orders 2024-01-01\u2013\u20132024-01-07", "2024-01-01\u2013\u20132024-01-07", "U+2013", None),
    ("orders 2024-01-01T10:00\u201305:00", "2024-01-01T10:00\u201305:00", "U+2013 (EN DASH)", None),
    ("orders 2024-01-01 to tps=5k", "to", "expected an option", None),
    ("orders 2024-01-01..2024-01-07 tz=Europe/Pariss", "tz=Europe/Pariss", "did you mean Europe/Paris", None),
    (
        "orders 2024-01-01..2024-01-07 tz=Mars/Olympus",
        "tz=Mars/Olympus",
        "unknown time zone 'Mars/Olympus'",
        None,
    ),
    ("orders last=6h tz=UTC tz=UTC", "tz=UTC", "given twice", None),
    (
        "orders last=6h tps=500000",
        "tps=500000",
        "tps=500000 is above this platform's maximum of 200000",
        None,
    ),
    ("orders last=6h workers=65", "workers=65", "workers=65 is above this platform's maximum of 64", None),
    ("orders last=6h topic=live tps=auto max=300k lag<5k group=g", "max=300k", "maximum of 200000", None),
    ("tps r-0123456789ab 250k", "250k", "tps=250000 is above this platform's maximum of 200000", None),
    ("schedule orders every=1h watermark=ts tps=1m", "tps=1m", "maximum of 200000", None),
]


@pytest.mark.parametrize(("typed", "token", "reason", "corrected"), REFUSED)
def test_what_is_refused_names_the_word_and_the_one_correction(
    typed: str, token: str, reason: str, corrected: str | None
) -> None:
    with pytest.raises(GrammarError) as caught:
        parse(typed)

    assert caught.value.token == token
    assert reason in caught.value.reason
    assert caught.value.suggestion == corrected
    if corrected is not None:
        assert f"did you mean `{corrected}`?" in str(caught.value)
        parse(corrected)  # the correction itself is a command


def test_the_grammar_takes_its_limits_from_the_service_settings() -> None:
    """Raising REPLAY_MAX_TPS/REPLAY_MAX_WORKERS raises what the ack accepts, and nothing more."""
    default = load_settings({})
    raised = load_settings({"REPLAY_MAX_TPS": "300000", "REPLAY_MAX_WORKERS": "96"})

    assert default.limits == Limits() == Limits(max_tps=default.max_tps, max_workers=default.max_workers)
    with pytest.raises(GrammarError, match="maximum of 200000"):
        parse("orders last=6h tps=300k", default.limits)
    command = parse("orders last=6h tps=300k workers=96", raised.limits)
    assert isinstance(command, ReplayCommand) and (command.tps, command.workers) == (300_000, 96)
    with pytest.raises(GrammarError, match="tps=300001 is above this platform's maximum of 300000"):
        parse("orders last=6h tps=300001", raised.limits)
    with pytest.raises(GrammarError, match="workers=97 is above this platform's maximum of 96"):
        parse("orders last=6h workers=97", raised.limits)


def test_limits_never_exceed_the_grammars_ceilings() -> None:
    with pytest.raises(ValueError, match="max_tps"):
        Limits(max_tps=CEILINGS.max_tps + 1)
    with pytest.raises(ConfigError, match="REPLAY_MAX_WORKERS"):
        load_settings({"REPLAY_MAX_WORKERS": str(CEILINGS.max_workers + 1)})


def test_a_zoned_window_is_read_in_that_zone_and_sent_as_utc_bounds() -> None:
    command = parse("plan orders 2024-01-01..2024-01-07 tz=Europe/Paris")
    assert isinstance(command, PlanCommand) and command.window == DayWindow(
        datetime(2024, 1, 1).date(), datetime(2024, 1, 7).date()
    )

    fixed = resolve(command.window, datetime(2024, 5, 1, tzinfo=UTC), command.tz)
    assert bounds(fixed) == (datetime(2023, 12, 31, 23, tzinfo=UTC), datetime(2024, 1, 7, 23, tzinfo=UTC))
    body = ReplayBody.of(command)
    assert (body.window, body.tz) == ("2024-01-01..2024-01-07", "Europe/Paris")
    assert body.command(PlanCommand) == command


def test_zoned_times_are_converted_to_utc_when_parsed_and_survive_the_wire() -> None:
    command = parse("orders 2024-07-01T10:00..2024-07-01T12:30 tz=Europe/Paris")
    assert isinstance(command, ReplayCommand)
    assert command.window == TimeWindow(
        datetime(2024, 7, 1, 8, tzinfo=UTC), datetime(2024, 7, 1, 10, 30, tzinfo=UTC)
    )
    body = ReplayBody.of(command)
    assert (body.window, body.tz) == ("2024-07-01T10:00..2024-07-01T12:30", "Europe/Paris")
    assert body.command(ReplayCommand) == command


def test_without_tz_windows_stay_utc() -> None:
    command = parse("orders 2024-07-01T10:00..2024-07-01T12:30")
    assert isinstance(command, ReplayCommand) and command.tz is None
    assert command.window == TimeWindow(
        datetime(2024, 7, 1, 10, tzinfo=UTC), datetime(2024, 7, 1, 12, 30, tzinfo=UTC)
    )
    assert "tz" not in render(command)


@pytest.mark.parametrize(
    ("typed", "now", "start", "end"),
    [
        ("today", datetime(2024, 3, 1, 23, 30, tzinfo=UTC), datetime(2024, 3, 1), datetime(2024, 3, 2)),
        ("yesterday", datetime(2024, 3, 1, 0, 10, tzinfo=UTC), datetime(2024, 2, 29), datetime(2024, 3, 1)),
        (  # 00:30 in Paris on 2 March: its yesterday is 1 March, Paris time
            "yesterday tz=Europe/Paris",
            datetime(2024, 3, 1, 23, 30, tzinfo=UTC),
            datetime(2024, 2, 29, 23),
            datetime(2024, 3, 1, 23),
        ),
        (  # the day the clocks go forward has 23 hours
            "today tz=Europe/Paris",
            datetime(2024, 3, 31, 12, tzinfo=UTC),
            datetime(2024, 3, 30, 23),
            datetime(2024, 3, 31, 22),
        ),
    ],
)
def test_today_and_yesterday_are_whole_days_of_utc_or_the_given_zone(
    typed: str, now: datetime, start: datetime, end: datetime
) -> None:
    command = parse(f"orders {typed}")
    assert isinstance(command, ReplayCommand)

    fixed = resolve(command.window, now, command.tz)

    assert bounds(fixed) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))


def test_an_ambiguous_wall_clock_is_rendered_in_utc_so_it_round_trips() -> None:
    """02:30 on the night the clocks go back happens twice in Paris: the second one is written in UTC."""
    second = TimeWindow(datetime(2024, 10, 27, 1, 30, tzinfo=UTC), datetime(2024, 10, 27, 3, tzinfo=UTC))

    text = label(second, "Europe/Paris")

    assert text == "2024-10-27T01:30Z..2024-10-27T04:00"
    assert parse_window(text, "Europe/Paris") == second

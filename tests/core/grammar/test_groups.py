"""`lag` and `rewind` in the `/replay` grammar: round trips over generated commands, junk that only
ever raises grammar errors, and errors that name the token at fault with the command's usage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.grammar import (
    RESERVED,
    USAGE,
    GrammarError,
    LagCommand,
    RewindCommand,
    help_text,
    parse,
    render,
)

names = st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)
targets = st.sampled_from(["earliest", "latest"]) | st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
)
clusters = st.none() | st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)
commands = st.builds(LagCommand, names, st.none() | names, clusters) | st.builds(
    RewindCommand, names, names, targets, clusters
)
FRAGMENTS = [
    "lag",
    "rewind",
    "svc",
    "orders",
    "to=",
    "to=earliest",
    "to=2024-01-01T10:00",
    "to=x",
    "cluster=eu",
    "cluster=EU",
    "a=b",
    "$",
]


@given(commands)
def test_lag_and_rewind_render_to_text_that_parses_back(command: LagCommand | RewindCommand) -> None:
    assert parse(render(command)) == command


@settings(max_examples=200)
@given(
    st.sampled_from(["lag", "rewind"]), st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=5)
)
def test_any_lag_or_rewind_text_parses_or_raises_a_grammar_error_with_its_usage(
    word: str, parts: list[str]
) -> None:
    try:
        command = parse(" ".join([word, *parts]))
    except GrammarError as error:
        assert str(error).endswith(f"Usage: {error.usage}")
    else:
        assert parse(render(command)) == command


@pytest.mark.parametrize(
    ("text", "token", "reason"),
    [
        ("lag", None, "missing consumer group id"),
        ("lag svc orders extra", "extra", "unexpected extra argument"),
        ("lag svc topic=orders", "topic=orders", "unknown option 'topic' (allowed for lag: cluster)"),
        ("lag svc cluster=Prod", "cluster=Prod", "not a cluster name"),
        ("lag svc cluster=eu cluster=us", "cluster=us", "given twice"),
        ("rewind svc orders to=latest cluster=", "cluster=", "not a cluster name"),
        ("lag svc/x", "svc/x", "not a consumer group id"),
        ("rewind svc", None, "missing topic"),
        ("rewind svc orders", None, "missing to="),
        ("rewind svc orders to=yesterday", "to=yesterday", "'yesterday' is not a date"),
        ("rewind svc orders to=2024-02-30", "to=2024-02-30", "not a real date"),
        ("rewind svc orders to=1969-12-31", "to=1969-12-31", "before 1970"),
        ("rewind svc orders at=latest", "at=latest", "unknown option 'at'"),
        ("rewind svc orders to=latest to=earliest", "to=earliest", "given twice"),
        ("rewind svc or*ders to=latest", "or*ders", "not a topic name"),
    ],
)
def test_a_bad_lag_or_rewind_names_the_token_and_shows_the_usage(
    text: str, token: str | None, reason: str
) -> None:
    with pytest.raises(GrammarError) as caught:
        parse(text)

    assert caught.value.token == token
    assert reason in caught.value.reason
    assert caught.value.usage == USAGE[text.split()[0]]


def test_times_are_utc_and_a_day_means_its_midnight() -> None:
    assert parse("rewind svc orders to=2024-01-01") == RewindCommand(
        "svc", "orders", datetime(2024, 1, 1, tzinfo=UTC)
    )
    shifted = parse("rewind svc orders to=2024-01-01T12:00+02:00")
    assert isinstance(shifted, RewindCommand) and shifted.to == datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    assert render(shifted) == "rewind svc orders to=2024-01-01T10:00"


def test_a_cluster_is_named_after_the_topic_and_rendered_back() -> None:
    asked = parse("rewind svc orders to=latest cluster=eu-west")
    assert asked == RewindCommand("svc", "orders", "latest", cluster="eu-west")
    assert render(asked) == "rewind svc orders to=latest cluster=eu-west"
    assert parse("lag svc cluster=eu-west") == LagCommand("svc", None, "eu-west")


def test_a_command_built_in_code_is_held_to_the_same_rules() -> None:
    with pytest.raises(GrammarError, match="not a consumer group id"):
        LagCommand("bad group")
    with pytest.raises(GrammarError, match="to must be a time, earliest or latest"):
        RewindCommand("svc", "orders", "yesterday")  # type: ignore[arg-type]  # what a careless caller sends
    with pytest.raises(TypeError, match="timezone-aware"):
        RewindCommand("svc", "orders", datetime(2024, 1, 1))


def test_lag_and_rewind_are_commands_not_sources_and_have_help() -> None:
    assert {"lag", "rewind"} <= RESERVED
    assert USAGE["lag"] in help_text() and USAGE["rewind"] in help_text()

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.errors import BadRequest
from daemon.core.quantities import (
    DAY,
    MAX_AUTO_PARTITIONS,
    MAX_DURATION_SECONDS,
    InvalidValue,
    parse_count,
    parse_duration,
    partitions_for_rate,
    render_count,
    render_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10000", 10_000),
        ("10k", 10_000),
        ("10K", 10_000),
        ("1.5m", 1_500_000),
        ("2M", 2_000_000),
        ("1_000", 1_000),
        ("1.5k", 1_500),
        ("0.001k", 1),
        ("3b", 3_000_000_000),
        ("0", 0),
    ],
)
def test_counts_people_type(text: str, expected: int) -> None:
    assert parse_count(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no value given"),
        ("abc", "not a number"),
        ("-5", "must not be negative"),
        ("1e99", "scientific notation"),
        ("1.2345k", "not a whole number"),
        ("0.5", "not a whole number"),
        ("10,000", "thousands separators"),
        ("1__000", "not a number"),
        ("_1", "not a number"),
        ("1.", "not a number"),
        ("9" * 41, "too long"),
        ("١٢", "not a number"),  # Arabic-Indic digits: int() would accept them, we do not
    ],
)
def test_bad_counts_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_count(text)

    assert reason in caught.value.reason
    assert caught.value.token == text
    assert isinstance(caught.value, BadRequest)


def test_count_range_is_checked_after_scaling() -> None:
    assert parse_count("10m", minimum=1, maximum=10_000_000) == 10_000_000
    with pytest.raises(InvalidValue, match="at most 10000000"):
        parse_count("10.5m", minimum=1, maximum=10_000_000)
    with pytest.raises(InvalidValue, match="at least 1"):
        parse_count("0k", minimum=1)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("1h", 3_600), ("2d", 172_800), ("1w", 604_800), ("1.5h", 5_400), ("0", 0)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no value given"),
        ("15", "needs a unit"),
        ("5y", "unknown unit"),
        ("-1h", "cannot be negative"),
        ("0.5s", "whole number of seconds"),
        ("soon", "not a duration"),
        ("3661d", "at most 3660d"),
    ],
)
def test_bad_durations_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_duration(text)

    assert reason in caught.value.reason


def test_duration_minimum_is_shown_in_the_users_units() -> None:
    with pytest.raises(InvalidValue, match="at least 1m"):
        parse_duration("30s", minimum=60)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (90, "90s"), (5_400, "90m"), (7 * DAY, "1w")])
def test_render_duration_picks_the_largest_exact_unit(seconds: int, text: str) -> None:
    assert render_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**30))
def test_count_round_trip(value: int) -> None:
    assert parse_count(render_count(value)) == value


@given(
    st.integers(min_value=0, max_value=10**12), st.sampled_from([("k", 1_000), ("m", 10**6), ("b", 10**9)])
)
def test_suffixed_counts_scale_exactly(value: int, suffix: tuple[str, int]) -> None:
    letter, scale = suffix

    assert parse_count(f"{value}{letter}") == value * scale
    assert parse_count(f"{value:_}{letter.upper()}") == value * scale


@given(st.integers(min_value=0, max_value=MAX_DURATION_SECONDS))
def test_duration_round_trip(seconds: int) -> None:
    assert parse_duration(render_duration(seconds)) == seconds


@given(st.text(max_size=50))
def test_count_parser_only_raises_invalid_value(text: str) -> None:
    with contextlib.suppress(InvalidValue):
        parse_count(text)


@given(tps=st.integers(-10, 10_000_000), more=st.integers(0, 1_000_000), record_bytes=st.integers(0, 1 << 20))
def test_partitions_for_a_new_topic_grow_with_the_rate_within_bounds(
    tps: int, more: int, record_bytes: int
) -> None:
    partitions = partitions_for_rate(tps, record_bytes)
    assert 1 <= partitions <= MAX_AUTO_PARTITIONS
    assert partitions_for_rate(tps + more, record_bytes) >= partitions


def test_one_partition_carries_five_mebibytes_a_second() -> None:
    assert partitions_for_rate(10_240, 512) == 1
    assert partitions_for_rate(10_241, 512) == 2
    assert partitions_for_rate(10_000_000, 512) == MAX_AUTO_PARTITIONS

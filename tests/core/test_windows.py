from __future__ import annotations

import contextlib
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.quantities import InvalidValue
from daemon.core.windows import (
    MAX_DAYS,
    DayWindow,
    RelativeWindow,
    TimeWindow,
    bounds,
    days,
    label,
    parse_window,
    resolve,
)

NOW = datetime(2024, 3, 10, 12, 30, tzinfo=UTC)


def test_day_range_is_inclusive() -> None:
    window = parse_window("2024-01-01..2024-01-07")

    assert window == DayWindow(date(2024, 1, 1), date(2024, 1, 7))
    assert bounds(window) == (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 8, tzinfo=UTC))
    assert len(days(window)) == 7


def test_single_day_is_a_one_day_window() -> None:
    assert parse_window("2024-01-03") == DayWindow(date(2024, 1, 3), date(2024, 1, 3))


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01T10:00..2024-01-01T12:30",
        "2024-01-01T10:00:00..2024-01-01T12:30:00",
        "2024-01-01T10:00Z..2024-01-01T12:30Z",
        "2024-01-01T10:00+00:00..2024-01-01T12:30+00:00",
        "2024-01-01T11:00+01:00..2024-01-01T07:30-05:00",
    ],
)
def test_time_ranges_are_utc_and_half_open(text: str) -> None:
    window = parse_window(text)

    assert window == TimeWindow(
        datetime(2024, 1, 1, 10, tzinfo=UTC), datetime(2024, 1, 1, 12, 30, tzinfo=UTC)
    )
    assert isinstance(window, TimeWindow)
    assert window.start.tzinfo is UTC
    assert label(window) == "2024-01-01T10:00..2024-01-01T12:30"


def test_time_window_touching_midnight_does_not_claim_the_next_day() -> None:
    window = parse_window("2024-01-01T22:00..2024-01-02T00:00")

    assert isinstance(window, TimeWindow)
    assert days(window) == [date(2024, 1, 1)]


@pytest.mark.parametrize(
    ("text", "seconds"), [("last=6h", 21_600), ("last=2d", 172_800), ("LAST=90m", 5_400)]
)
def test_relative_windows(text: str, seconds: int) -> None:
    assert parse_window(text) == RelativeWindow(seconds)


def test_resolve_pins_relative_windows_to_now() -> None:
    assert resolve(RelativeWindow(3_600), NOW) == TimeWindow(NOW - timedelta(hours=1), NOW)
    fixed = DayWindow(date(2024, 1, 1), date(2024, 1, 2))
    assert resolve(fixed, NOW) is fixed


def test_resolve_refuses_a_naive_now() -> None:
    with pytest.raises(ValueError, match="aware"):
        resolve(RelativeWindow(60), datetime(2024, 1, 1))


def test_relative_windows_must_be_resolved_before_bounds() -> None:
    with pytest.raises(TypeError):
        bounds(RelativeWindow(60))  # type: ignore[arg-type]  # the wrong type is the point: refused at runtime


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2024-01-07..2024-01-01", "window ends before it starts"),
        ("2024-01-01T12:00..2024-01-01T12:00", "window ends before it starts"),
        ("2024-02-30..2024-03-01", "'2024-02-30' is not a real date"),
        ("2024-01-01..2024-01-02T10:00", "mixes a day and a time"),
        ("2024-01-01T10:00", "single time is not a window"),
        ("2024-01-01..", "both ends"),
        ("1969-12-31..1970-01-02", "before 1970"),
        ("2000-01-01..2010-12-31", "longer than 3660 days"),
        ("tomorrow", "not a window"),
        ("2024/01/01..2024/01/02", "is not a date"),
        ("2024-01-01T25:00..2024-01-02T00:00", "not a real date and time"),
        ("2024-01-01T10:00+24:00..2024-01-02T00:00", "impossible UTC offset"),
        ("last=0s", "at least 1s"),
        ("last=soon", "not a duration"),
        ("9999-12-31", "ends after"),
    ],
)
def test_bad_windows_name_the_token(text: str, reason: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        parse_window(text)

    assert caught.value.token == text
    assert reason in caught.value.reason


def test_time_window_converts_other_zones_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    window = TimeWindow(datetime(2024, 1, 1, 12, tzinfo=plus_two), datetime(2024, 1, 1, 13, tzinfo=plus_two))

    assert window.start == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert window.start.tzinfo is UTC


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(TypeError):
        TimeWindow(datetime(2024, 1, 1), datetime(2024, 1, 2))


day_windows = st.builds(
    lambda start, length: DayWindow(start, start + timedelta(days=length)),
    st.dates(min_value=date(1970, 1, 1), max_value=date(2200, 1, 1)),
    st.integers(min_value=0, max_value=MAX_DAYS - 1),
)
utc_moments = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
time_windows = st.builds(
    lambda start, length: TimeWindow(start, start + length),
    utc_moments,
    st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=MAX_DAYS)),
)
relative_windows = st.builds(RelativeWindow, st.integers(min_value=1, max_value=MAX_DAYS * 86_400))


@given(day_windows)
def test_day_window_bounds_span_whole_days(window: DayWindow) -> None:
    start, end = bounds(window)

    assert end - start == timedelta(days=(window.end - window.start).days + 1)
    assert start.time() == end.time() == datetime.min.time()


@given(relative_windows, st.datetimes(min_value=datetime(2000, 1, 1), timezones=st.just(UTC)))
def test_resolved_relative_window_ends_now(window: RelativeWindow, now: datetime) -> None:
    resolved = resolve(window, now)
    start, end = bounds(resolved)

    assert end == now
    assert end - start == timedelta(seconds=window.seconds)


@given(day_windows | time_windows)
def test_days_cover_exactly_the_bounds(window: DayWindow | TimeWindow) -> None:
    start, end = bounds(window)
    touched = days(window)

    assert touched[0] == start.date()
    assert datetime.combine(touched[-1], datetime.min.time(), UTC) < end
    assert datetime.combine(touched[-1] + timedelta(days=1), datetime.min.time(), UTC) >= end
    assert touched == [touched[0] + timedelta(days=i) for i in range(len(touched))]


@given(day_windows | time_windows | relative_windows)
def test_label_round_trips(window: DayWindow | TimeWindow | RelativeWindow) -> None:
    assert parse_window(label(window)) == window


@given(st.text(max_size=60))
def test_window_parser_only_raises_invalid_value(text: str) -> None:
    with contextlib.suppress(InvalidValue):
        parse_window(text)

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.errors import BadRequest
from daemon.core.watermarks import decode, encode, has_new_data, low_bound

moments = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))


@given(moments)
def test_timestamps_round_trip_through_text(moment: datetime) -> None:
    assert decode(encode(moment), moment) == moment


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_integers_round_trip_through_text(value: int) -> None:
    assert decode(encode(value), value) == value


@given(moments, moments)
def test_new_data_means_strictly_newer_than_the_committed_mark(high: datetime, committed: datetime) -> None:
    assert has_new_data(high, encode(committed)) == (high > committed)


@given(moments, st.integers(min_value=0, max_value=10 * 86_400))
def test_lookback_moves_the_low_bound_back_by_exactly_the_lookback(committed: datetime, seconds: int) -> None:
    low = low_bound(encode(committed), seconds, committed)

    assert low is not None
    assert decode(low, committed) == committed - timedelta(seconds=seconds)


def test_first_run_has_no_low_bound_and_an_empty_table_has_no_new_data() -> None:
    assert low_bound(None, 3600, datetime(2024, 1, 1, tzinfo=UTC)) is None
    assert not has_new_data(None, None)
    assert has_new_data(5, None)


def test_lookback_on_an_integer_watermark_is_refused() -> None:
    with pytest.raises(BadRequest, match="lookback needs a timestamp"):
        low_bound("41", 60, 42)

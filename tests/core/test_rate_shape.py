"""The ramp's arithmetic: the factor, the publishing time the ETA promises, the target line a chart
draws, and the rate as a card says it."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.rate_shape import RAMP_FROM, factor, publish_s, rate_label, targets
from daemon.core.run_control import RateChange

RAMPS = st.integers(1, 24 * 3600)


def sent_by(seconds: float, tps: float, ramp_s: int) -> float:
    """Events the straight line sends in its first ``seconds``, by the trapezoid rule on fine steps."""
    steps = 20_000
    width = seconds / steps
    return sum(tps * factor((k + 0.5) * width, ramp_s) * width for k in range(steps))


@given(elapsed=st.floats(-10, 1e6), ramp_s=RAMPS)
def test_the_factor_rises_from_a_tenth_to_one_and_never_above(elapsed: float, ramp_s: int) -> None:
    share = factor(elapsed, ramp_s)
    assert RAMP_FROM <= share <= 1.0
    assert factor(ramp_s, ramp_s) == 1.0 and factor(0, ramp_s) == RAMP_FROM
    assert factor(elapsed, None) == 1.0


@given(rows=st.integers(1, 10**9), tps=st.integers(1, 10**6))
def test_without_a_ramp_publishing_takes_rows_over_tps(rows: int, tps: int) -> None:
    assert publish_s(rows, tps, None) == rows / tps


@given(rows=st.integers(1, 10**7), tps=st.integers(1, 10**5), ramp_s=st.integers(1, 3600))
def test_the_ramp_delays_the_end_by_what_it_held_back_and_no_more(rows: int, tps: int, ramp_s: int) -> None:
    took = publish_s(rows, tps, ramp_s)
    flat = rows / tps
    assert flat <= took <= flat / RAMP_FROM + 1e-9  # never faster than flat, never slower than a tenth
    assert took <= flat + (1 - RAMP_FROM) / 2 * ramp_s + 1e-9
    if took >= ramp_s:  # the whole ramp was run: exactly its held-back time more
        assert took == pytest.approx(flat + (1 - RAMP_FROM) / 2 * ramp_s)


@pytest.mark.parametrize(("rows", "tps", "ramp_s"), [(2_000, 100, 60), (100_000, 1_000, 60), (5, 1, 300)])
def test_by_the_promised_time_the_straight_line_has_sent_every_row(rows: int, tps: int, ramp_s: int) -> None:
    took = publish_s(rows, tps, ramp_s)
    assert sent_by(took, tps, ramp_s) == pytest.approx(rows, rel=1e-4)


def test_a_run_longer_than_its_ramp_takes_the_ramps_lost_time_more() -> None:
    # 10,000 rows at 100/s take 100 s flat; a 60 s ramp from 10 % sends 33 s worth in its 60 s: 127 s
    assert publish_s(10_000, 100, 60) == pytest.approx(127.0)


def test_a_run_shorter_than_its_ramp_ends_inside_it() -> None:
    # 1,000 rows at 100/s: 10 s flat; the line's area, 0.1 t + 0.9 t^2 / 120, reaches 10 s at t
    took = publish_s(1_000, 100, 60)
    assert took < 60
    assert RAMP_FROM * took + (1 - RAMP_FROM) * took**2 / (2 * 60) == pytest.approx(10.0)


def test_the_rate_label_says_the_ramp_and_where_it_starts() -> None:
    assert rate_label(2_000, None) == "2,000/s"
    assert rate_label(2_000, 300) == "2,000/s after a 5m ramp from 200/s"


def test_a_flat_run_targets_its_rate_every_second() -> None:
    assert targets(1_000.0, 3, 500, (), None) == [500.0, 500.0, 500.0]


def test_the_target_line_rises_with_the_ramp_then_stays_at_the_rate() -> None:
    line = targets(1_000.0, 12, 1_000, (), 10)
    assert line[0] == pytest.approx(1_000 * (RAMP_FROM + (1 - RAMP_FROM) * 0.05))  # the first second's mean
    assert all(a < b for a, b in itertools.pairwise(line[:10]))  # rising through the ramp
    assert line[10:] == [1_000.0, 1_000.0]


def test_the_target_line_follows_changes_and_pauses_under_the_ramp() -> None:
    changes = (RateChange(at=1_002.0, tps=2_000), RateChange(at=1_004.0, tps=2_000, paused=True))
    line = targets(1_000.0, 6, 1_000, changes, 4)
    assert line[0] == pytest.approx(1_000 * factor(0.5, 4), rel=0.01)
    assert line[2] == pytest.approx(2_000 * factor(2.5, 4), rel=0.01)  # the new rate, still ramped
    assert line[4:] == [0.0, 0.0]  # paused


@given(start=st.floats(0, 2e9), seconds=st.integers(0, 50), tps=st.integers(1, 10**5), ramp_s=RAMPS)
def test_no_target_is_above_the_asked_rate(start: float, seconds: int, tps: int, ramp_s: int) -> None:
    line = targets(start, seconds, tps, (), ramp_s)
    assert len(line) == seconds
    assert all(0 < value <= tps * (1 + 1e-12) for value in line)
    assert not any(math.isnan(value) for value in line)

"""The rate chart is a real PNG of the job's per-second series, whatever the series looks like."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.contract.models import RateSeriesOut, ReconcileOut
from daemon.slack.rate_chart import rate_chart_png, render_run_chart
from daemon.slack.run_report import chart_title
from tests.fixtures.slack import wire_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
START = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def _size(png: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which follows the signature."""
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_a_run_with_a_burst_renders_a_png_of_the_charts_size() -> None:
    counts = [2_000] * 20 + [9_500] + [1_950] * 20
    png = rate_chart_png(
        RateSeriesOut(start=START, counts=counts, target_tps=2_000),
        title="r-0123456789ab · clean: every one of 89,000 event ids exactly once",
    )

    assert png.startswith(PNG_SIGNATURE)
    assert len(png) > 10_000
    assert _size(png) == (900, 400)


def test_the_burst_changes_the_picture() -> None:
    steady = RateSeriesOut(start=START, counts=[2_000] * 41, target_tps=2_000)
    burst = RateSeriesOut(start=START, counts=[2_000] * 20 + [9_500] + [2_000] * 20, target_tps=2_000)

    assert rate_chart_png(steady, title="t") != rate_chart_png(burst, title="t")


def test_a_title_with_dollar_signs_is_text_not_math() -> None:
    png = rate_chart_png(RateSeriesOut(start=START, counts=[1], target_tps=1), title="cost $5 and $ alone")

    assert png.startswith(PNG_SIGNATURE)


@pytest.mark.filterwarnings("error::UserWarning")  # a glyph the font lacks would warn on every chart
@settings(max_examples=15, deadline=None)  # each example draws a real figure
@given(
    st.lists(st.integers(min_value=0, max_value=10**9), max_size=1),
    st.integers(min_value=1, max_value=10**7),
    st.text(max_size=300),
)
def test_an_empty_or_one_point_series_never_raises(counts: list[int], target: int, title: str) -> None:
    png = rate_chart_png(RateSeriesOut(start=START, counts=counts, target_tps=target), title=title)

    assert png.startswith(PNG_SIGNATURE)


def test_a_runs_chart_is_titled_with_its_reconcile_verdict() -> None:
    reconcile = ReconcileOut(at=START, selected=41, found=41, missing=0, unexpected=0, duplicates=0)
    run = wire_run(state="succeeded", reconcile=reconcile)
    series = RateSeriesOut(start=START, counts=[2] * 20 + [1], target_tps=2)

    assert (
        chart_title(run.id, run.reconcile) == "r-0123456789ab · clean: every one of 41 event ids exactly once"
    )
    assert render_run_chart(run, series) == rate_chart_png(
        series, title=chart_title(run.id, reconcile), achieved=run.achieved_tps
    )


def test_a_ramped_or_changed_run_draws_the_line_it_was_asked_to_follow() -> None:
    counts = [100 * (k + 1) for k in range(10)] + [1_000] * 10
    flat = RateSeriesOut(start=START, counts=counts, target_tps=1_000)
    ramped = flat.model_copy(update={"targets": [min(1_000.0, 100.0 * (k + 1)) for k in range(20)]})
    unchanged = flat.model_copy(update={"targets": [1_000.0] * 20})

    assert rate_chart_png(ramped, title="t") != rate_chart_png(flat, title="t")
    assert rate_chart_png(unchanged, title="t") == rate_chart_png(flat, title="t")

"""The two mappings across the job seam, held both ways over generated values: what the daemon means
by a window or a rate change is exactly what the job reads (the core imports no job, the job no daemon).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from daemon.core import windows
from daemon.core.run_control import RateChange
from daemon.core.run_options import RunOptions, WindowKind
from daemon.usecases.job_specs import job_rate_changes, job_selection
from spark_job.control import ControlMessage
from spark_job.spec import model
from store.models import Run

days = st.dates(min_value=date(1970, 1, 1), max_value=date(2099, 12, 1))
instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2099, 1, 1), timezones=st.just(UTC)
)
changes = st.lists(
    st.builds(
        RateChange,
        at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
        tps=st.integers(min_value=0, max_value=10_000_000),
        paused=st.booleans(),
    ),
    max_size=20,
)


def _run(window: windows.DayWindow | windows.TimeWindow) -> Run:
    start, end = windows.bounds(window)
    kind = WindowKind.DAYS if isinstance(window, windows.DayWindow) else WindowKind.RANGE
    return Run(window_start=start, window_end=end, options=RunOptions(window=kind), watermark_column=None)


@given(days, st.integers(min_value=0, max_value=400))
def test_whole_days_are_the_same_days_on_the_partition_column_and_back(first: date, length: int) -> None:
    window = windows.DayWindow(first, min(first + timedelta(days=length), date(2099, 12, 31)))

    selected = job_selection(_run(window), "dt", "event_time")

    assert selected == model.DayWindow(column="dt", start_day=window.start, end_day=window.end)
    assert windows.DayWindow(selected.start_day, selected.end_day) == window


@given(instants, st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=30)))
def test_a_time_range_is_the_same_half_open_range_on_the_event_time_column_and_back(
    start: datetime, length: timedelta
) -> None:
    window = windows.TimeWindow(start, start + length)

    selected = job_selection(_run(window), "dt", "event_time")

    assert selected == model.TimeWindow(column="event_time", start=window.start, end=window.end)
    assert windows.TimeWindow(selected.start, selected.end) == window


@given(changes)
def test_rate_changes_reach_the_job_unchanged_and_come_back_equal(made: list[RateChange]) -> None:
    sent = ControlMessage(run_id="r-0123456789ab", version=len(made), changes=job_rate_changes(made))

    read = ControlMessage.decode(sent.encode())

    assert [RateChange(**asdict(change)) for change in read.changes] == made

"""Each partition's line (`daemon.core.partitions`): stored and read back whole, shares within 0..1."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.partitions import PartitionProgress, Partitions, PartitionState, from_job_report

AT = datetime(2024, 1, 8, 12, 0, tzinfo=UTC)

lines = st.builds(
    PartitionProgress,
    st.integers(min_value=0, max_value=10_000),
    st.none() | st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=0, max_value=10**9),
    st.integers(min_value=1, max_value=8),
    st.sampled_from(PartitionState),
)


@given(st.lists(lines, max_size=20), st.booleans())
def test_lines_read_back_as_they_were_stored(stored: list[PartitionProgress], final: bool) -> None:
    partitions = Partitions(AT, tuple(stored), final)
    assert Partitions.from_document(partitions.document()) == partitions


@given(lines)
def test_a_share_is_unknown_without_rows_and_within_zero_and_one_with_them(line: PartitionProgress) -> None:
    if line.rows is None:
        assert line.share is None
    else:
        assert line.share is not None and 0.0 <= line.share <= 1.0
        assert line.share == 1.0 or line.confirmed < line.rows


def test_the_jobs_report_is_every_partition_done_in_order() -> None:
    report = [
        {"partition": 1, "rows": 5, "confirmed": 5, "attempts": 2},
        {"partition": 0, "rows": 0, "confirmed": 0, "attempts": 1},
    ]
    partitions = from_job_report(report, AT)
    assert partitions.final and partitions.at == AT
    assert partitions.lines == (
        PartitionProgress(0, 0, 0, 1, PartitionState.DONE),
        PartitionProgress(1, 5, 5, 2, PartitionState.DONE),
    )
    assert [line.share for line in partitions.lines] == [1.0, 1.0]  # an empty partition is whole
    assert Partitions.from_document(None) is None

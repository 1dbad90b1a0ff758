"""The lag and rewind arithmetic (pure): totals never count an unknown as 0, the drain and the time to
zero follow from two samples, and a rewind's preview counts the events read again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.lag import (
    DrainState,
    GroupState,
    OffsetSample,
    PartitionOffsets,
    drain,
    lag_report,
)
from daemon.core.rewind import new_offset, parse_target, preview, target_label

OFFSETS = st.integers(min_value=0, max_value=10**12)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[PartitionOffsets, ...]:
    count = draw(st.integers(min_value=0, max_value=12))
    found = []
    for partition in range(count):
        end = draw(OFFSETS)
        committed = draw(st.none() | st.integers(min_value=0, max_value=end))
        found.append(PartitionOffsets("orders", partition, committed, end))
    return tuple(found)


@given(partitions())
def test_the_total_is_the_sum_of_the_known_lags_and_unknown_partitions_are_counted_apart(
    found: tuple[PartitionOffsets, ...],
) -> None:
    report = lag_report(OffsetSample(0.0, found))

    known = [p.end - p.committed for p in found if p.committed is not None]
    assert report.total == (sum(known) if known else None)
    assert report.unknown == sum(1 for p in found if p.committed is None)
    assert sorted(report.partitions, key=lambda p: p.partition) == sorted(found, key=lambda p: p.partition)


@given(partitions())
def test_the_hottest_partition_has_the_largest_known_lag_and_comes_first(
    found: tuple[PartitionOffsets, ...],
) -> None:
    report = lag_report(OffsetSample(0.0, found))

    known = [p.lag for p in found if p.lag is not None]
    if not known:
        assert report.hottest is None
        return
    assert report.hottest is not None and report.hottest.lag == max(known)
    assert report.partitions[0] == report.hottest
    lags = [p.lag for p in report.partitions]
    first_unknown = lags.index(None) if None in lags else len(lags)
    assert all(lag is None for lag in lags[first_unknown:])


def test_a_partition_without_a_committed_offset_has_no_lag_not_zero() -> None:
    report = lag_report(OffsetSample(0.0, (PartitionOffsets("orders", 0, None, 500),)))

    assert report.partitions[0].lag is None
    assert report.total is None and report.unknown == 1 and report.hottest is None


@given(
    st.lists(
        st.tuples(OFFSETS, st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=8
    ),
    st.floats(min_value=0.01, max_value=60, allow_nan=False),
)
def test_the_drain_is_the_committed_offsets_advance_over_the_time_between_samples(
    rows: list[tuple[int, int, int, int]], seconds: float
) -> None:
    first, second, consumed, produced, lag = [], [], 0, 0, 0
    for partition, (committed, lag_before, added, wanted) in enumerate(rows):
        read = min(wanted, lag_before + added)  # a consumer cannot pass the end
        first.append(PartitionOffsets("t", partition, committed, committed + lag_before))
        second.append(PartitionOffsets("t", partition, committed + read, committed + lag_before + added))
        consumed, produced, lag = consumed + read, produced + added, lag + lag_before + added - read

    found = drain(OffsetSample(10.0, tuple(first)), OffsetSample(10.0 + seconds, tuple(second)))

    if not rows:
        assert found.state == DrainState.UNKNOWN and found.consumed_per_s is None
        return
    assert found.consumed_per_s == pytest.approx(consumed / seconds)
    assert found.produced_per_s == pytest.approx(produced / seconds)
    assert found.lag == lag
    net = (consumed - produced) / seconds
    if lag == 0:
        assert found.state == DrainState.CAUGHT_UP and found.seconds_to_zero == 0
    elif net > 0:
        assert found.state == DrainState.DRAINING
        assert found.seconds_to_zero is not None
        assert found.seconds_to_zero == pytest.approx(lag / net)
        assert lag - net * found.seconds_to_zero == pytest.approx(0, abs=1e-6 * lag)
    else:
        assert found.state == DrainState.NOT_DRAINING and found.seconds_to_zero is None


def test_a_consumer_twice_as_fast_as_the_producer_reaches_zero_when_the_arithmetic_says() -> None:
    first = OffsetSample(0.0, (PartitionOffsets("t", 0, 1_000, 3_000),))
    second = OffsetSample(2.0, (PartitionOffsets("t", 0, 1_400, 3_200),))  # consumed 200/s, produced 100/s

    found = drain(first, second)

    assert (found.consumed_per_s, found.produced_per_s, found.lag) == (200.0, 100.0, 1_800)
    assert found.seconds_to_zero == pytest.approx(18.0)


def test_partitions_without_an_offset_in_both_samples_are_left_out_of_the_drain() -> None:
    first = OffsetSample(0.0, (PartitionOffsets("t", 0, None, 100), PartitionOffsets("t", 1, 10, 100)))
    second = OffsetSample(1.0, (PartitionOffsets("t", 0, 50, 200), PartitionOffsets("t", 1, 20, 100)))

    found = drain(first, second)

    assert found.consumed_per_s == 10.0 and found.produced_per_s == 0.0


def test_samples_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="after the first"):
        drain(OffsetSample(5.0, ()), OffsetSample(5.0, ()))


def test_only_a_group_nobody_consumes_with_may_be_reset() -> None:
    assert {state for state in GroupState if state.may_reset} == {GroupState.EMPTY, GroupState.DEAD}


@given(
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.none() | st.integers(-1, 3 * 10**9),
    st.sampled_from(["earliest", "latest", "time"]),
)
def test_a_new_offset_always_lies_within_the_partition(
    earliest: int, span: int, for_time: int | None, kind: str
) -> None:
    end = earliest + span
    to = parse_target("2024-01-01" if kind == "time" else kind)

    moved = new_offset(to, earliest=earliest, end=end, for_time=for_time)

    assert earliest <= moved <= end
    if kind == "time" and (for_time is None or for_time < 0):
        assert moved == end  # no record at or after the time: the end, as kafka-consumer-groups does


def test_the_preview_counts_events_read_again_and_a_forward_move_as_negative() -> None:
    found = preview(
        "svc",
        "orders",
        parse_target("2024-01-01T10:00"),
        current={0: 900, 1: 100},
        earliest={0: 0, 1: 0, 2: 0},
        end={0: 1_000, 1: 1_000, 2: 1_000},
        for_time={0: 400, 1: 700, 2: None},
    )

    assert [(m.partition, m.current, m.new, m.re_consumed) for m in found.moves] == [
        (0, 900, 400, 500),
        (1, 100, 700, -600),
        (2, None, 1_000, None),
    ]
    assert found.re_consumed == -100 and found.unknown == 1


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)))
def test_a_target_time_renders_to_text_that_parses_back(moment: datetime) -> None:
    assert parse_target(target_label(moment)) == moment


def test_earliest_and_latest_are_targets_in_any_case() -> None:
    assert (parse_target("EARLIEST"), parse_target("Latest")) == ("earliest", "latest")

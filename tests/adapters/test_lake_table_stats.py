"""`LakeTableStats` counts Iceberg and Delta tables from their metadata, as a full scan does.

The tables are the sample written by Spark with the release's runtimes (several commits, a delete
and an overwrite among them: `scripts/devtools/lake_tables.py`); the truth is what Spark's full scan
of each saw, at its current snapshot and at its first commit.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.core.errors import BadRequest
from daemon.core.grammar.predicates import parse_predicate
from daemon.usecases.catalog import TableRef
from daemon.usecases.ports import WindowRows
from tests.fixtures.spark import LakeCopy

pytestmark = [pytest.mark.spark]

FORMATS = ["iceberg", "delta"]
WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ref(copy: LakeCopy) -> TableRef:
    return TableRef(path=str(copy.path), format=copy.format)  # type: ignore[arg-type]  # one of FORMATS


@pytest.mark.parametrize("table_format", FORMATS)
def test_rows_per_day_from_metadata_are_what_a_full_scan_sees(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    """Pinned to the snapshot the scan saw: another test commits to these tables later on."""
    copy, stats = lake_copies[table_format], LakeTableStats()

    counted = {
        day.isoformat(): stats.count_window_rows(_ref(copy), WindowRows("dt", [day]), snapshot=copy.snapshot)
        for day in WEEK
    }

    assert counted == copy.days
    assert counted["2024-01-02"] < 300 and counted["2024-01-03"] < 300  # the delete and the overwrite count
    current = stats.snapshot(_ref(copy))
    assert current is not None
    assert stats.count_window_rows(_ref(copy), WindowRows("dt", WEEK)) == stats.count_window_rows(
        _ref(copy), WindowRows("dt", WEEK), snapshot=current
    )


@pytest.mark.parametrize("table_format", FORMATS)
def test_a_count_pinned_to_the_first_commit_sees_nothing_committed_after_it(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    copy, stats = lake_copies[table_format], LakeTableStats()

    pinned = {
        day.isoformat(): stats.count_window_rows(
            _ref(copy), WindowRows("dt", [day]), snapshot=copy.first_snapshot
        )
        for day in WEEK
    }

    assert {day: rows for day, rows in pinned.items() if rows} == copy.first_days


def test_a_time_window_counts_the_same_rows_in_every_format(
    lake_copies: dict[str, LakeCopy], sample_table: object
) -> None:
    stats = LakeTableStats()
    start, end = datetime(2024, 1, 4, 12, tzinfo=UTC), datetime(2024, 1, 6, 6, tzinfo=UTC)
    window = WindowRows("dt", WEEK[3:6], "updated_at", start, end)

    counts = {name: stats.count_window_rows(_ref(copy), window) for name, copy in lake_copies.items()}
    parquet = stats.count_window_rows(TableRef(path=str(sample_table)), window)

    assert counts == {"iceberg": parquet, "delta": parquet}  # days the delete and overwrite left alone
    assert 0 < parquet < sum(lake_copies["delta"].days[day.isoformat()] for day in WEEK[3:6])


@pytest.mark.parametrize("table_format", FORMATS)
def test_a_table_read_as_another_format_is_refused_by_name(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    other = "delta" if table_format == "iceberg" else "iceberg"
    wrong = TableRef(path=str(lake_copies[table_format].path), format=other)  # type: ignore[arg-type]

    with pytest.raises(BadRequest, match=rf"is not an? {other.capitalize()} table"):
        LakeTableStats().count_window_rows(wrong, WindowRows("dt", WEEK))


@pytest.mark.parametrize("table_format", FORMATS)
def test_a_column_the_table_is_not_partitioned_by_is_refused(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    with pytest.raises(BadRequest, match="is not partitioned by 'status'"):
        LakeTableStats().count_window_rows(_ref(lake_copies[table_format]), WindowRows("status", WEEK))


@pytest.mark.parametrize("table_format", FORMATS)
def test_a_snapshot_the_table_no_longer_has_is_refused_with_what_to_do(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    with pytest.raises(BadRequest, match="plan the window again"):
        LakeTableStats().count_window_rows(
            _ref(lake_copies[table_format]), WindowRows("dt", WEEK), snapshot="1234567"
        )


@pytest.mark.parametrize("table_format", FORMATS)
def test_the_watermark_high_is_the_newest_live_row_at_the_snapshot(
    lake_copies: dict[str, LakeCopy], sample_table: object, table_format: str
) -> None:
    """The newest event was deleted last (Iceberg: a delete file), so the metadata's upper bound is a
    value no row holds: the high mark is Spark's full scan's, now and at the first commit."""
    copy, stats = lake_copies[table_format], LakeTableStats()

    high = stats.max_value(_ref(copy), "updated_at", snapshot=copy.snapshot)
    first = stats.max_value(_ref(copy), "updated_at", snapshot=copy.first_snapshot)

    assert high == EPOCH + timedelta(microseconds=copy.high_us)
    assert first == EPOCH + timedelta(microseconds=copy.first_high_us)
    assert isinstance(first, datetime) and isinstance(high, datetime) and first < high
    deleted = stats.max_value(TableRef(path=str(sample_table)), "updated_at")
    assert isinstance(deleted, datetime) and deleted > high  # the Parquet sample still holds it


@pytest.mark.parametrize("table_format", FORMATS)
def test_a_watermark_column_that_is_not_a_time_or_a_number_is_refused(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    stats = LakeTableStats()
    with pytest.raises(BadRequest, match="timestamps or integers"):
        stats.max_value(_ref(lake_copies[table_format]), "status")
    with pytest.raises(BadRequest, match="no column 'nope'"):
        stats.max_value(_ref(lake_copies[table_format]), "nope")


def test_a_windows_histogram_of_its_own_times_is_the_same_in_every_format_and_sums_to_its_rows(
    lake_copies: dict[str, LakeCopy], sample_table: object
) -> None:
    """Days the delete and the overwrite left alone, at 3,600x (a day in 24 s) in 0.5 s buckets:
    the histogram a shaped replay's plan serves under its ceiling, counted from each format's rows."""
    stats = LakeTableStats()
    start, end = datetime(2024, 1, 4, 12, tzinfo=UTC), datetime(2024, 1, 6, 6, tzinfo=UTC)
    window = WindowRows("dt", WEEK[3:6], "updated_at", start, end)

    def histogram(table: TableRef) -> list[int]:
        return stats.time_histogram(table, window, snapshot=None, origin=start, speed=3_600.0, width=0.5)

    parquet = histogram(TableRef(path=str(sample_table)))
    found = {name: histogram(_ref(copy)) for name, copy in lake_copies.items()}

    assert found == {"iceberg": parquet, "delta": parquet}
    assert sum(parquet) == stats.count_window_rows(TableRef(path=str(sample_table)), window)
    assert len(parquet) <= (end - start).total_seconds() / 3_600 / 0.5  # nothing past the window's end
    # the sample spreads its events evenly over each day: every half hour of the window holds some
    assert min(parquet) > 0


def test_a_filtered_window_counts_what_a_full_scan_keeps_in_every_format(
    lake_copies: dict[str, LakeCopy], sample_table: Path
) -> None:
    """``where=``: the plan's count of the rows a filter keeps, on days the delete and the overwrite
    left alone, against a hand-written pyarrow filter over a full scan of the Parquet original."""
    stats = LakeTableStats()
    predicate = parse_predicate(
        "status in ('paid', 'shipped') and amount > 250"
        " or currency = 'GBP' and not updated_at < 2024-01-05T12:00"
    )
    window = WindowRows("dt", WEEK[3:6], filter=predicate)
    scan = ds.dataset(sample_table, format="parquet", partitioning="hive").to_table()
    days = pc.is_in(pc.cast(scan["dt"], pa.string()), pa.array([day.isoformat() for day in WEEK[3:6]]))
    kept = pc.or_kleene(
        pc.and_kleene(
            pc.is_in(scan["status"], pa.array(["paid", "shipped"])), pc.greater(scan["amount"], 250)
        ),
        pc.and_kleene(
            pc.equal(scan["currency"], "GBP"),
            pc.invert(pc.less(scan["updated_at"], pa.scalar(datetime(2024, 1, 5, 12, tzinfo=UTC)))),
        ),
    )
    expected = pc.sum(pc.and_kleene(days, kept).cast(pa.int64())).as_py()

    counts = {name: stats.count_window_rows(_ref(copy), window) for name, copy in lake_copies.items()}
    parquet = stats.count_window_rows(TableRef(path=str(sample_table)), window)

    assert counts == {"iceberg": expected, "delta": expected} and parquet == expected
    assert (
        0 < expected < stats.count_window_rows(TableRef(path=str(sample_table)), WindowRows("dt", WEEK[3:6]))
    )


@pytest.mark.parametrize("table_format", [*FORMATS, "parquet"])
def test_every_format_offers_a_filter_its_columns_by_kind(
    lake_copies: dict[str, LakeCopy], sample_table: Path, table_format: str
) -> None:
    ref = TableRef(path=str(sample_table)) if table_format == "parquet" else _ref(lake_copies[table_format])

    kinds = LakeTableStats().column_kinds(ref)

    assert {name: kinds[name] for name in ("event_id", "status", "amount", "updated_at")} == {
        "event_id": "string",
        "status": "string",
        "amount": "decimal",
        "updated_at": "timestamp",
    }

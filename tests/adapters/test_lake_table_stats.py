"""`LakeTableStats` counts Iceberg and Delta tables from their metadata, as a full scan does.

The tables are the sample written by Spark with the release's runtimes (several commits, a delete
and an overwrite among them: `scripts/devtools/lake_tables.py`); the truth is what Spark's full scan
of each saw, at its current snapshot and at its first commit.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.core.errors import BadRequest
from daemon.usecases.catalog import TableRef
from daemon.usecases.ports import WindowRows
from tests.fixtures.spark import LakeCopy

pytestmark = [pytest.mark.spark]

FORMATS = ["iceberg", "delta"]
WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]


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


def test_watermark_pipelines_are_refused_on_a_versioned_table(lake_copies: dict[str, LakeCopy]) -> None:
    with pytest.raises(BadRequest, match="watermark pipelines read Parquet sources; this one is iceberg"):
        LakeTableStats().max_value(_ref(lake_copies["iceberg"]), "updated_at")

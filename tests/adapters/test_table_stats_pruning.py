"""A plan's row count costs the window, not the table: only the window's day directories are read.

The table is real Parquet on the local disk (and in the moto server's S3), read through a pyarrow
filesystem that records every listing and every file opened. Before, each plan opened the whole
dataset (`ds.dataset(path, partitioning="hive")`), listing every file of every day; and the job
itself had Spark list every file of the table before pruning to the window's days.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest
from pyspark.sql import SparkSession

from daemon.adapters.table_stats import ParquetTableStats
from daemon.core.errors import BadRequest
from daemon.usecases.ports import WindowRows
from scripts.devtools.sample_table import write_sample_table
from spark_job import transforms
from spark_job.spec.model import DayWindow
from spark_job.spec.parse import spec_from_dict
from tests.fixtures.aws import REGION, AwsClients
from tests.fixtures.spark import job_spec

START = date(2024, 1, 1)
DAYS = 120
ROWS_PER_DAY = 40
BUCKET = "lake"


class Recording(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow ships no type hints
    """The local filesystem, noting each path listed (`listed`) and each file opened (`opened`)."""

    def __init__(self) -> None:
        self._fs = pafs.LocalFileSystem()
        self.listed: list[str] = []
        self.looked_up: list[str] = []
        self.opened: list[str] = []

    def get_type_name(self) -> str:
        return "recording"

    def normalize_path(self, path: str) -> str:
        return str(self._fs.normalize_path(path))

    def equals(self, other: Any) -> bool:
        return other is self

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        self.looked_up += paths
        return list(self._fs.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.listed.append(selector.base_dir)
        return list(self._fs.get_file_info(selector))

    def open_input_file(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self._fs.open_input_file(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        self.opened.append(path)
        return self._fs.open_input_stream(path)

    def _read_only(self, *args: Any) -> Any:
        raise OSError("read-only in this test")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lake") / "orders"
    write_sample_table(out, START, DAYS, ROWS_PER_DAY, uneven=True)
    (out / "_SUCCESS").touch()
    return out


def _full_count(table: str, days: list[date], **time: Any) -> int:
    """The old way: the whole dataset, filtered on the partition column (and the time column)."""
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    condition = ds.field("dt").isin([day.isoformat() for day in days])
    if time:
        stamp = pa.timestamp("us", tz="UTC")
        condition &= ds.field("updated_at") >= pa.scalar(time["start"], type=stamp)
        condition &= ds.field("updated_at") < pa.scalar(time["end"], type=stamp)
    return int(dataset.count_rows(filter=condition))


def test_a_one_day_plan_lists_and_opens_that_day_only_with_the_same_count(table: Path) -> None:
    recording = Recording()
    stats = ParquetTableStats(filesystem=pafs.PyFileSystem(recording))
    day = START + timedelta(days=57)
    directory = f"{table}/dt={day.isoformat()}"

    rows = stats.count_window_rows(str(table), WindowRows("dt", [day]))

    assert rows == _full_count(str(table), [day]) > 0
    assert recording.looked_up == [directory]
    assert recording.listed == [directory]
    assert recording.opened and all(path.startswith(f"{directory}/") for path in recording.opened)


def test_a_time_window_reads_its_days_only_and_counts_as_a_full_scan_does(table: Path) -> None:
    recording = Recording()
    stats = ParquetTableStats(filesystem=pafs.PyFileSystem(recording))
    start = datetime(2024, 2, 10, 6, tzinfo=UTC)
    end = datetime(2024, 2, 11, 18, tzinfo=UTC)
    days = [date(2024, 2, 10), date(2024, 2, 11)]

    rows = stats.count_window_rows(str(table), WindowRows("dt", days, "updated_at", start, end))

    assert rows == _full_count(str(table), days, start=start, end=end)
    wanted = {f"{table}/dt={day.isoformat()}" for day in days}
    assert set(recording.listed) == wanted
    assert {path.rsplit("/", 1)[0] for path in recording.opened} == wanted


def test_missing_days_are_zero_rows_and_a_wrong_column_is_still_refused(table: Path) -> None:
    stats = ParquetTableStats()
    before, after = START - timedelta(days=3), START + timedelta(days=DAYS + 5)

    assert stats.count_window_rows(str(table), WindowRows("dt", [before, after])) == 0
    first_two = [START, before, START + timedelta(days=1)]
    assert stats.count_window_rows(str(table), WindowRows("dt", first_two)) == _full_count(
        str(table), first_two
    )
    with pytest.raises(BadRequest, match="no partition column 'day'"):
        stats.count_window_rows(str(table), WindowRows("day", [START]))
    with pytest.raises(BadRequest, match="no column 'made_at'"):
        stats.count_window_rows(str(table), WindowRows("dt", [START], "made_at", datetime.now(UTC)))


def test_the_columns_come_from_one_file(table: Path) -> None:
    recording = Recording()
    stats = ParquetTableStats(filesystem=pafs.PyFileSystem(recording))

    names = stats.column_names(str(table))

    expected = ds.dataset(table, format="parquet", partitioning="hive").schema.names
    assert sorted(names) == sorted(expected) and "dt" in names
    assert recording.opened == [f"{table}/dt={START.isoformat()}/part-0.parquet"]
    assert recording.listed == [str(table), f"{table}/dt={START.isoformat()}"]


def test_s3_tables_are_pruned_the_same_way(
    table: Path, aws: AwsClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.s3.create_bucket(Bucket=BUCKET)
    for file in sorted(table.rglob("*")):
        if file.is_file():
            aws.s3.upload_file(str(file), BUCKET, f"orders/{file.relative_to(table)}")
    for name, value in {
        "AWS_ENDPOINT_URL": aws.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    stats = ParquetTableStats()
    uri = f"s3://{BUCKET}/orders"
    days = [START + timedelta(days=9), START + timedelta(days=10), START + timedelta(days=DAYS + 1)]

    assert stats.count_window_rows(uri, WindowRows("dt", days)) == _full_count(str(table), days)
    assert sorted(stats.column_names(uri)) == sorted(ParquetTableStats().column_names(str(table)))
    assert stats.count_window_rows(uri, WindowRows("dt", [START - timedelta(days=1)])) == 0


@pytest.mark.spark
def test_the_job_lists_only_the_day_windows_directories(spark: SparkSession, sample_table: Path) -> None:
    """Spark lists every file under the paths it is given before pruning: the job gives it the days."""
    spec = spec_from_dict(job_spec(sample_table, "127.0.0.1:9", "unused"))  # dt 2024-01-02..04 of seven
    assert isinstance(spec.selection, DayWindow)
    window = [f"dt={day}" for day in ("2024-01-02", "2024-01-03", "2024-01-04")]

    source = transforms.read_source(spark, spec.source, spec.selection)

    listed = {Path(uri).parent.name for uri in source.inputFiles()}
    assert listed == set(window)
    everything = transforms.read_source(spark, spec.source)
    selected = transforms.select_window(source, spec)
    assert selected.count() == transforms.select_window(everything, spec).count() > 0
    assert selected.schema["dt"].dataType == everything.schema["dt"].dataType

    missing = replace(
        spec, selection=replace(spec.selection, start_day=date(2030, 1, 1), end_day=date(2030, 1, 2))
    )
    nothing = transforms.read_source(spark, spec.source, missing.selection)  # no such directory: no error
    assert transforms.select_window(nothing, missing).count() == 0

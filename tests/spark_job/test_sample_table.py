"""The sample "orders" table: lake-shaped, deterministic, and realistic enough to replay."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from scripts.devtools.sample_table import SCHEMA, write_sample_table

REPO_ROOT = Path(__file__).resolve().parents[2]


def read(table: Path) -> pa.Table:
    return ds.dataset(table, format="parquet", partitioning="hive").to_table().sort_by("event_id")


def test_table_is_hive_partitioned_by_day(tmp_path: Path) -> None:
    rows = write_sample_table(tmp_path, date(2024, 1, 1), days=3, rows_per_day=50)
    partitions = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*.parquet"))
    assert partitions == [f"dt=2024-01-0{day}/part-0.parquet" for day in (1, 2, 3)]
    assert rows == 150 == read(tmp_path).num_rows


def test_files_hold_the_documented_schema_without_the_partition_column(tmp_path: Path) -> None:
    write_sample_table(tmp_path, date(2024, 1, 1), days=1, rows_per_day=10)
    schema = ds.dataset(tmp_path / "dt=2024-01-01", format="parquet").schema
    assert schema.names == SCHEMA.names
    assert schema.field("updated_at").type == pa.timestamp("us", tz="UTC")


def test_event_ids_are_unique_and_name_their_day(tmp_path: Path) -> None:
    write_sample_table(tmp_path, date(2024, 2, 28), days=3, rows_per_day=200)
    table = read(tmp_path)
    ids = table.column("event_id").to_pylist()
    assert len(set(ids)) == len(ids)
    for event_id, day in zip(ids, table.column("dt").to_pylist(), strict=True):
        assert event_id.startswith(f"evt-{str(day).replace('-', '')}-")


def test_orders_span_days_and_their_events_never_go_back_in_time(tmp_path: Path) -> None:
    write_sample_table(tmp_path, date(2024, 1, 1), days=4, rows_per_day=200)
    table = read(tmp_path).sort_by([("updated_at", "ascending")])
    days: dict[str, set[object]] = defaultdict(set)
    last_seen: dict[str, object] = {}
    for order, day, moment in zip(
        table.column("order_id").to_pylist(),
        table.column("dt").to_pylist(),
        table.column("updated_at").to_pylist(),
        strict=True,
    ):
        days[order].add(day)
        assert last_seen.get(order, moment) <= moment
        last_seen[order] = moment
    assert len(days) < table.num_rows / 2  # several events per order
    assert any(len(seen) > 1 for seen in days.values())  # entity order crosses partitions


def test_same_arguments_give_the_same_rows(tmp_path: Path) -> None:
    write_sample_table(tmp_path / "a", date(2024, 1, 1), days=2, rows_per_day=100, seed=3)
    write_sample_table(tmp_path / "b", date(2024, 1, 1), days=2, rows_per_day=100, seed=3)
    first = read(tmp_path / "a")
    write_sample_table(tmp_path / "a", date(2024, 1, 1), days=2, rows_per_day=100, seed=3)
    assert first.equals(read(tmp_path / "b"))
    assert first.equals(read(tmp_path / "a"))


def test_uneven_days_differ_in_size(tmp_path: Path) -> None:
    rows = write_sample_table(tmp_path, date(2024, 1, 1), days=7, rows_per_day=100, uneven=True)
    per_day = read(tmp_path).group_by("dt").aggregate([("event_id", "count")])
    counts = per_day.column("event_id_count").to_pylist()
    assert sum(counts) == rows
    assert len(set(counts)) > 1


def test_seed_sample_script_writes_the_table(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            str(REPO_ROOT / "scripts" / "seed-sample"),
            "--out",
            str(tmp_path),
            "--days",
            "2",
            "--rows-per-day",
            "5",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 10 rows" in result.stdout
    assert read(tmp_path).num_rows == 10

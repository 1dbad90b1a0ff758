"""`ParquetTableStats.max_value` from Parquet statistics, against a full read of the same column."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from daemon.adapters.table_stats import ParquetTableStats
from daemon.core.errors import BadRequest
from scripts.devtools.sample_table import write_sample_table


def _full_read_max(table: Path, column: str) -> object:
    return pc.max(
        ds.dataset(table, format="parquet", partitioning="hive").to_table(columns=[column])[column]
    ).as_py()


def test_the_statistics_maximum_is_the_columns_maximum(tmp_path: Path) -> None:
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 5, 400, seed=7)

    high = ParquetTableStats().max_value(str(table), "updated_at")

    assert high == _full_read_max(table, "updated_at")
    assert isinstance(high, datetime) and high.tzinfo is not None


def test_files_without_statistics_and_all_null_row_groups_still_give_the_maximum(tmp_path: Path) -> None:
    table = tmp_path / "seq"
    table.mkdir()
    pq.write_table(
        pa.table({"seq": pa.array([3, 9, 4], pa.int64())}), table / "a.parquet", write_statistics=False
    )
    pq.write_table(pa.table({"seq": pa.array([None, None], pa.int64())}), table / "b.parquet")
    pq.write_table(pa.table({"seq": pa.array([7, 8], pa.int64())}), table / "c.parquet")

    assert ParquetTableStats().max_value(str(table), "seq") == 9


def test_an_empty_or_all_null_column_has_no_maximum_and_text_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "nulls"
    table.mkdir()
    pq.write_table(pa.table({"seq": pa.array([None], pa.int64()), "name": ["a"]}), table / "a.parquet")

    assert ParquetTableStats().max_value(str(table), "seq") is None
    with pytest.raises(BadRequest, match="timestamps or integers, not str"):
        ParquetTableStats().max_value(str(table), "name")

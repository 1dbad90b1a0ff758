"""`LakeTableStats.commits` reads what each commit of a real Iceberg and Delta table did, from their
own logs, and says when a pipeline cannot follow a table's commits.

The tables are the sample written by Spark with the release's runtimes: a first commit, an append,
a delete, a partition overwrite and a delete of one row (`scripts/devtools/lake_tables.py`). The
range after the first commit up to the snapshot the fixture recorded is fixed (other tests commit
later, past it).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.core.commits import refusal
from daemon.core.errors import BadRequest
from daemon.usecases.catalog import TableRef
from tests.fixtures.spark import LakeCopy

pytestmark = [pytest.mark.spark]


def _ref(copy: LakeCopy) -> TableRef:
    return TableRef(path=str(copy.path), format=copy.format)  # type: ignore[arg-type]  # iceberg or delta


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_the_append_after_the_first_commit_is_one_and_the_delete_after_it_stops_a_pipeline(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    copy = lake_copies[table_format]

    commits = LakeTableStats().commits(_ref(copy), after=copy.first_snapshot, upto=copy.snapshot)

    assert [commit.kind for commit in commits] == ["append", "change", "change", "change"]
    assert commits[-1].id == copy.snapshot
    if table_format == "delta":
        assert [commit.id for commit in commits] == ["1", "2", "3", "4"]
        assert [commit.operation for commit in commits] == ["WRITE", "DELETE", "WRITE", "DELETE"]
    said = refusal(commits, source="orders", committed=copy.first_snapshot)
    assert said is not None and f"commit {commits[1].id} " in said
    assert refusal(commits[:1], source="orders", committed=copy.first_snapshot) is None


def test_an_iceberg_snapshot_outside_the_tables_history_is_refused(lake_copies: dict[str, LakeCopy]) -> None:
    copy = lake_copies["iceberg"]
    with pytest.raises(BadRequest, match="not in the history of its snapshot"):
        LakeTableStats().commits(_ref(copy), after="12345", upto=copy.snapshot)


def test_a_delta_table_is_followed_only_with_its_change_data_feed(
    lake_copies: dict[str, LakeCopy], tmp_path: Path
) -> None:
    stats = LakeTableStats()
    assert stats.follow_refusal(_ref(lake_copies["iceberg"])) is None
    refused = stats.follow_refusal(_ref(lake_copies["delta"]))  # Spark wrote it without the feed
    assert refused is not None and "delta.enableChangeDataFeed" in refused
    assert "no commits" in (stats.follow_refusal(TableRef(path=str(tmp_path))) or "")

    rows = pa.table({"event_id": ["a"]})
    write_deltalake(tmp_path / "cdf", rows, configuration={"delta.enableChangeDataFeed": "true"})
    assert stats.follow_refusal(TableRef(path=str(tmp_path / "cdf"), format="delta")) is None
    write_deltalake(tmp_path / "cdf", rows, mode="append")
    DeltaTable(tmp_path / "cdf").optimize.compact()  # two files into one: rows as they were
    commits = stats.commits(TableRef(path=str(tmp_path / "cdf"), format="delta"), after="0", upto="2")
    assert [(commit.operation, commit.kind) for commit in commits] == [
        ("WRITE", "append"),
        ("OPTIMIZE", "rewrite"),
    ]

"""An Iceberg table by its name in a catalog counts as the same table at its path does, pinned alike.

The table is the session's Spark-written Iceberg copy; the catalogs are real: Iceberg's SQL (JDBC)
catalog schema on a SQLite file and on a PostgreSQL schema, and the Hadoop warehouse Spark wrote it
in. A commit through the SQL catalog moves what the name means; a count pinned to the snapshot a plan
recorded does not move with it.
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.lake_catalogs import LakeCatalog
from daemon.core.errors import BadRequest, ConfigError, DependencyDown
from daemon.usecases.catalog import TableRef
from daemon.usecases.ports import WindowRows
from tests.fixtures.lake_catalog import (
    catalog_settings,
    commit_late_events,
    hadoop_metadata_file,
    registered,
)
from tests.fixtures.spark import LakeCopy

WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]
NAMED = TableRef(table="lake.sample.orders", format="iceberg")


def _by_path(copy: LakeCopy) -> TableRef:
    return TableRef(path=str(copy.path), format="iceberg")


@pytest.mark.spark
def test_a_named_table_counts_and_pins_as_its_path_does_while_commits_move_the_name(
    lake_copies: dict[str, LakeCopy], database_url: str, tmp_path: Path
) -> None:
    copy = lake_copies["iceberg"]
    table = registered(database_url, tmp_path, copy)
    stats = LakeTableStats(catalogs=TableCatalogs({"lake": catalog_settings(database_url, tmp_path)}))
    by_path = LakeTableStats()

    planned = stats.snapshot(NAMED)
    assert planned == by_path.snapshot(_by_path(copy))
    assert stats.metadata_file(NAMED) == hadoop_metadata_file(copy)
    assert stats.column_names(NAMED) == by_path.column_names(_by_path(copy))
    window = WindowRows("dt", WEEK[1:3])
    before = stats.count_window_rows(NAMED, window, snapshot=planned)
    assert before == by_path.count_window_rows(_by_path(copy), window, snapshot=planned)
    assert before > 0

    commit_late_events(table, "2024-01-02", 5)

    assert stats.snapshot(NAMED) != planned
    assert stats.metadata_file(NAMED) != hadoop_metadata_file(copy)
    assert stats.count_window_rows(NAMED, window) == before + 5
    assert stats.count_window_rows(NAMED, window, snapshot=planned) == before  # pinned: the plan's rows
    assert by_path.count_window_rows(_by_path(copy), window) == before  # the path's hint did not move


@pytest.mark.spark
def test_a_hadoop_catalog_names_the_table_spark_wrote_in_its_warehouse(
    lake_copies: dict[str, LakeCopy],
) -> None:
    copy = lake_copies["iceberg"]
    warehouse = copy.path.parent.parent  # <warehouse>/sample/orders
    catalogs = TableCatalogs({"lake": LakeCatalog(type="hadoop", warehouse=str(warehouse))})

    assert catalogs.metadata_location("lake.sample.orders") == hadoop_metadata_file(copy)
    with pytest.raises(BadRequest, match=r"hadoop catalog has no table lake\.sample\.gone"):
        catalogs.metadata_location("lake.sample.gone")


@pytest.mark.spark
def test_a_table_the_catalog_does_not_have_is_refused_by_name(
    lake_copies: dict[str, LakeCopy], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    registered(url, tmp_path, lake_copies["iceberg"])
    stats = LakeTableStats(catalogs=TableCatalogs({"lake": catalog_settings(url, tmp_path)}))

    with pytest.raises(BadRequest, match=r"catalog 'lake' has no table sample\.returns"):
        stats.snapshot(TableRef(table="lake.sample.returns", format="iceberg"))
    with pytest.raises(BadRequest, match=r"catalog 'other', which this daemon does not have"):
        stats.snapshot(TableRef(table="other.sample.orders", format="iceberg"))


def test_a_catalog_that_cannot_be_reached_is_a_dependency_down_naming_it(tmp_path: Path) -> None:
    closed = LakeCatalog(
        type="sql",
        uri="postgresql+psycopg://lake@127.0.0.1:9/lake?connect_timeout=2",
        password=SecretStr("s3cret-pw"),
    )
    stats = LakeTableStats(catalogs=TableCatalogs({"lake": closed}))

    with pytest.raises(DependencyDown, match=r"cannot ask catalog 'lake' for sample\.orders") as caught:
        stats.snapshot(NAMED)
    assert "s3cret-pw" not in str(caught.value)


@pytest.mark.spark
def test_a_sql_catalog_finds_the_rows_spark_stored_under_its_own_catalog_name(
    lake_copies: dict[str, LakeCopy], tmp_path: Path
) -> None:
    """Iceberg's JDBC catalog keys every row by the writer's catalog name (`spark.sql.catalog.prod`)."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    registered(url, tmp_path, lake_copies["iceberg"], name="prod")
    keyed_alike = catalog_settings(url, tmp_path)
    renamed = keyed_alike.model_copy(update={"catalog_name": "prod"})

    with pytest.raises(BadRequest, match="has no table"):
        TableCatalogs({"lake": keyed_alike}).metadata_location("lake.sample.orders")
    assert TableCatalogs({"lake": renamed}).metadata_location("lake.sample.orders").endswith(".metadata.json")


def test_a_database_that_holds_no_catalog_is_reported_down_and_left_as_it_was(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-catalog.db"
    sqlite3.connect(empty).close()
    stats = LakeTableStats(
        catalogs=TableCatalogs({"lake": LakeCatalog(type="sql", uri=f"sqlite:///{empty}")})
    )

    with pytest.raises(DependencyDown, match=r"cannot ask catalog 'lake' for sample\.orders"):
        stats.snapshot(NAMED)
    with sqlite3.connect(empty) as conn:  # the daemon reads a catalog; it never makes one
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_a_sql_catalog_uri_that_is_no_url_stops_the_daemon_at_start_up() -> None:
    with pytest.raises(
        ConfigError, match="REPLAY_LAKE_CATALOGS: catalog 'lake': its uri is not a SQLAlchemy URL"
    ):
        TableCatalogs({"lake": LakeCatalog(type="sql", uri="postgres on db.internal")})

"""Tables named in a Hive metastore (Spark's session catalog outside AWS), every format.

The metastore is a real one on loopback, and Spark registered the tables in it the way a team's jobs
do (`tests.fixtures.hive`). A table named there counts, pins and is read at the place the metastore
gives, as the same table at its path does. A table the metastore calls another format, a missing
table and a metastore that cannot answer are each refused with what is wrong.
"""

from __future__ import annotations

import socket
from datetime import date, timedelta
from pathlib import Path

import pytest

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.lake_catalogs import LakeCatalog, session_catalog
from daemon.core.errors import BadRequest, DependencyDown
from daemon.usecases.catalog import TableFormat, TableRef, load_catalog
from daemon.usecases.ports import WindowRows
from tests.fixtures.catalog_services import HiveTables

pytestmark = [pytest.mark.spark]

WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]


def _stats(uri: str) -> LakeTableStats:
    return LakeTableStats(catalogs=TableCatalogs({"hive": LakeCatalog(type="hive", uri=uri)}))


def _named(table_format: TableFormat) -> TableRef:
    return TableRef(table=f"hive.sales.orders_{table_format}", format=table_format)


@pytest.mark.parametrize("table_format", ["delta", "parquet", "iceberg"])
def test_a_table_named_in_the_metastore_counts_and_pins_as_its_path_does(
    hive_tables: HiveTables, table_format: TableFormat
) -> None:
    path = {"delta": hive_tables.delta, "parquet": hive_tables.parquet, "iceberg": hive_tables.iceberg.path}
    stats, by_path, named = _stats(hive_tables.uri), LakeTableStats(), _named(table_format)
    at_path = TableRef(path=str(path[table_format]), format=table_format)

    snapshot = stats.snapshot(named)
    assert snapshot == by_path.snapshot(at_path)
    where = stats.metadata_file(named)  # what the job reads: the run records it
    if table_format == "iceberg":
        assert where == hive_tables.iceberg_metadata
    else:
        assert where == str(path[table_format])  # Spark stored `file:/…`; readers get the path
    counted = {
        day: stats.count_window_rows(named, WindowRows("dt", [day]), snapshot=snapshot) for day in WEEK
    }
    assert counted == {day: by_path.count_window_rows(at_path, WindowRows("dt", [day])) for day in WEEK}
    assert sum(counted.values()) > 0


def test_a_two_part_name_is_read_from_the_metastore_marked_as_the_session_catalog(
    hive_tables: HiveTables, tmp_path: Path
) -> None:
    """`sales.orders_delta` in a sources file, as a team's Spark SQL names it, counts as the
    three-part name does once the metastore is the daemon's session catalog."""
    sources = tmp_path / "sources.yaml"
    sources.write_text(
        "sources:\n  orders:\n    table: {table: sales.orders_delta, format: delta}\n"
        "    partition_column: dt\n    event_time_column: updated_at\n    key_column: order_id\n"
        "    event_id_column: event_id\n    owners: [U0OWNER1]\n"
    )
    settings = {"meta": LakeCatalog(type="hive", uri=hive_tables.uri, session=True)}
    catalog = load_catalog(sources, lake_catalogs={"meta": "hive"}, session_catalog=session_catalog(settings))
    stats = LakeTableStats(catalogs=TableCatalogs(settings))

    table = catalog.get("orders").table
    assert stats.metadata_file(table) == str(hive_tables.delta)
    assert stats.snapshot(table) == _stats(hive_tables.uri).snapshot(_named("delta"))


def test_a_table_the_metastore_calls_another_format_is_refused_with_both(hive_tables: HiveTables) -> None:
    with pytest.raises(BadRequest, match=r"says hive\.sales\.orders_parquet is a parquet table, not delta"):
        _stats(hive_tables.uri).snapshot(TableRef(table="hive.sales.orders_parquet", format="delta"))


def test_a_table_missing_from_the_metastore_is_refused_by_name(hive_tables: HiveTables) -> None:
    with pytest.raises(BadRequest, match=r"catalog 'hive' has no table sales\.gone"):
        _stats(hive_tables.uri).column_names(TableRef(table="hive.sales.gone", format="delta"))


def test_a_metastore_that_cannot_answer_is_a_dependency_down_naming_it() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"thrift://127.0.0.1:{probe.getsockname()[1]}"

    with pytest.raises(DependencyDown, match=r"cannot ask catalog 'hive' for sales\.orders_delta"):
        _stats(closed).snapshot(_named("delta"))


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"type": "hive"}, "needs 'uri'"),
        ({"type": "hive", "uri": "http://metastore:9083"}, "thrift://<host>:<port>"),
        ({"type": "hive", "uri": "thrift://metastore:9083", "password": "x"}, "takes no 'password'"),
    ],
)
def test_a_hive_catalog_is_a_thrift_uri_and_nothing_else(settings: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        LakeCatalog.model_validate(settings)

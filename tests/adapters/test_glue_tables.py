"""Tables named in a Glue Data Catalog (Spark's session catalog on EMR), every format, on moto's Glue.

The tables are registered as the writers register them: a Delta table as Spark does (its location in
the serde's ``path``, ``Location`` a placeholder), a Parquet table as a crawler does, an Iceberg table
as Iceberg's Glue catalog does (``table_type``, ``metadata_location``). Each counts, pins and is read
at the place the Data Catalog gives, as the same table at its path does; a table the Data Catalog
calls another format, a missing table and a catalog that cannot answer are refused with what is wrong.
"""

from __future__ import annotations

import socket
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.lake_catalogs import LakeCatalog
from daemon.core.errors import BadRequest, DependencyDown
from daemon.usecases.catalog import TableFormat, TableRef
from daemon.usecases.ports import WindowRows
from tests.fixtures.aws import REGION, AwsClients, aws_client
from tests.fixtures.lake_catalog import hadoop_metadata_file
from tests.fixtures.spark import LakeCopy

pytestmark = [pytest.mark.spark]

WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]


def _register(glue: Any, name: str, parameters: dict[str, str], storage: dict[str, Any]) -> None:
    glue.create_table(
        DatabaseName="sales",
        TableInput={
            "Name": name,
            "TableType": "EXTERNAL_TABLE",
            "Parameters": parameters,
            "StorageDescriptor": storage,
        },
    )


@pytest.fixture
def glue_stats(
    aws: AwsClients, lake_copies: dict[str, LakeCopy], sample_table: Path, monkeypatch: pytest.MonkeyPatch
) -> LakeTableStats:
    """The session's tables registered in an empty Data Catalog, and the stats that read them by name."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")  # the daemon's AWS clients take the environment's
    glue = aws_client("glue", aws.endpoint_url)
    glue.create_database(DatabaseInput={"Name": "sales"})
    delta = str(lake_copies["delta"].path)
    _register(
        glue,
        "orders_delta",
        {"spark.sql.sources.provider": "delta"},
        {"Location": f"{delta}-__PLACEHOLDER__", "SerdeInfo": {"Parameters": {"path": delta}}},
    )
    _register(glue, "orders_parquet", {"classification": "parquet"}, {"Location": str(sample_table)})
    _register(
        glue,
        "orders_iceberg",
        {"table_type": "ICEBERG", "metadata_location": hadoop_metadata_file(lake_copies["iceberg"])},
        {"Location": str(lake_copies["iceberg"].path)},
    )
    settings = LakeCatalog(type="glue", region=REGION, endpoint=aws.endpoint_url)
    return LakeTableStats(catalogs=TableCatalogs({"glue": settings}))


def _named(table_format: TableFormat) -> TableRef:
    return TableRef(table=f"glue.sales.orders_{table_format}", format=table_format)


@pytest.mark.parametrize("table_format", ["delta", "parquet", "iceberg"])
def test_a_table_named_in_the_data_catalog_counts_and_pins_as_its_path_does(
    glue_stats: LakeTableStats,
    lake_copies: dict[str, LakeCopy],
    sample_table: Path,
    table_format: TableFormat,
) -> None:
    path = str(sample_table) if table_format == "parquet" else str(lake_copies[table_format].path)
    by_path, named = LakeTableStats(), _named(table_format)
    at_path = TableRef(path=path, format=table_format)

    snapshot = glue_stats.snapshot(named)
    assert snapshot == by_path.snapshot(at_path)
    where = glue_stats.metadata_file(named)  # what the job reads: the run records it
    assert where == (hadoop_metadata_file(lake_copies["iceberg"]) if table_format == "iceberg" else path)
    counted = {
        day: glue_stats.count_window_rows(named, WindowRows("dt", [day]), snapshot=snapshot) for day in WEEK
    }
    assert counted == {day: by_path.count_window_rows(at_path, WindowRows("dt", [day])) for day in WEEK}
    if table_format != "parquet":
        assert {day.isoformat(): rows for day, rows in counted.items()} == lake_copies[table_format].days
    assert glue_stats.max_value(named, "updated_at", snapshot=snapshot) == by_path.max_value(
        at_path, "updated_at", snapshot=snapshot
    )


def test_a_table_the_data_catalog_calls_another_format_is_refused_with_both(
    glue_stats: LakeTableStats,
) -> None:
    with pytest.raises(BadRequest, match=r"says glue\.sales\.orders_parquet is a parquet table, not delta"):
        glue_stats.snapshot(TableRef(table="glue.sales.orders_parquet", format="delta"))


def test_a_table_missing_from_the_data_catalog_is_refused_by_name(glue_stats: LakeTableStats) -> None:
    with pytest.raises(BadRequest, match=r"catalog 'glue' has no table sales\.gone"):
        glue_stats.column_names(TableRef(table="glue.sales.gone", format="delta"))


def test_a_data_catalog_that_cannot_answer_is_a_dependency_down_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(variable, "testing")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    stats = LakeTableStats(
        catalogs=TableCatalogs({"glue": LakeCatalog(type="glue", region=REGION, endpoint=closed)})
    )

    with pytest.raises(DependencyDown, match=r"cannot ask catalog 'glue' for sales\.orders_delta"):
        stats.snapshot(_named("delta"))

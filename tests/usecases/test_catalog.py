from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.errors import BadRequest, CatalogError, UnknownSource
from daemon.usecases.catalog import load_catalog

GOOD = """
sources:
  orders:
    table: {path: lake/orders, format: parquet}
    partition_column: dt
    event_time_column: updated_at
    key_column: order_id
    event_id_column: event_id
    live_topic: orders
    owners: [U0OWNER1]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    return path


def test_good_catalog_resolves_relative_paths_against_its_folder(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, GOOD))

    orders = catalog.get("orders")
    assert orders.table.path == str((tmp_path / "lake/orders").resolve())
    assert orders.owners == ["U0OWNER1"]


@pytest.mark.parametrize(
    ("name", "sources"), [("sources.yaml", ["orders"]), ("sources-s3.yaml", ["orders", "payments"])]
)
def test_example_catalogs_are_valid(name: str, sources: list[str]) -> None:
    catalog = load_catalog(Path(__file__).resolve().parents[2] / "examples" / name)

    assert catalog.names() == sources


@pytest.mark.parametrize("table_format", ["parquet", "iceberg", "delta"])
def test_a_table_is_parquet_iceberg_or_delta_at_a_path(tmp_path: Path, table_format: str) -> None:
    catalog = load_catalog(_write(tmp_path, GOOD.replace("format: parquet", f"format: {table_format}")))

    table = catalog.get("orders").table
    assert (table.format, Path(table.location).name) == (table_format, "orders")


def test_an_iceberg_table_by_name_is_in_one_of_the_daemons_catalogs(tmp_path: Path) -> None:
    named = GOOD.replace(
        "{path: lake/orders, format: parquet}", "{table: lake.sales.orders, format: iceberg}"
    )
    path = _write(tmp_path, named)

    table = load_catalog(path, lake_catalogs={"lake": "sql"}).get("orders").table
    assert (table.catalog, table.identifier, table.path) == ("lake", "sales.orders", None)

    with pytest.raises(CatalogError) as caught:
        load_catalog(path, lake_catalogs={"glue": "glue"})
    assert (caught.value.source, caught.value.field) == ("orders", "table.table")
    assert "no catalog 'lake' in REPLAY_LAKE_CATALOGS (configured: glue)" in str(caught.value)

    catalog = load_catalog(path, lake_catalogs={"lake": "sql"})
    path.write_text(named.replace("lake.sales.orders", "other.sales.orders"))
    with pytest.raises(CatalogError, match="no catalog 'other'"):
        catalog.reload()  # a reload keeps to the daemon's catalogs
    assert catalog.get("orders").table.catalog == "lake"


def test_a_source_names_one_of_the_daemons_kafka_clusters_and_a_reload_keeps_to_them(tmp_path: Path) -> None:
    on_eu = GOOD.replace("    owners: [U0OWNER1]\n", "    owners: [U0OWNER1]\n    cluster: eu\n")
    path = _write(tmp_path, on_eu)

    assert load_catalog(path, kafka_clusters=("default", "eu")).get("orders").cluster == "eu"
    assert load_catalog(_write(tmp_path, GOOD)).get("orders").cluster == "default"
    with pytest.raises(CatalogError) as caught:
        load_catalog(_write(tmp_path, on_eu), kafka_clusters=("default",))
    assert (caught.value.source, caught.value.field) == ("orders", "cluster")
    assert "unknown Kafka cluster 'eu' (this service's clusters: default)" in str(caught.value)

    catalog = load_catalog(_write(tmp_path, on_eu), kafka_clusters=("default", "eu"))
    path.write_text(on_eu.replace("cluster: eu", "cluster: us"))
    with pytest.raises(CatalogError, match="unknown Kafka cluster 'us'"):
        catalog.reload()
    assert catalog.get("orders").cluster == "eu"


@pytest.mark.parametrize("table_format", ["delta", "parquet", "iceberg"])
def test_a_two_part_name_is_a_table_of_the_session_catalog(tmp_path: Path, table_format: str) -> None:
    """`sales.orders`, as Spark SQL names it, is in the catalog marked ``session``; with none, the
    name is refused naming the file, the source and the field, and a reload keeps to the same rule."""
    named = GOOD.replace(
        "{path: lake/orders, format: parquet}", f"{{table: sales.orders, format: {table_format}}}"
    )
    path = _write(tmp_path, named)

    catalog = load_catalog(path, lake_catalogs={"meta": "hive", "lake": "sql"}, session_catalog="meta")
    table = catalog.get("orders").table
    assert (table.table, table.catalog, table.identifier, table.format) == (
        "meta.sales.orders",
        "meta",
        "sales.orders",
        table_format,
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, lake_catalogs={"meta": "hive"})
    assert (caught.value.source, caught.value.field) == ("orders", "table.table")
    assert "'sales.orders' is a table of Spark's session catalog" in str(caught.value)
    assert '"session": true' in str(caught.value)

    path.write_text(named.replace("sales.orders", "sales.returns"))
    catalog.reload()
    assert catalog.get("orders").table.table == "meta.sales.returns"


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_a_delta_or_parquet_table_by_name_is_in_a_glue_catalog_only(
    tmp_path: Path, table_format: str
) -> None:
    """Only the Data Catalog (Spark's session catalog on EMR) says where such a table lives."""
    named = GOOD.replace(
        "{path: lake/orders, format: parquet}", f"{{table: lake.sales.orders, format: {table_format}}}"
    )
    path = _write(tmp_path, named)

    table = load_catalog(path, lake_catalogs={"lake": "glue"}).get("orders").table
    assert (table.format, table.catalog, table.identifier) == (table_format, "lake", "sales.orders")
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, lake_catalogs={"lake": "sql"})
    assert (caught.value.source, caught.value.field) == ("orders", "table.table")
    assert f"a {table_format} table by name is read from a glue or hive catalog" in str(caught.value)
    hive = load_catalog(path, lake_catalogs={"lake": "hive"}).get("orders").table
    assert (hive.format, hive.catalog) == (table_format, "lake")
    assert "'lake' is a sql catalog: give the table's 'path'" in str(caught.value)


def test_unknown_source_lists_the_known_ones(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, GOOD))

    with pytest.raises(UnknownSource, match=r"unknown source 'ordres' \(known sources: orders\)"):
        catalog.get("ordres")


@pytest.mark.parametrize(
    ("edit", "field", "problem"),
    [
        (("    key_column: order_id\n", ""), "key_column", "Field required"),
        (("[U0OWNER1]", "[bob]"), "owners", "not a Slack user id"),
        (("live_topic: orders", "live_topic: 'bad topic!'"), "live_topic", "not a valid Kafka topic name"),
        (
            ("format: parquet", "format: csv"),
            "table.format",
            "Input should be 'parquet', 'iceberg' or 'delta'",
        ),
        (("{path: lake/orders, format: parquet}", "{format: parquet}"), "table", "exactly one of"),
        (
            ("{path: lake/orders, format: parquet}", "{table: orders, format: iceberg}"),
            "table",
            "'orders' is not '<catalog>.<namespace>.<table>' or, in Spark's session catalog",
        ),
        (
            (
                "    owners: [U0OWNER1]\n",
                "    owners: [U0OWNER1]\n    on_error: dlq\n    delivery: transactional\n",
            ),
            "delivery",
            "does not combine with on_error=dlq",
        ),
        (
            ("    owners: [U0OWNER1]\n", "    owners: [U0OWNER1]\n    executor: {memory: 4 GB}\n"),
            "executor.memory",
            "should match pattern",
        ),
        (
            ("    owners: [U0OWNER1]\n", "    owners: [U0OWNER1]\n    cluster: Prod EU\n"),
            "cluster",
            "is not a cluster name",
        ),
        (
            ("    owners: [U0OWNER1]\n", "    owners: [U0OWNER1]\n    colour: blue\n"),
            "colour",
            "Extra inputs",
        ),
    ],
)
def test_bad_entry_names_file_source_and_field(
    tmp_path: Path, edit: tuple[str, str], field: str, problem: str
) -> None:
    path = _write(tmp_path, GOOD.replace(*edit))

    with pytest.raises(CatalogError) as caught:
        load_catalog(path)

    assert caught.value.path == str(path)
    assert caught.value.source == "orders"
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}: source 'orders': field '{field}': ")
    assert problem in str(caught.value)


def test_missing_file_and_bad_yaml_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"sources\.yaml: file not found"):
        load_catalog(tmp_path / "sources.yaml")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_catalog(_write(tmp_path, "sources: [unclosed"))


def test_bad_source_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="source 'Orders!'"):
        load_catalog(_write(tmp_path, GOOD.replace("  orders:", "  Orders!:")))


def _owners(text: str) -> str:
    return GOOD.replace("    owners: [U0OWNER1]\n", text)


def test_live_approvals_need_as_many_distinct_owners(tmp_path: Path) -> None:
    two = _owners("    owners: [U0OWNER1, U0OWNER2]\n    live_approvals: 2\n")
    assert load_catalog(_write(tmp_path, two)).get("orders").live_approvals == 2

    alone = _owners("    owners: [U0OWNER1]\n    live_approvals: 2\n")
    with pytest.raises(CatalogError, match="live_approvals: 2 needs as many distinct owners"):
        load_catalog(_write(tmp_path, alone))
    with pytest.raises(CatalogError, match="field 'live_approvals'"):
        load_catalog(_write(tmp_path, _owners("    owners: [U0OWNER1]\n    live_approvals: 3\n")))


def test_every_column_a_source_names_is_checked_against_its_table(tmp_path: Path) -> None:
    raw = GOOD.replace("    live_topic: orders\n", "    value_format: raw\n    raw: {headers_column: null}\n")
    bronze = load_catalog(_write(tmp_path, raw)).get("orders")
    assert bronze.named_columns() == [
        ("partition_column", "dt"),
        ("event_time_column", "updated_at"),
        ("key_column", "order_id"),
        ("event_id_column", "event_id"),
        ("raw.value_column", "value"),
        ("raw.timestamp_column", "timestamp"),
    ]
    fields = "    value_columns: [order_id, amount]\n    type_column: kind\n    watermark_column: seq\n"
    orders = load_catalog(_write(tmp_path, GOOD + fields)).get("orders")
    table = ["dt", "updated_at", "order_id", "event_id", "amount", "seq", "kind"]
    orders.check_columns(table, catalog_path="sources.yaml")  # every one there: no refusal
    with pytest.raises(BadRequest) as refused:
        orders.check_columns([c for c in table if c not in ("amount", "seq")], catalog_path="sources.yaml")
    assert str(refused.value).startswith(
        "sources.yaml: source 'orders' names columns its table does not have: "
        "watermark_column 'seq'; value_columns 'amount' "
        "(the table has: dt, event_id, kind, order_id, updated_at)"
    )

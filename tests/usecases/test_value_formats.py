"""Value formats in the catalog and the job spec: defaults, and refusals that name the field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.config.settings import load_settings
from daemon.core.errors import CatalogError
from daemon.core.run_options import RunOptions, WindowKind
from daemon.usecases.catalog import load_catalog
from daemon.usecases.job_specs import build_spec
from daemon.usecases.value_formats import RawColumns
from spark_job.errors import SpecError
from spark_job.spec.parse import spec_from_dict, spec_from_json
from store.models import Run
from tests.fixtures.spark import job_spec

CATALOG = """
sources:
  orders:
    table: {path: lake/orders}
    partition_column: dt
    event_time_column: updated_at
    key_column: order_id
    event_id_column: event_id
    owners: [U0OWNER1]
  bronze:
    table: {path: lake/bronze}
    value_format: raw
    partition_column: dt
    event_id_column: event_id
    owners: [U0OWNER1]
"""


def _catalog_with(tmp_path: Path, source: str, extra: str) -> Path:
    """The catalog with ``extra`` (indented YAML lines) added to one source."""
    anchor = f"  {source}:\n"
    path = tmp_path / "sources.yaml"
    path.write_text(CATALOG.replace(anchor, anchor + extra))
    return path


def test_json_is_the_default_and_raw_gets_bronze_defaults(tmp_path: Path) -> None:
    catalog = load_catalog(_catalog_with(tmp_path, "orders", ""))
    orders, bronze = catalog.get("orders"), catalog.get("bronze")
    assert (orders.value_format, orders.value_columns, orders.raw) == ("json", None, None)
    assert bronze.value_format == "raw"
    assert bronze.raw == RawColumns(
        value_column="value", headers_column="headers", timestamp_column="timestamp"
    )
    assert (bronze.key_column, bronze.event_time_column) == ("key", "timestamp")


def test_raw_column_names_are_configurable(tmp_path: Path) -> None:
    extra = (
        "    key_column: record_key\n"
        "    raw: {value_column: payload, headers_column: null, timestamp_column: kafka_ts}\n"
    )
    bronze = load_catalog(_catalog_with(tmp_path, "bronze", extra)).get("bronze")
    assert bronze.raw == RawColumns(value_column="payload", headers_column=None, timestamp_column="kafka_ts")
    assert (bronze.key_column, bronze.event_time_column) == ("record_key", "kafka_ts")


@pytest.mark.parametrize(
    ("source", "extra", "field", "problem"),
    [
        ("orders", "    value_format: avro\n", "value_format", "Input should be 'json' or 'raw'"),
        ("orders", "    value_columns: []\n", "value_columns", "at least 1 item"),
        ("orders", "    value_columns: [status, status]\n", "value_columns", "names a column twice"),
        ("orders", "    value_columns: ['  ']\n", "value_columns", "must not be empty"),
        ("orders", "    raw: {value_column: v}\n", "raw", "only for value_format raw"),
        ("bronze", "    value_columns: [value]\n", "value_columns", "only for value_format json"),
        ("bronze", "    raw: {value_column: ''}\n", "raw.value_column", "at least 1 character"),
        ("bronze", "    raw: {value_colum: v}\n", "raw.value_colum", "Extra inputs"),
        ("bronze", "    raw: {timestamp_column: value}\n", "raw", "must be different columns"),
        (
            "bronze",
            "    encrypted_columns: {value: {key_ref: 'local:dev'}}\n",
            "value_format",
            "encrypted_columns needs value_format json",
        ),
    ],
)
def test_bad_value_format_names_file_source_and_field(
    tmp_path: Path, source: str, extra: str, field: str, problem: str
) -> None:
    path = _catalog_with(tmp_path, source, extra)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert (caught.value.path, caught.value.source, caught.value.field) == (str(path), source, field)
    assert str(caught.value).startswith(f"{path}: source '{source}': field '{field}': ")
    assert problem in str(caught.value)


def _run(source: str) -> Run:
    return Run(
        id="r-9",
        source=source,
        window_start=datetime(2024, 1, 2, tzinfo=UTC),
        window_end=datetime(2024, 1, 3, tzinfo=UTC),
        window_label="2024-01-02",
        topic=f"replay.{source}.r-9",
        tps=100,
        options=RunOptions(window=WindowKind.DAYS),
    )


def test_specs_carry_each_sources_value_format(tmp_path: Path) -> None:
    extra = "    value_columns: [event_id, order_id, status]\n"
    catalog = load_catalog(_catalog_with(tmp_path, "orders", extra))
    settings = load_settings({})
    orders = build_spec(_run("orders"), catalog=catalog, settings=settings, result_uri=None)
    assert (orders.value_format, orders.value_columns) == ("json", ("event_id", "order_id", "status"))
    assert (orders.headers_column, orders.raw_timestamp_column) == (None, None)
    bronze = build_spec(_run("bronze"), catalog=catalog, settings=settings, result_uri=None)
    assert (bronze.value_format, bronze.key_column, bronze.value_column) == ("raw", "key", "value")
    assert (bronze.headers_column, bronze.raw_timestamp_column) == ("headers", "timestamp")
    assert bronze.value_columns is None and bronze.partition_column == "dt"
    for spec in (orders, bronze):
        assert spec_from_json(spec.to_json()) == spec


def test_json_value_defaults_to_every_column_but_the_partition_column(tmp_path: Path) -> None:
    catalog = load_catalog(_catalog_with(tmp_path, "orders", ""))
    spec = build_spec(_run("orders"), catalog=catalog, settings=load_settings({}), result_uri=None)
    assert (spec.value_columns, spec.partition_column) == (None, "dt")


def _spec(**overrides: Any) -> dict[str, Any]:
    return job_spec(Path("/lake/orders"), "broker:9092", "replay.orders.r-1", **overrides)


RAW = {"value_format": "raw", "value_column": "value", "key_column": "key", "event_time_column": "ts"}


@pytest.mark.parametrize(
    ("overrides", "field", "problem"),
    [
        ({"value_columns": []}, "value_columns", "at least one column"),
        ({"value_columns": ["a", "a"]}, "value_columns", "names a column twice"),
        ({"value_columns": ["a", 7]}, "value_columns", "list of column names"),
        ({"value_columns": "a"}, "value_columns", "must be"),
        ({"headers_column": "headers"}, "headers_column", "not used with value_format 'json'"),
        ({"raw_timestamp_column": "ts"}, "raw_timestamp_column", "not used with value_format 'json'"),
        ({"value_column": "value"}, "value_column", "not used with value_format 'json'"),
        ({**RAW, "value_columns": ["a"]}, "value_columns", "not used with value_format 'raw'"),
    ],
)
def test_spec_refuses_columns_of_the_other_format(
    overrides: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(SpecError, match=problem) as raised:
        spec_from_dict(_spec(**overrides))
    assert raised.value.field == field


def test_raw_spec_round_trips_with_its_columns() -> None:
    document = _spec(**RAW, headers_column="headers", raw_timestamp_column="ts", timestamp="event")
    spec = spec_from_dict(document)
    assert (spec.headers_column, spec.raw_timestamp_column, spec.value_columns) == ("headers", "ts", None)
    assert spec_from_json(spec.to_json()) == spec

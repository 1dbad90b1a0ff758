"""The ``where`` tree in the job: read back from the spec (anything unknown refused, naming the path),
and applied beside the window as one Spark condition, which selects exactly the rows pyarrow's own
filter selects on the same table and is pushed down to the scan."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from daemon.core.grammar.predicates import parse_predicate, predicate_document
from spark_job import transforms
from spark_job.errors import SpecError
from spark_job.spec.parse import spec_from_dict
from tests.fixtures.spark import ids_of, job_spec, lake_ids

WINDOW = (pc.field("dt") >= "2024-01-02") & (pc.field("dt") <= "2024-01-04")


def _spec(table: Path, where: str) -> Any:
    document = predicate_document(parse_predicate(where))
    return spec_from_dict(job_spec(table, "127.0.0.1:9", "unused", where=document))


@pytest.mark.parametrize(
    "where,expected",
    [
        ("status = 'paid'", pc.field("status") == "paid"),
        (
            "amount > 50.5 and currency in ('EUR', 'USD')",
            (pc.field("amount") > 50.5) & pc.field("currency").isin(["EUR", "USD"]),
        ),
        (
            "not (status in ('created', 'cancelled')) or amount between 10 and 20",
            ~pc.field("status").isin(["created", "cancelled"])
            | ((pc.field("amount") >= 10) & (pc.field("amount") <= 20)),
        ),
        (
            "updated_at >= 2024-01-03T06:00 and updated_at < 2024-01-03T18:00",
            (pc.field("updated_at") >= pc.scalar(datetime(2024, 1, 3, 6, tzinfo=UTC)))
            & (pc.field("updated_at") < pc.scalar(datetime(2024, 1, 3, 18, tzinfo=UTC))),
        ),
        ("updated_at < 2024-01-03", pc.field("updated_at") < pc.scalar(datetime(2024, 1, 3, tzinfo=UTC))),
        (
            "status is not null and status != 'paid'",
            pc.field("status").is_valid() & (pc.field("status") != "paid"),
        ),
    ],
)
@pytest.mark.spark
def test_a_filter_selects_what_pyarrow_selects_on_the_same_table(
    spark: SparkSession, sample_table: Path, where: str, expected: Any
) -> None:
    spec = _spec(sample_table, where)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    want = lake_ids(sample_table, WINDOW & expected)
    assert want, "a case that selects nothing proves nothing"
    assert ids_of(selected) == want
    assert len(want) < len(lake_ids(sample_table, WINDOW))  # and it left something out


@pytest.mark.spark
def test_the_filter_is_pushed_down_to_the_scan(spark: SparkSession, sample_table: Path) -> None:
    spec = _spec(sample_table, "status = 'paid' and amount > 10")
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    plan = selected._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters:" in plan and "EqualTo(status,paid)" in plan and "GreaterThan(amount," in plan


@pytest.mark.spark
def test_a_filter_on_a_column_the_table_lacks_fails_naming_it(
    spark: SparkSession, sample_table: Path
) -> None:
    spec = _spec(sample_table, "merchant = 'm-1'")
    with pytest.raises(Exception, match="unknown column 'merchant'"):
        transforms.select_window(transforms.read_source(spark, spec.source), spec)


@pytest.mark.parametrize(
    "where,path",
    [
        ({"op": "xor", "parts": []}, "where.op"),
        ({"op": "and", "parts": [{"op": "is_null", "column": "a"}]}, "where.parts"),
        ({"op": "compare", "column": "a", "cmp": "~", "value": {"type": "integer", "value": 1}}, "where.cmp"),
        ({"op": "compare", "column": "a", "cmp": "=", "value": 1}, "where.value"),
        (
            {"op": "compare", "column": "a", "cmp": "=", "value": {"type": "integer", "value": "1"}},
            "where.value",
        ),
        (
            {"op": "compare", "column": "a", "cmp": "=", "value": {"type": "date", "value": "soon"}},
            "where.value",
        ),
        ({"op": "in", "column": "a", "values": []}, "where.values"),
        ({"op": "not", "part": {"op": "is_null", "column": ""}}, "where.part.column"),
        ({"op": "between", "column": "a", "low": {"type": "boolean", "value": True}}, "where.high"),
    ],
)
def test_a_where_tree_the_job_does_not_know_is_refused_naming_its_path(
    sample_table: Path, where: dict[str, Any], path: str
) -> None:
    with pytest.raises(SpecError) as refused:
        spec_from_dict(job_spec(sample_table, "127.0.0.1:9", "unused", where=where))
    assert refused.value.field == path


def test_the_spec_carries_the_tree_as_given_and_reads_it_back(sample_table: Path) -> None:
    spec = _spec(sample_table, "amount >= 1.50 and day = 2024-01-03")
    again = spec_from_dict(spec.to_dict())
    assert again.where == spec.where and again.where is not None
    assert again.where.columns() == ["amount", "day"]
    assert "where" not in _spec_without_filter(sample_table).to_dict()  # specs without one stay as they were


def _spec_without_filter(table: Path) -> Any:
    return spec_from_dict(job_spec(table, "127.0.0.1:9", "unused"))

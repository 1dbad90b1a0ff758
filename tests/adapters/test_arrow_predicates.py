"""``where=`` in pyarrow keeps exactly the rows SQL's three-valued logic keeps: checked against a plain
Python evaluator over random tables with nulls in every column, and the kinds a schema offers."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings

from daemon.adapters.arrow_predicates import arrow_expression, column_kinds
from daemon.core.grammar.predicates import Predicate, check_predicate, parse_predicate
from tests.fixtures.predicates import SCHEMA, holds, predicates, rows


@settings(max_examples=300, deadline=None)
@given(rows, predicates)
def test_pyarrow_keeps_exactly_the_rows_sqls_logic_keeps(
    table_rows: list[dict[str, Any]], predicate: Predicate
) -> None:
    check_predicate(predicate, column_kinds(SCHEMA), source="t")  # only what the plan would accept
    table = pa.Table.from_pylist(table_rows, schema=SCHEMA).append_column(
        "row", pa.array(range(len(table_rows)))
    )
    kept = table.filter(arrow_expression(predicate, SCHEMA)).column("row").to_pylist()
    assert kept == [index for index, row in enumerate(table_rows) if holds(predicate, row) is True]


def test_a_schema_offers_its_scalar_columns_by_kind() -> None:
    schema = pa.schema(
        [
            ("id", pa.large_string()),
            ("qty", pa.int32()),
            ("price", pa.decimal128(10, 2)),
            ("tags", pa.list_(pa.string())),
            ("raw", pa.binary()),
            ("kind", pa.dictionary(pa.int8(), pa.string())),
        ]
    )
    assert column_kinds(schema) == {"id": "string", "qty": "integer", "price": "decimal", "kind": "string"}


def test_a_decimal_column_compares_exactly() -> None:
    schema = pa.schema([("price", pa.decimal128(10, 2))])
    table = pa.table(
        {"price": pa.array([Decimal("1.49"), Decimal("1.50"), Decimal("1.51")], pa.decimal128(10, 2))}
    )
    kept = table.filter(arrow_expression(parse_predicate("price >= 1.50"), schema))
    assert kept.column("price").to_pylist() == [Decimal("1.50"), Decimal("1.51")]

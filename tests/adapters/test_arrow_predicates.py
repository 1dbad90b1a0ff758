"""``where=`` in pyarrow keeps exactly the rows SQL's three-valued logic keeps: checked against a plain
Python evaluator over random tables with nulls in every column, and the kinds a schema offers."""

from __future__ import annotations

import operator
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.adapters.arrow_predicates import arrow_expression, column_kinds
from daemon.core.predicates import (
    And,
    Between,
    Compare,
    In,
    IsNull,
    Not,
    Or,
    Predicate,
    Value,
    check_predicate,
    parse_predicate,
)

SCHEMA = pa.schema(
    [
        ("s", pa.string()),
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("n", pa.timestamp("us")),  # naive: UTC wall times
        ("b", pa.bool_()),
    ]
)
DAYS = [date(2024, 1, 2), date(2024, 1, 3), date(2024, 1, 4)]
MOMENTS = [
    datetime(2024, 1, 3, tzinfo=UTC),
    datetime(2024, 1, 3, 12, tzinfo=UTC),
    datetime(2024, 1, 4, tzinfo=UTC),
]
CELLS: dict[str, list[Any]] = {
    "s": ["a", "b", "c", None],
    "i": [-2, 0, 3, None],
    "f": [-1.5, 0.0, 2.25, None],
    "d": [*DAYS, None],
    "t": [*MOMENTS, None],
    "n": [*(m.replace(tzinfo=None) for m in MOMENTS), None],
    "b": [True, False, None],
}
# What a filter may compare each column with (the kinds the check allows), some of it matching nothing.
LITERALS: dict[str, list[Value]] = {
    "s": ["a", "b", "zz"],
    "i": [-2, 0, 3, 7, Decimal("0.50")],
    "f": [Decimal("-1.50"), Decimal("2.25"), 0, 9],
    "d": [*DAYS, date(2023, 1, 1)],
    "t": [*MOMENTS, date(2024, 1, 3)],  # a date against a timestamp: its UTC midnight
    "n": [*MOMENTS, date(2024, 1, 4)],
    "b": [True, False],
}

rows = st.lists(
    st.fixed_dictionaries({name: st.sampled_from(cells) for name, cells in CELLS.items()}), max_size=30
)
columns = st.sampled_from(list(CELLS))


def _condition(column: str) -> st.SearchStrategy[Predicate]:
    value = st.sampled_from(LITERALS[column])
    ops = ["=", "!="] if column in ("s", "b") else ["=", "!=", "<", "<=", ">", ">="]
    return st.one_of(
        st.builds(Compare, st.just(column), st.sampled_from(ops), value),
        st.builds(In, st.just(column), st.lists(value, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(IsNull, st.just(column), st.booleans()),
        *(
            [st.builds(Between, st.just(column), value, value, st.booleans())]
            if column not in ("s", "b")
            else []
        ),
    )


predicates = st.recursive(
    columns.flatmap(_condition),
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.lists(inner, min_size=2, max_size=3).map(lambda parts: And(tuple(parts))),
        st.lists(inner, min_size=2, max_size=3).map(lambda parts: Or(tuple(parts))),
    ),
    max_leaves=8,
)


def _comparable(cell: Any, value: Value) -> tuple[Any, Any]:
    if isinstance(cell, datetime):
        moment = value if isinstance(value, datetime) else datetime.combine(value, time(), UTC)  # type: ignore[arg-type]
        return (cell if cell.tzinfo else cell.replace(tzinfo=UTC)), moment
    if isinstance(value, Decimal):
        return Decimal(str(cell)), value
    return cell, value


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def holds(predicate: Predicate, row: dict[str, Any]) -> bool | None:
    """SQL's answer for one row: true, false or unknown (None)."""
    match predicate:
        case IsNull(column, negated):
            return (row[column] is not None) if negated else (row[column] is None)
        case Compare(column, op, value):
            if row[column] is None:
                return None
            return _OPS[op](*_comparable(row[column], value))
        case In(column, values, negated):
            if row[column] is None:
                return None
            found = any(operator.eq(*_comparable(row[column], v)) for v in values)
            return not found if negated else found
        case Between(column, low, high, negated):
            if row[column] is None:
                return None
            cell, low_value = _comparable(row[column], low)
            _, high_value = _comparable(row[column], high)
            inside = low_value <= cell <= high_value
            return not inside if negated else inside
        case Not(part):
            answer = holds(part, row)
            return None if answer is None else not answer
        case And(parts):
            answers = [holds(p, row) for p in parts]
            return False if False in answers else (None if None in answers else True)
        case Or(parts):
            answers = [holds(p, row) for p in parts]
            return True if True in answers else (None if None in answers else False)
    raise TypeError(predicate)


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

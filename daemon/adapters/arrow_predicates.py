"""``where=`` predicates in pyarrow: the column kinds a table's schema offers a filter, and a predicate
as a pyarrow dataset expression (what the plan counts a filtered window with, and what tests compute
the expected rows with, independently of the Spark job).

Values keep their meaning against the column's type: a date against a timestamp is that day's UTC
midnight, a number is compared as a number whatever its width (10.5 against whole numbers stays
10.5), and the logic is SQL's three-valued one (pyarrow's ``&``, ``|`` and ``~`` are Kleene's), so a
row whose column is null matches no comparison and is left out, as in Spark.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from daemon.core.grammar.predicates import (
    And,
    Between,
    Compare,
    In,
    IsNull,
    Kind,
    Not,
    Or,
    Predicate,
    Value,
)


def column_kinds(schema: pa.Schema) -> dict[str, Kind]:
    """The columns a filter can test, by kind; others (lists, structs, binary) are left out."""
    kinds: dict[str, Kind] = {}
    for field in schema:
        kind = _kind(field.type)
        if kind is not None:
            kinds[field.name] = kind
    return kinds


def _kind(arrow: pa.DataType) -> Kind | None:
    if pa.types.is_dictionary(arrow):
        return _kind(arrow.value_type)
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "string"
    if pa.types.is_integer(arrow):
        return "integer"
    if pa.types.is_floating(arrow) or pa.types.is_decimal(arrow):
        return "decimal"
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_date(arrow):
        return "date"
    if pa.types.is_timestamp(arrow):
        return "timestamp"
    return None


def arrow_expression(predicate: Predicate, schema: pa.Schema) -> pc.Expression:
    """``predicate`` over a table of ``schema`` (already checked against its kinds)."""
    match predicate:
        case And(parts):
            expression = arrow_expression(parts[0], schema)
            for part in parts[1:]:
                expression = expression & arrow_expression(part, schema)
            return expression
        case Or(parts):
            expression = arrow_expression(parts[0], schema)
            for part in parts[1:]:
                expression = expression | arrow_expression(part, schema)
            return expression
        case Not(part):
            return ~arrow_expression(part, schema)
        case IsNull(column, negated):
            return pc.field(column).is_valid() if negated else pc.field(column).is_null()
        case Compare(column, op, value):
            field, scalar = pc.field(column), _scalar(value, schema.field(column).type)
            return _COMPARE[op](field, scalar)
        case In(column, values, negated):
            found = _found_in(pc.field(column), [_scalar(v, schema.field(column).type) for v in values])
            return ~found if negated else found
        case Between(column, low, high, negated):
            arrow = schema.field(column).type
            field = pc.field(column)
            inside = (field >= _scalar(low, arrow)) & (field <= _scalar(high, arrow))
            return ~inside if negated else inside
    raise TypeError(f"not a predicate: {predicate!r}")


def _found_in(field: pc.Expression, scalars: list[pa.Scalar]) -> pc.Expression:
    """``field IN (...)`` as SQL answers it: unknown for a null cell (pyarrow's ``isin`` says false,
    which ``NOT IN`` would turn into a match); values of different types (whole numbers beside a
    fraction) are looked up per type."""
    by_type: dict[pa.DataType, list[pa.Scalar]] = {}
    for scalar in scalars:
        by_type.setdefault(scalar.type, []).append(scalar)
    lookups = [field.isin(pa.array([s.as_py() for s in group], type=kind)) for kind, group in by_type.items()]
    found = lookups[0]
    for lookup in lookups[1:]:
        found = found | lookup
    return pc.if_else(field.is_null(), pa.scalar(None, type=pa.bool_()), found)


_COMPARE: dict[str, Callable[[pc.Expression, pa.Scalar], pc.Expression]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _scalar(value: Value, arrow: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar the column's type compares with exactly."""
    if isinstance(value, datetime) or (isinstance(value, date) and pa.types.is_timestamp(arrow)):
        moment = value if isinstance(value, datetime) else datetime.combine(value, time(), UTC)
        if arrow.tz is None:  # a naive column holds UTC wall times
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return pa.scalar(moment, type=arrow)
    if isinstance(value, Decimal):
        if pa.types.is_decimal(arrow):
            return pa.scalar(value)
        return pa.scalar(float(value))
    if isinstance(value, bool | str | date):
        return pa.scalar(value)
    if pa.types.is_floating(arrow):
        return pa.scalar(float(value))
    return pa.scalar(value)

"""keys=, types= and where= become one checked filter; fields= is held to the value's columns."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from daemon.core.errors import BadRequest
from daemon.core.grammar import GrammarError, ReplayCommand, parse
from daemon.core.grammar.predicates import Kind, render_predicate
from daemon.usecases.catalog import Source
from daemon.usecases.selection import check_fields, selection_of

KINDS: dict[str, Kind] = {
    "event_id": "string",
    "order_id": "string",
    "status": "string",
    "amount": "decimal",
    "shard": "integer",
    "email": "string",
}


def _source(**changes: Any) -> Source:
    fields: dict[str, Any] = {
        "name": "orders",
        "table": {"path": "/lake/orders", "format": "parquet"},
        "partition_column": "dt",
        "event_time_column": "updated_at",
        "key_column": "order_id",
        "event_id_column": "event_id",
        "type_column": "status",
        "owners": ["U024BE7LH"],
    }
    return Source.model_validate({**fields, **changes})


def _command(text: str) -> ReplayCommand:
    command = parse(f"orders last=6h {text}")
    assert isinstance(command, ReplayCommand)
    return command


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("keys=ord-1,ord-2", "order_id IN ('ord-1', 'ord-2')"),
        ("types=paid", "status IN ('paid')"),
        (
            "keys=ord-1 types=paid,shipped where=amount > 5 or amount < 1",
            "(amount > 5 OR amount < 1) AND order_id IN ('ord-1') AND status IN ('paid', 'shipped')",
        ),
        ("where=amount > 5 and status != 'x' keys=o", "amount > 5 AND status != 'x' AND order_id IN ('o')"),
    ],
)
def test_keys_types_and_where_are_one_canonical_filter(typed: str, canonical: str) -> None:
    selection = selection_of(_source(), _command(typed), KINDS)

    assert selection is not None and render_predicate(selection) == canonical
    assert parse(f"orders last=6h where={canonical}").where == selection  # type: ignore[union-attr]


def test_a_numeric_key_column_takes_numbers_and_refuses_the_rest_by_name() -> None:
    source = _source(key_column="shard")
    assert render_predicate(selection_of(source, _command("keys=1,20"), KINDS)) == "shard IN (1, 20)"  # type: ignore[arg-type]
    with pytest.raises(GrammarError) as refused:
        selection_of(source, _command("keys=1,two"), KINDS)
    assert refused.value.token == "two" and "whole numbers" in refused.value.reason
    decimal = selection_of(_source(key_column="amount"), _command("keys=1.50"), KINDS)
    assert decimal is not None and decimal.values == (Decimal("1.50"),)  # type: ignore[union-attr]


def test_no_selection_is_the_whole_window() -> None:
    assert selection_of(_source(), _command("tps=5"), KINDS) is None


@pytest.mark.parametrize(
    ("source", "typed", "refusal"),
    [
        ({"type_column": None}, "types=paid", "names no type_column"),
        ({"type_column": "kind"}, "types=paid", "orders has no column `kind`"),
        (
            {"key_column": "email", "encrypted_columns": {"email": {"key_ref": "k"}}},
            "keys=a",
            "`email` is encrypted",
        ),
        ({}, "where=amout > 1", "did you mean"),
    ],
)
def test_a_selection_the_source_cannot_answer_is_refused(
    source: dict[str, Any], typed: str, refusal: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        selection_of(_source(**source), _command(typed), KINDS)
    assert refusal in str(refused.value)


def test_fields_are_columns_of_the_value() -> None:
    columns = ["event_id", "order_id", "status", "amount", "dt"]
    check_fields(_source(), ("order_id", "amount"), columns)
    with pytest.raises(GrammarError, match="no column `dt`"):
        check_fields(_source(), ("dt",), columns)  # the partition column is not in the value
    with pytest.raises(GrammarError, match="no value column `amount`"):
        check_fields(_source(value_columns=["order_id", "status"]), ("amount",), columns)
    with pytest.raises(BadRequest, match="raw values as they are"):
        check_fields(_source(value_format="raw", raw={"value_column": "payload"}), ("order_id",), columns)

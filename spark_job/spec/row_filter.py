"""A run's row filter (``where=``) as the spec carries it: a typed JSON tree, never SQL text.

The daemon reads what people type and checks it against the table (``daemon.core.grammar.predicates``); the
job receives the tree, reads it back here into plain values and refuses anything it does not know,
and ``spark_job.transforms`` turns it into a Spark column expression beside the window's own
condition, so the scan can push it down. Every value is tagged with its type, so ``1``, ``1.00``
and ``true`` stay three different things on the way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from spark_job.errors import SpecError

FilterValue = str | int | Decimal | bool | date | datetime
Comparison = Literal["=", "!=", "<", "<=", ">", ">="]
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Condition:
    """One test of one column: ``compare`` (one value), ``in`` (a list), ``between`` (low, high) or
    ``is_null`` (none); ``negated`` turns ``in``, ``between`` and ``is_null`` around."""

    test: Literal["compare", "in", "between", "is_null"]
    column: str
    values: tuple[FilterValue, ...]
    comparison: Comparison = "="
    negated: bool = False


@dataclass(frozen=True)
class Junction:
    both: bool  # and when true, or when false
    parts: tuple[FilterNode, ...]


@dataclass(frozen=True)
class Negation:
    part: FilterNode


FilterNode = Condition | Junction | Negation


@dataclass(frozen=True)
class RowFilter:
    """The spec's ``where`` document, and the tree read from it (checked when the spec is read)."""

    document: Mapping[str, Any]
    tree: FilterNode = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tree", _node(self.document, "where"))

    def columns(self) -> list[str]:
        """Every column the filter reads, once each, in order."""
        return list(dict.fromkeys(_columns(self.tree)))

    def fingerprint(self) -> str:
        """16 hex digits naming the filter in each record's ``replay-filter`` header: a consumer can
        tell two filtered replays of one window apart (the same filter always gives the same digits)."""
        canonical = json.dumps(self.document, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _columns(node: FilterNode) -> list[str]:
    if isinstance(node, Condition):
        return [node.column]
    if isinstance(node, Negation):
        return _columns(node.part)
    return [name for part in node.parts for name in _columns(part)]


def _node(document: object, path: str) -> FilterNode:
    if not isinstance(document, Mapping):
        raise SpecError(path, "must be an object")
    op = document.get("op")
    if op in ("and", "or"):
        parts = document.get("parts")
        if not isinstance(parts, list) or len(parts) < 2:
            raise SpecError(f"{path}.parts", "must list at least two parts")
        return Junction(op == "and", tuple(_node(p, f"{path}.parts[{i}]") for i, p in enumerate(parts)))
    if op == "not":
        return Negation(_node(document.get("part"), f"{path}.part"))
    if op not in ("compare", "in", "between", "is_null"):
        raise SpecError(f"{path}.op", f"unknown filter operation {op!r}")
    column = document.get("column")
    if not isinstance(column, str) or not column:
        raise SpecError(f"{path}.column", "must name a column")
    negated = document.get("not", False)
    if not isinstance(negated, bool):
        raise SpecError(f"{path}.not", "must be true or false")
    if op == "compare":
        comparison = document.get("cmp")
        if comparison not in COMPARISONS:
            raise SpecError(f"{path}.cmp", f"must be one of {', '.join(COMPARISONS)}")
        return Condition("compare", column, (_value(document.get("value"), f"{path}.value"),), comparison)
    if op == "in":
        listed = document.get("values")
        if not isinstance(listed, list) or not listed:
            raise SpecError(f"{path}.values", "must list at least one value")
        values = tuple(_value(v, f"{path}.values[{i}]") for i, v in enumerate(listed))
        return Condition("in", column, values, negated=negated)
    if op == "between":
        low, high = _value(document.get("low"), f"{path}.low"), _value(document.get("high"), f"{path}.high")
        return Condition("between", column, (low, high), negated=negated)
    return Condition("is_null", column, (), negated=negated)


def _value(document: object, path: str) -> FilterValue:
    if not isinstance(document, Mapping):
        raise SpecError(path, "must be an object with a type and a value")
    kind, value = document.get("type"), document.get("value")
    try:
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind == "decimal" and isinstance(value, str):
            return Decimal(value)
        if kind == "boolean" and isinstance(value, bool):
            return value
        if kind == "date" and isinstance(value, str):
            return date.fromisoformat(value)
        if kind == "timestamp" and isinstance(value, str):
            return datetime.fromisoformat(value.removesuffix("Z")).replace(tzinfo=UTC)
    except (ValueError, InvalidOperation):
        raise SpecError(path, f"is not a {kind}: {value!r}") from None
    raise SpecError(path, f"is not a typed value: {dict(document)!r}")

"""When two filtered selections of one window cannot share a row: what lets two live replays run
together.

The live-topic guard refuses a second replay of an overlapping window into the same live topic (it
would publish rows twice). With filters, two replays may overlap in time and still select disjoint
rows: "merchant m-1" and "merchant m-2". The rule here only ever answers "disjoint" when it can prove
it, from each filter's top-level ``and``: a column both pin to a finite set of values (``c = v``,
``c IN (...)``) with no value in common. Anything else (no filter, a range, an ``or`` at the top, a
negation) counts as overlapping. A null matches neither ``=`` nor ``IN``, so it cannot make two such
pins share a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time

from daemon.core.grammar.predicates import And, Compare, In, Predicate, Value


def pinned(predicate: Predicate) -> dict[str, frozenset[object]]:
    """Each column the filter's top-level ``and`` holds to a finite set: the values it may take."""
    parts = predicate.parts if isinstance(predicate, And) else (predicate,)
    pins: dict[str, frozenset[object]] = {}
    for part in parts:
        match part:
            case Compare(column, "=", value):
                values = frozenset({_key(value)})
            case In(column, values_in, False):
                values = frozenset(_key(v) for v in values_in)
            case _:
                continue
        pins[column] = pins[column] & values if column in pins else values
    return pins


def disjoint(first: Predicate | None, second: Predicate | None) -> bool:
    """Whether no row can satisfy both filters, as far as their pins prove; False when unsure."""
    if first is None or second is None:
        return False
    return _apart(pinned(first), pinned(second))


def _apart(first: Mapping[str, frozenset[object]], second: Mapping[str, frozenset[object]]) -> bool:
    return any(not first[column] & second[column] for column in first.keys() & second.keys()) or any(
        not values for values in (*first.values(), *second.values())
    )


def _key(value: Value) -> object:
    """A value as a set member, equal where the filter's meaning is: ``true`` is not ``1`` (Python's
    ``True == 1`` would merge them), and a date is its UTC midnight (a date against a timestamp
    column); numbers of any width compare as numbers, as the filter does."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime.combine(value, time(), UTC)
    return value

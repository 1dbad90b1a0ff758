"""Two filtered selections are called disjoint only when no row can satisfy both."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.adapters.arrow_predicates import column_kinds
from daemon.core.grammar.predicates import And, In, Predicate, check_predicate, parse_predicate
from daemon.core.selections import disjoint
from tests.fixtures.predicates import LITERALS, SCHEMA, holds, predicates, rows


@pytest.mark.parametrize(
    ("first", "second", "apart"),
    [
        ("merchant = 'm-1'", "merchant = 'm-2'", True),
        ("merchant IN ('m-1', 'm-2')", "merchant IN ('m-3') AND amount > 5", True),
        ("merchant IN ('m-1', 'm-2')", "merchant IN ('m-2', 'm-3')", False),
        ("merchant = 'm-1' AND kind = 'a'", "kind = 'b'", True),
        ("merchant = 'm-1'", "kind = 'b'", False),  # different columns: a row may have both
        ("merchant = 'm-1'", "merchant != 'm-1'", False),  # provable, but not by pins: unsure
        ("merchant = 'm-1' OR merchant = 'm-2'", "merchant = 'm-3'", False),  # an or at the top
        ("n = 1", "n = 1.00", False),  # one number
        ("flag = true", "n = 1", False),
        ("at = 2024-01-03", "at = 2024-01-03T00:00Z", False),  # a date is its UTC midnight
        ("a = 1 AND a = 2", "b = 3", True),  # keeps nothing at all
    ],
)
def test_only_pins_with_no_value_in_common_are_apart(first: str, second: str, apart: bool) -> None:
    assert disjoint(parse_predicate(first), parse_predicate(second)) is apart
    assert disjoint(parse_predicate(second), parse_predicate(first)) is apart


def test_a_replay_without_a_filter_overlaps_every_other() -> None:
    assert not disjoint(None, parse_predicate("merchant = 'm-1'"))
    assert not disjoint(parse_predicate("merchant = 'm-1'"), None)
    assert not disjoint(None, None)


def _accepted(predicate: Predicate) -> bool:
    try:
        check_predicate(predicate, column_kinds(SCHEMA), source="t")
    except Exception:
        return False
    return True


def _pinned(column: str) -> st.SearchStrategy[Predicate]:
    """``column IN (...)`` of the fixture's literals for it, and whatever else the filter says."""
    values = st.lists(st.sampled_from(LITERALS[column]), min_size=1, max_size=3).map(tuple)
    return st.builds(lambda vs, rest: And((In(column, vs), rest)), values, predicates)


pairs = st.sampled_from(list(LITERALS)).flatmap(lambda c: st.tuples(_pinned(c), _pinned(c))) | st.tuples(
    predicates, predicates
)


@settings(max_examples=500, deadline=None)
@given(rows, pairs.filter(lambda pair: _accepted(pair[0]) and _accepted(pair[1])))
def test_disjoint_filters_never_share_a_row(
    table: list[dict[str, Any]], pair: tuple[Predicate, Predicate]
) -> None:
    first, second = pair
    if disjoint(first, second):
        assert not [row for row in table if holds(first, row) is True and holds(second, row) is True]


@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
def test_pins_of_one_column_overlap_exactly_when_they_share_a_value(values: list[str]) -> None:
    listed = ", ".join(f"'{v}'" for v in values)
    for other in ("a", "b", "c"):
        apart = disjoint(parse_predicate(f"s IN ({listed})"), parse_predicate(f"s = '{other}'"))
        assert apart is (other not in values)

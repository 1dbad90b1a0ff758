"""``where=`` predicates: read forgivingly, written back in one canonical form, refused pointing at the
token, checked against the table's columns, carried to the job as a typed JSON document."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.grammar.predicates import (
    MAX_DEPTH,
    MAX_IN_VALUES,
    MAX_PREDICATE_CHARS,
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
    check_predicate,
    columns_of,
    parse_predicate,
    predicate_document,
    predicate_from_document,
    render_predicate,
)
from daemon.core.grammar.values import SMART_QUOTES, GrammarError


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("amount > 100", "amount > 100"),
        ("amount>100 and merchant in ('m-1',\"m-2\")", "amount > 100 AND merchant IN ('m-1', 'm-2')"),
        ("merchant IN (\u2018m-1\u2019, \u201cm-2\u201d)", "merchant IN ('m-1', 'm-2')"),  # a phone's quotes
        ("type == 'payment.captured' OR type <> 'refund'", "type = 'payment.captured' OR type != 'refund'"),
        ("a = 1 or b = 2 and c = 3", "a = 1 OR b = 2 AND c = 3"),
        ("(a = 1 or b = 2) and c = 3", "(a = 1 OR b = 2) AND c = 3"),
        ("a = 1 and (b = 2 and c = 3)", "a = 1 AND b = 2 AND c = 3"),
        ("not amount between 10 and 20.5", "NOT (amount BETWEEN 10 AND 20.5)"),
        ("amount not between -5 and 5", "amount NOT BETWEEN -5 AND 5"),
        ("status is not null and note IS NULL", "status IS NOT NULL AND note IS NULL"),
        ("day >= 2024-01-03", "day >= 2024-01-03"),
        ("at < 2024-01-03T12:00", "at < 2024-01-03T12:00:00Z"),
        ("at < timestamp '2024-01-03 12:00:30'", "at < 2024-01-03T12:00:30Z"),
        ("day = DATE '2024-01-03'", "day = 2024-01-03"),
        ("date = 2024-01-03", "date = 2024-01-03"),  # a column may be called date
        ("paid = TRUE and name = 'O''Brien'", "paid = true AND name = 'O''Brien'"),
        ("payload.kind = 'a'", "payload.kind = 'a'"),
    ],
)
def test_what_people_type_reads_the_one_way_it_can_be_meant(typed: str, canonical: str) -> None:
    predicate = parse_predicate(typed)
    assert render_predicate(predicate) == canonical
    assert parse_predicate(canonical) == predicate


@pytest.mark.parametrize(
    ("typed", "token", "reason"),
    [
        ("amount >", None, "expected a value at the end of the filter"),
        ("amount > abc", "abc", "quote text"),
        ("amount = null", "null", "is null"),
        ("(a = 1", None, "expected `)` at the end"),
        ("a = 1 b = 2", "b", "expected and, or or the end"),
        ("and = 1", "and", "expected a column name"),
        ("a ~ 1", "~", "not an operator or a value"),
        ("a in 1, 2", "1", "expected `(`"),
        ("a between 1 or 2", "or", "expected and"),
        ("a is 1", "1", "expected null"),
        ("a not = 1", "=", "expected in or between"),
        ("a = DATE '2024-13-01'", "2024-13-01", "not a date"),
        ("a = timestamp 'soon'", "'soon'", "not a timestamp"),
        ("", "where=", "the filter is empty"),
        ("a = 1 " + "x" * MAX_PREDICATE_CHARS, "where=", "at most"),
        ("a in (" + ", ".join(["1"] * (MAX_IN_VALUES + 1)) + ")", "where=", "at most 1,000 values"),
        ("(" * (MAX_DEPTH + 2) + "a = 1" + ")" * (MAX_DEPTH + 2), "(", "nests at most"),
        ("a = 'x\ty'", "'x\ty'", "U+0009"),
        ("a = 'x\u200by'", "'x\u200by'", "U+200B"),
        ("a = 'x", "'x", "unbalanced quote"),
    ],
)
def test_every_refusal_names_the_token_at_fault_and_the_usage(
    typed: str, token: str | None, reason: str
) -> None:
    with pytest.raises(GrammarError) as refused:
        parse_predicate(typed)
    assert refused.value.token == token
    assert reason in refused.value.reason
    assert "Usage: where=" in str(refused.value)


COLUMNS: dict[str, Kind] = {
    "event_id": "string",
    "amount": "decimal",
    "quantity": "integer",
    "paid": "boolean",
    "day": "date",
    "event_time": "timestamp",
    "email": "string",
}


def test_a_predicate_the_table_can_answer_passes() -> None:
    predicate = parse_predicate(
        "amount > 10 and quantity in (1, 2) and paid = true and day between 2024-01-01 and 2024-01-03 "
        "and event_time >= 2024-01-02 and event_time < 2024-01-02T06:00 and event_id is not null"
    )
    check_predicate(predicate, COLUMNS, encrypted=frozenset({"email"}), source="orders")
    assert list(dict.fromkeys(columns_of(predicate))) == [
        "amount",
        "quantity",
        "paid",
        "day",
        "event_time",
        "event_id",
    ]


@pytest.mark.parametrize(
    ("typed", "token", "reason"),
    [
        ("amout > 1", "amout", "orders has no column `amout`"),
        ("amount > 'abc'", "'abc'", "`amount` holds numbers; 'abc' is text"),
        ("event_id = 5", "5", "`event_id` holds text; 5 is a number"),
        (
            "day = 2024-01-03T10:00",
            "2024-01-03T10:00:00Z",
            "`day` holds dates; 2024-01-03T10:00:00Z is a timestamp",
        ),
        ("paid = 1", "1", "true or false"),
        ("not (a = 1 or email in ('x@y.z'))", "a", "no column `a`"),
        ("email = 'x@y.z'", "email", "`email` is encrypted in orders"),
    ],
)
def test_a_predicate_the_table_cannot_answer_is_refused_naming_the_token(
    typed: str, token: str, reason: str
) -> None:
    with pytest.raises(GrammarError) as refused:
        check_predicate(parse_predicate(typed), COLUMNS, encrypted=frozenset({"email"}), source="orders")
    assert refused.value.token == token
    assert reason in refused.value.reason


def test_an_unknown_column_suggests_the_closest_one() -> None:
    with pytest.raises(GrammarError, match=r"did you mean `amount`"):
        check_predicate(parse_predicate("amout > 1"), COLUMNS, source="orders")


# -- properties -----------------------------------------------------------------------------------

_WORDS = {"and", "or", "not", "in", "between", "is", "null", "true", "false"}
names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}(\.[a-z_][a-z0-9_]{0,5})?", fullmatch=True).filter(
    lambda name: name.split(".")[0] not in _WORDS
)
values: st.SearchStrategy[Value] = st.one_of(
    st.text(alphabet="a '\"(),=-.", max_size=8),  # what quoting and tokens could trip over
    st.text(
        alphabet=st.characters(
            blacklist_characters="".join(map(chr, SMART_QUOTES)),
            blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"),
            codec="utf-8",
        ).filter(lambda char: char == " " or not char.isspace()),
        max_size=12,
    ),
    st.integers(-(10**12), 10**12),
    st.decimals(min_value=-(10**6), max_value=10**6, places=2, allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.dates(min_value=date(1000, 1, 1)),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)),
)
conditions: st.SearchStrategy[Predicate] = st.one_of(
    st.builds(Compare, names, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), values),
    st.builds(In, names, st.lists(values, min_size=1, max_size=4).map(tuple), st.booleans()),
    st.builds(Between, names, values, values, st.booleans()),
    st.builds(IsNull, names, st.booleans()),
)


def _flat(kind: type[And] | type[Or]) -> Callable[[list[Predicate]], Predicate]:
    def build(parts: list[Predicate]) -> Predicate:
        flat: list[Predicate] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, kind) else (part,))
        return kind(tuple(flat))

    return build


predicates = st.recursive(
    conditions,
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.lists(inner, min_size=2, max_size=3).map(_flat(And)),
        st.lists(inner, min_size=2, max_size=3).map(_flat(Or)),
    ),
    max_leaves=12,
)


@given(predicates)
def test_the_canonical_text_reads_back_as_the_same_typed_predicate(predicate: Predicate) -> None:
    again = parse_predicate(render_predicate(predicate))
    assert predicate_document(again) == predicate_document(predicate)  # types too: 1 is not true, nor 1.00
    assert render_predicate(again) == render_predicate(predicate)


@given(predicates)
def test_the_jobs_document_is_json_and_reads_back_as_the_same_predicate(predicate: Predicate) -> None:
    document = json.loads(json.dumps(predicate_document(predicate)))
    again = predicate_from_document(document)
    assert predicate_document(again) == predicate_document(predicate)


def test_numbers_keep_their_type_and_digits() -> None:
    predicate = parse_predicate("a = 1.50 and b = 2")
    assert predicate == And((Compare("a", "=", Decimal("1.50")), Compare("b", "=", 2)))
    assert predicate_document(predicate)["parts"][0]["value"] == {"type": "decimal", "value": "1.50"}

"""Row filters (``where=``): the project's own small predicate language, typed, never SQL text.

A predicate is read into a tree of plain values (``Compare``, ``In``, ``Between``, ``IsNull``, ``And``,
``Or``, ``Not``), checked against the table's columns at plan time, rendered back in one canonical
form (what the card echoes and the run stores), and handed to the job as a JSON document, which the
job compiles to a Spark column expression. Nothing typed is ever pasted into SQL: a value can only
be a literal, a name can only be a column.

What people type on a phone is read the one way it can be meant: quotes of any kind (straight or
curly, single or double; so a curly apostrophe inside a value reads as a quote), keywords in any
case, spaces around operators or none, ``==`` for ``=`` and ``<>`` for ``!=``. Every refusal names
the token at fault.

    amount > 100 and merchant in ('m-1', "m-2")
    status is not null AND (country = 'DE' OR created_at >= 2024-01-03T12:00)
    NOT amount BETWEEN 10 AND 20
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, cast

from daemon.core.grammar.values import SMART_QUOTES, GrammarError, describe

OPTION = "where="  # the token blamed for the filter as a whole
USAGE = (
    "where=<column> <op> <value> [and|or ...]; ops: = != < <= > >=, [not] in (v, ...), "
    "[not] between a and b, is [not] null, not, ( ); values: 'text', 12, 1.5, true, 2024-01-03, "
    "2024-01-03T12:00"
)
MAX_PREDICATE_CHARS = 4_000
MAX_IN_VALUES = 1_000
MAX_DEPTH = 32

Op = Literal["=", "!=", "<", "<=", ">", ">="]
Value = str | int | Decimal | bool | date | datetime  # a datetime is a date too: check it first
Kind = Literal["string", "integer", "decimal", "boolean", "date", "timestamp"]
KINDS: tuple[Kind, ...] = ("string", "integer", "decimal", "boolean", "date", "timestamp")


@dataclass(frozen=True)
class Compare:
    column: str
    op: Op
    value: Value


@dataclass(frozen=True)
class In:
    column: str
    values: tuple[Value, ...]
    negated: bool = False


@dataclass(frozen=True)
class Between:
    column: str
    low: Value
    high: Value
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class Not:
    part: Predicate


Predicate = Compare | In | Between | IsNull | And | Or | Not


# -- reading ------------------------------------------------------------------------------------

_OPS: dict[str, Op] = {
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
# Words that are never a column name here (``date`` and ``timestamp`` are, outside a value's place).
_KEYWORDS = frozenset({"and", "or", "not", "in", "between", "is", "null", "true", "false"})
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<timestamp>\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|z|[+-]00:?00)?)
  | (?P<date>\d{4}-\d{2}-\d{2})
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # string, timestamp, date, number, op, punct, word, end
    text: str

    @property
    def word(self) -> str:
        return self.text.lower() if self.kind == "word" else ""


def _refuse(reason: str, token: _Token) -> GrammarError:
    """The refusal blaming ``token``; at the end of the text there is no token to name."""
    if token.kind == "end":
        return GrammarError(f"{reason} at the end of the filter", usage=USAGE)
    return GrammarError(reason, token=token.text, usage=USAGE)


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            bad = text[at:].split()[0] if text[at:].split() else text[at]
            if text[at] in "'\"":
                raise GrammarError(f"unbalanced quote ({text[at]})", token=text[at:], usage=USAGE)
            raise GrammarError(
                "not an operator or a value a filter knows (quote text values)", token=bad, usage=USAGE
            )
        kind = match.lastgroup or ""
        if kind != "space":
            found.append(_Token(kind, match.group()))
        at = match.end()
    found.append(_Token("end", ""))
    return found


def parse_predicate(text: str) -> Predicate:
    """The predicate ``text`` says; ``GrammarError`` naming the token at fault when it says none."""
    text = text.translate(SMART_QUOTES).strip()
    if not text:
        raise GrammarError("the filter is empty", token=OPTION, usage=USAGE)
    if len(text) > MAX_PREDICATE_CHARS:
        raise GrammarError(
            f"a filter is at most {MAX_PREDICATE_CHARS:,} characters", token=OPTION, usage=USAGE
        )
    reader = _Reader(_tokens(text))
    predicate = reader.disjunction(0)
    if reader.peek.kind != "end":
        raise _refuse("expected and, or or the end of the filter", reader.peek)
    return predicate


class _Reader:
    """Recursive descent: or binds looser than and, and looser than not."""

    def __init__(self, tokens: list[_Token]) -> None:
        self._tokens = tokens
        self._at = 0

    @property
    def peek(self) -> _Token:
        return self._tokens[self._at]

    def _take(self) -> _Token:
        token = self._tokens[self._at]
        self._at += 1
        return token

    def _expect_word(self, word: str) -> None:
        token = self._take()
        if token.word != word:
            raise _refuse(f"expected {word}", token)

    def _expect_punct(self, mark: str) -> None:
        token = self._take()
        if token.text != mark:
            raise _refuse(f"expected `{mark}`", token)

    def disjunction(self, depth: int) -> Predicate:
        parts = [self.conjunction(depth)]
        while self.peek.word == "or":
            self._take()
            parts.append(self.conjunction(depth))
        return _joined(Or, parts)

    def conjunction(self, depth: int) -> Predicate:
        parts = [self.negation(depth)]
        while self.peek.word == "and":
            self._take()
            parts.append(self.negation(depth))
        return _joined(And, parts)

    def negation(self, depth: int) -> Predicate:
        if depth > MAX_DEPTH:
            raise _refuse(f"a filter nests at most {MAX_DEPTH} deep", self.peek)
        if self.peek.word == "not":
            self._take()
            return Not(self.negation(depth + 1))
        if self.peek.text == "(":
            self._take()
            inner = self.disjunction(depth + 1)
            self._expect_punct(")")
            return inner
        return self.condition()

    def condition(self) -> Predicate:
        name = self._take()
        if name.kind != "word" or name.word in _KEYWORDS:
            raise _refuse("expected a column name", name)
        column = name.text
        token = self.peek
        if token.kind == "op":
            self._take()
            return Compare(column, _OPS[token.text], self.value())
        negated = token.word == "not"
        if negated:
            self._take()
            token = self.peek
        if token.word == "in":
            self._take()
            return In(column, self.value_list(), negated)
        if token.word == "between":
            self._take()
            low = self.value()
            self._expect_word("and")
            return Between(column, low, self.value(), negated)
        if token.word == "is" and not negated:
            self._take()
            is_not = self.peek.word == "not"
            if is_not:
                self._take()
            self._expect_word("null")
            return IsNull(column, is_not)
        expected = "in or between" if negated else "an operator, in, between or is null"
        raise _refuse(f"expected {expected} after `{column}`", token)

    def value_list(self) -> tuple[Value, ...]:
        self._expect_punct("(")
        values = [self.value()]
        while self.peek.text == ",":
            self._take()
            values.append(self.value())
        self._expect_punct(")")
        if len(values) > MAX_IN_VALUES:
            raise GrammarError(
                f"an in list holds at most {MAX_IN_VALUES:,} values", token=OPTION, usage=USAGE
            )
        return tuple(values)

    def value(self) -> Value:
        token = self._take()
        if token.word in ("date", "timestamp") and self.peek.kind == "string":
            return _typed(token.word, self._take())
        return _literal(token)


def _joined(kind: type[And] | type[Or], parts: list[Predicate]) -> Predicate:
    """One part is itself; nested parts of the same kind are flattened (``a and (b and c)``)."""
    if len(parts) == 1:
        return parts[0]
    flat: list[Predicate] = []
    for part in parts:
        flat.extend(part.parts if isinstance(part, kind) else (part,))
    return kind(tuple(flat))


def _literal(token: _Token) -> Value:
    if token.kind == "string":
        quote = token.text[0]
        for char in token.text:  # what a chat or a shell would not carry through as typed
            if unicodedata.category(char).startswith("C") or (char.isspace() and char != " "):
                raise GrammarError(
                    f"contains an invisible, control or unusual space character {describe(char)}",
                    token=token.text,
                    usage=USAGE,
                )
        return token.text[1:-1].replace(quote * 2, quote)
    if token.kind == "number":
        return int(token.text) if "." not in token.text else Decimal(token.text)
    if token.kind == "date":
        return _date(token)
    if token.kind == "timestamp":
        return _timestamp(token)
    if token.word in ("true", "false"):
        return token.word == "true"
    if token.word == "null":
        raise GrammarError("compare with null as `is null` or `is not null`", token=token.text, usage=USAGE)
    if token.kind == "word":
        raise GrammarError("expected a value: quote text ('like this')", token=token.text, usage=USAGE)
    raise _refuse("expected a value", token)


def _typed(word: str, token: _Token) -> Value:
    """``date '2024-01-03'`` and ``timestamp '2024-01-03 12:00'``, as SQL writes them."""
    inner = token.text[1:-1].replace(" ", "T", 1)
    kind = "date" if word == "date" else "timestamp"
    match = _TOKEN.fullmatch(inner)
    if match is None or match.lastgroup != kind:
        raise GrammarError(f"not a {word}", token=token.text, usage=USAGE)
    return _date(_Token(kind, inner)) if kind == "date" else _timestamp(_Token(kind, inner))


def _date(token: _Token) -> date:
    try:
        return date.fromisoformat(token.text)
    except ValueError:
        raise GrammarError("not a date", token=token.text, usage=USAGE) from None


def _timestamp(token: _Token) -> datetime:
    text = re.sub(r"[Zz]$|[+-]00:?00$", "", token.text)
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        raise GrammarError("not a timestamp (UTC)", token=token.text, usage=USAGE) from None


# -- writing ------------------------------------------------------------------------------------


def render_predicate(predicate: Predicate) -> str:
    """The canonical text: what the card echoes and the run stores; reading it gives ``predicate``."""
    return _render(predicate)


def check_canonical(predicate: Predicate) -> None:
    """Refuse a tree that reading its own text would not give back (one built in code, not read):
    the text is what a run stores and echoes, so the two must be one selection."""
    try:
        same = parse_predicate(render_predicate(predicate)) == predicate
    except TypeError:
        same = False
    if not same:
        raise GrammarError(f"not a filter as the grammar reads one: {predicate!r}", token=OPTION, usage=USAGE)


def _render(predicate: Predicate) -> str:
    match predicate:
        case Compare(column, op, value):
            return f"{column} {op} {render_value(value)}"
        case In(column, values, negated):
            listed = ", ".join(render_value(v) for v in values)
            return f"{column} {'NOT IN' if negated else 'IN'} ({listed})"
        case Between(column, low, high, negated):
            word = "NOT BETWEEN" if negated else "BETWEEN"
            return f"{column} {word} {render_value(low)} AND {render_value(high)}"
        case IsNull(column, negated):
            return f"{column} IS {'NOT NULL' if negated else 'NULL'}"
        case Not(part):
            return f"NOT {_render(part) if _simple(part) else f'({_render(part)})'}"
        case And(parts):
            return " AND ".join(_render(p) if not isinstance(p, Or) else f"({_render(p)})" for p in parts)
        case Or(parts):
            return " OR ".join(_render(p) for p in parts)
    raise TypeError(f"not a predicate: {predicate!r}")


def _simple(predicate: Predicate) -> bool:
    return isinstance(predicate, Compare | IsNull | Not)


def render_value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")  # never an exponent: 1E+2 is not a number the filter reads
    return str(value)


# -- checking against the table -----------------------------------------------------------------


def columns_of(predicate: Predicate) -> Iterator[str]:
    """Every column the predicate reads, in order, with repeats."""
    return (node.column for node in _conditions(predicate))


def check_predicate(
    predicate: Predicate, columns: Mapping[str, Kind], *, encrypted: frozenset[str] = frozenset(), source: str
) -> None:
    """Refuse a predicate the table cannot answer: an unknown column, an encrypted one (its stored
    bytes are ciphertext: a filter would compare them with plain text and match nothing), a value
    of the wrong type. ``columns`` maps each column the source's table has to its kind."""
    for node in _conditions(predicate):
        column = node.column
        if column not in columns:
            close = difflib.get_close_matches(column, list(columns), n=1)
            raise GrammarError(
                f"{source} has no column `{column}` (its columns: {', '.join(sorted(columns))})",
                token=column,
                usage=USAGE,
                suggestion=close[0] if close else None,
            )
        if column in encrypted:
            raise GrammarError(
                f"`{column}` is encrypted in {source}: a filter cannot look into it",
                token=column,
                usage=USAGE,
            )
        for value in _values(node):
            if not fits(columns[column], value):
                shown = render_value(value)
                raise GrammarError(
                    f"`{column}` holds {_NAMES[columns[column]]}; {shown} is {_kind_name(value)}",
                    token=shown,
                    usage=USAGE,
                )


_NAMES: dict[Kind, str] = {
    "string": "text",
    "integer": "whole numbers",
    "decimal": "numbers",
    "boolean": "true or false",
    "date": "dates",
    "timestamp": "timestamps",
}


def _kind_name(value: Value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "text"
    if isinstance(value, datetime):
        return "a timestamp"
    if isinstance(value, date):
        return "a date"
    return "a number"


def fits(kind: Kind, value: Value) -> bool:
    """Whether a column of ``kind`` can be compared with ``value`` without a guess."""
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, str):
        return kind == "string"
    if isinstance(value, datetime):
        return kind == "timestamp"
    if isinstance(value, date):
        return kind in ("date", "timestamp")  # a date is its midnight, UTC
    return kind in ("integer", "decimal")


Condition = Compare | In | Between | IsNull


def _conditions(predicate: Predicate) -> Iterator[Condition]:
    match predicate:
        case Compare() | In() | Between() | IsNull():
            yield predicate
        case Not(part):
            yield from _conditions(part)
        case And(parts) | Or(parts):
            for part in parts:
                yield from _conditions(part)


def _values(node: Condition) -> tuple[Value, ...]:
    match node:
        case Compare(value=value):
            return (value,)
        case In(values=values):
            return values
        case Between(low=low, high=high):
            return (low, high)
    return ()


# -- the job's document -------------------------------------------------------------------------


def predicate_document(predicate: Predicate) -> dict[str, Any]:
    """The predicate as the job's spec carries it: JSON, every value tagged with its type."""
    match predicate:
        case Compare(column, op, value):
            return {"op": "compare", "column": column, "cmp": op, "value": value_document(value)}
        case In(column, values, negated):
            return {
                "op": "in",
                "column": column,
                "values": [value_document(v) for v in values],
                "not": negated,
            }
        case Between(column, low, high, negated):
            return {
                "op": "between",
                "column": column,
                "low": value_document(low),
                "high": value_document(high),
                "not": negated,
            }
        case IsNull(column, negated):
            return {"op": "is_null", "column": column, "not": negated}
        case Not(part):
            return {"op": "not", "part": predicate_document(part)}
        case And(parts):
            return {"op": "and", "parts": [predicate_document(p) for p in parts]}
        case Or(parts):
            return {"op": "or", "parts": [predicate_document(p) for p in parts]}
    raise TypeError(f"not a predicate: {predicate!r}")


def value_document(value: Value) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean", "value": value}
    if isinstance(value, str):
        return {"type": "string", "value": value}
    if isinstance(value, datetime):
        return {"type": "timestamp", "value": render_value(value)}
    if isinstance(value, date):
        return {"type": "date", "value": value.isoformat()}
    if isinstance(value, Decimal):
        return {"type": "decimal", "value": str(value)}
    return {"type": "integer", "value": value}


def predicate_from_document(document: Mapping[str, Any]) -> Predicate:
    """The inverse of ``predicate_document`` (a stored run's selection read back)."""
    op = document["op"]
    if op == "compare":
        return Compare(document["column"], cast(Op, document["cmp"]), value_from_document(document["value"]))
    if op == "in":
        values = tuple(value_from_document(v) for v in document["values"])
        return In(document["column"], values, bool(document["not"]))
    if op == "between":
        low, high = value_from_document(document["low"]), value_from_document(document["high"])
        return Between(document["column"], low, high, bool(document["not"]))
    if op == "is_null":
        return IsNull(document["column"], bool(document["not"]))
    if op == "not":
        return Not(predicate_from_document(document["part"]))
    if op in ("and", "or"):
        parts = tuple(predicate_from_document(p) for p in document["parts"])
        return And(parts) if op == "and" else Or(parts)
    raise ValueError(f"not a predicate document: {op!r}")


def value_from_document(document: Mapping[str, Any]) -> Value:
    kind, value = document["type"], document["value"]
    if kind == "boolean":
        return bool(value)
    if kind == "string":
        return str(value)
    if kind == "timestamp":
        return _timestamp(_Token("timestamp", str(value)))
    if kind == "date":
        return date.fromisoformat(str(value))
    if kind == "decimal":
        try:
            return Decimal(str(value))
        except InvalidOperation:
            raise ValueError(f"not a decimal: {value!r}") from None
    if kind == "integer":
        return int(value)
    raise ValueError(f"not a value document: {kind!r}")

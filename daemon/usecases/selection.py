"""A replay's selection as one filter, and the fields its values keep, checked against the source.

``keys=`` and ``types=`` are ``IN`` lists over the source's key and type columns, joined with
``where=`` by ``and`` into the one predicate the run stores, the plan counts, the job applies, the
reconcile expects and the live-topic guard compares: one selection, however it was written. Each
listed value is read as the column's kind (a numeric key column takes numbers), and the whole is
checked against the table like any filter (an unknown or encrypted column, a value of the wrong
kind: refused naming it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation

from daemon.core.errors import BadRequest
from daemon.core.grammar import GrammarError, ReplaySpec
from daemon.core.grammar.predicates import And, In, Kind, Predicate, Value, check_predicate
from daemon.usecases.catalog import Source

_LISTED_USAGE = "keys=k1,k2 (the key column) or types=a,b (the source's type_column)"


def selection_of(source: Source, command: ReplaySpec, kinds: Mapping[str, Kind]) -> Predicate | None:
    """The command's rows as one checked filter; None when it selects the whole window."""
    parts: list[Predicate] = []
    if command.where is not None:
        parts.extend(command.where.parts if isinstance(command.where, And) else (command.where,))
    if command.keys:
        parts.append(_listed("keys", source.key_column, command.keys, kinds))
    if command.types:
        if source.type_column is None:
            raise BadRequest(
                f"source '{source.name}' names no type_column for types= (its catalog entry can add "
                "one); filter on a column with where= instead"
            )
        parts.append(_listed("types", source.type_column, command.types, kinds))
    if not parts:
        return None
    selection = parts[0] if len(parts) == 1 else And(tuple(parts))
    check_predicate(selection, kinds, encrypted=frozenset(source.encrypted_columns), source=source.name)
    return selection


def key_filter(source: Source, keys: Sequence[str], kinds: Mapping[str, Kind]) -> In:
    """A key file's keys over the key column, read as its kind and checked like any filter (it is
    counted, not stored: the run keeps the file and its digest)."""
    listed = _listed("keys", source.key_column, keys, kinds)
    check_predicate(listed, kinds, encrypted=frozenset(source.encrypted_columns), source=source.name)
    return listed


def _listed(name: str, column: str, items: Sequence[str], kinds: Mapping[str, Kind]) -> In:
    kind = kinds.get(column)
    return In(column, tuple(_typed(name, item, kind) for item in items))


def _typed(name: str, item: str, kind: Kind | None) -> Value:
    """A listed item as the column holds it: text stays text, a numeric column takes a number."""
    if kind == "integer":
        try:
            return int(item)
        except ValueError:
            raise GrammarError(
                f"{name}= lists '{item}', and the column holds whole numbers", token=item, usage=_LISTED_USAGE
            ) from None
    if kind == "decimal":
        try:
            return Decimal(item)
        except InvalidOperation:
            raise GrammarError(
                f"{name}= lists '{item}', and the column holds numbers", token=item, usage=_LISTED_USAGE
            ) from None
    return item  # text; another kind is refused by the filter's check, naming the column


def check_fields(source: Source, fields: Sequence[str], columns: Sequence[str]) -> None:
    """``fields=``: columns of the table, among the source's value columns, of a JSON source."""
    if not fields:
        return
    if source.value_format != "json":
        raise BadRequest(
            f"source '{source.name}' replays its {source.value_format} values as they are: no fields="
        )
    allowed = source.value_columns
    if allowed is None:  # the default value: every column but the partition column
        allowed = [name for name in columns if name != source.partition_column]
    unknown = [name for name in fields if name not in allowed]
    if unknown:
        what = "value columns" if source.value_columns is not None else "columns"
        raise GrammarError(
            f"{source.name} has no {what[:-1]} `{unknown[0]}` (its {what}: {', '.join(sorted(allowed))})",
            token=unknown[0],
            usage="fields=a,b,c: columns of the source's JSON value",
        )

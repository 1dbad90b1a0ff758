"""Decrypt declared PII columns on the executors, between the Arrow batches and the publisher.

The record value is built in the JVM (``to_json(struct(*))``), so this step sits inside the publish
task: it reads each row's JSON, decrypts the declared columns and splices the plaintext into the
JSON text in place of the token. Every other byte of the value stays as Spark wrote it, and the
plaintext exists only in the publishing worker's memory, never in Spark's cache or shuffle files.

A value that does not decrypt either fails the task (``on_error=fail``: the reason names the column
and the row's event id, never the value) or, with ``on_error=dlq``, keeps its raw row JSON (token
untouched) and is marked in the publisher's ``ERROR`` column: the publisher sets it aside on the
run's dead-letter topic like any other bad record, so ``confirmed + dead_lettered == rows_selected``.
In that mode each batch also carries its values as read (the publisher's ``ORIGINAL`` column): a row
that decrypted but was then refused (too large for the topic, say) is dead-lettered with its tokens,
never its plaintext, so the dead-letter topic holds no more than the backup did.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa

from spark_job.arrow_map import ArrowMapFunction
from spark_job.pii.envelope import DecryptError, decrypt_value
from spark_job.pii.keys import KeyResolver
from spark_job.publish.publisher import ERROR, ORIGINAL
from spark_job.spec.decrypt import Decrypt
from spark_job.spec.model import JobSpec


@dataclass(frozen=True)
class DecryptPlan:
    """What a task needs to decrypt, decided on the driver and shipped with the closure."""

    decrypt: Decrypt
    event_id_column: str
    keep_bad_rows: bool = False  # on_error=dlq: mark undecryptable rows instead of failing


def decrypting_body(spec: JobSpec, body: ArrowMapFunction) -> ArrowMapFunction:
    """``body`` fed with decrypted batches."""
    assert spec.decrypt is not None
    plan = DecryptPlan(
        decrypt=spec.decrypt, event_id_column=spec.event_id_column, keep_bad_rows=spec.on_error == "dlq"
    )
    return partial(_run, plan, body)


def _run(
    plan: DecryptPlan, body: ArrowMapFunction, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    yield from body(decrypted_batches(plan, batches))


def decrypted_batches(plan: DecryptPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Batches with declared columns in plaintext; a bad row is fatal, or marked in ``ERROR`` (with
    every row's value as read in ``ORIGINAL``, for its dead letter)."""
    resolve = KeyResolver(plan.decrypt.data_keys, plan.decrypt.kms, plan.decrypt.local_key_dir)
    for batch in batches:
        values: list[Any] = batch.column(1).to_pylist()
        plain: list[bytes] = []
        errors: list[str | None] = []
        for value in values:
            try:
                plain.append(decrypt_row(value, plan, resolve))
                errors.append(None)
            except DecryptError as error:
                if not plan.keep_bad_rows:
                    raise
                plain.append(value)
                errors.append(str(error))
        columns = [batch.column(0), pa.array(plain, batch.schema.field(1).type), *batch.columns[2:]]
        names = list(batch.schema.names)
        if plan.keep_bad_rows:
            columns += [pa.array(errors, pa.string()), batch.column(1)]
            names += [ERROR, ORIGINAL]
        yield pa.RecordBatch.from_arrays(columns, names=names)


def decrypt_row(value: bytes, plan: DecryptPlan, resolve: KeyResolver) -> bytes:
    """The row JSON with each declared column's token replaced by its plaintext, in place."""
    row = json.loads(value)
    event_id = row.get(plan.event_id_column)
    event = None if event_id is None else str(event_id)
    text = value.decode("utf-8")
    for column in plan.decrypt.columns:
        token = row.get(column)
        if token is None:
            continue  # null (to_json leaves the field out): nothing to decrypt
        if not isinstance(token, str):
            raise DecryptError(
                "not an encrypted value (expected a base64 string)", column=column, event_id=event
            )
        try:
            plain = decrypt_value(token, resolve)
        except DecryptError as error:
            raise error.at(column, event) from None
        text = _splice(text, column, token, plain, event)
    return text.encode("utf-8")


def _splice(text: str, column: str, token: str, plain: str, event: str | None) -> str:
    """Replace ``"column":"token"`` by ``"column":"plain"`` (Spark writes compact JSON)."""
    needle = f"{json.dumps(column, ensure_ascii=False)}:{json.dumps(token)}"
    if text.count(needle) != 1:
        raise DecryptError("value not found in the row's JSON", column=column, event_id=event)
    return text.replace(
        needle, f"{json.dumps(column, ensure_ascii=False)}:{json.dumps(plain, ensure_ascii=False)}"
    )
